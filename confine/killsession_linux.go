package confine

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// killSession kills every process of session sid: what a terminal's
// program started without a sandbox left behind when it ended (docs/terminals.md,
// "Terminals"; a sandboxed one ends with its PID namespace). Bounded by the
// process table, read once.
func killSession(sid int) {
	if sid <= 1 {
		return
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state ppid pgrp session.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 3 && f[3] == strconv.Itoa(sid) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
