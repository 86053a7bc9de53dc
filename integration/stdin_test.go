//go:build linux

package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStdinNotAPipe: a stdio server reads a pipe or a socket through the
// runtime's poller (cmd/evener-mcp-server, stdin_linux.go); any other
// standard input, here a regular file of requests, is read as it is and
// answered. A pipe it was given is left in blocking mode when it ends, for
// whoever shares it.
func TestStdinNotAPipe(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.chown(t)
		reqs := filepath.Join(e.root, "requests.jsonl")
		writeFile(t, reqs, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"file","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":1,"method":"tools/list"}
`)
		if err := os.Chmod(reqs, 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(reqs)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		cmd := exec.Command(binPath)
		cmd.Env = e.serverEnv(t)
		cmd.Dir = e.work
		cmd.Stdin = in
		var out bytes.Buffer
		cmd.Stdout = &out
		if !e.id.root && os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("the server did not end at the end of its input")
		}
		for _, want := range []string{`"id":0,"result"`, `"id":1,"result":{"tools":[`} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("no %s in the answers to a file of requests:\n%s", want, out.String())
			}
		}

		// A pipe: answered, and left blocking.
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		body, _ := os.ReadFile(reqs)
		cmd = exec.Command(binPath)
		cmd.Env = e.serverEnv(t)
		cmd.Dir = e.work
		cmd.Stdin = pr
		out.Reset()
		cmd.Stdout = &out
		cmd.SysProcAttr = nil
		if !e.id.root && os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_, _ = pw.Write(body)
		time.Sleep(500 * time.Millisecond) // answered before the end of input cancels anything
		pw.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the server over a pipe: %v", err)
		}
		if !strings.Contains(out.String(), `"id":1,"result":{"tools":[`) {
			t.Errorf("no tools/list answer over a pipe:\n%s", out.String())
		}
		rc, err := pr.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var flags int
		_ = rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
		if err != nil {
			t.Fatal(err)
		}
		if flags&unix.O_NONBLOCK != 0 {
			t.Errorf("the server left its standard input pipe non-blocking")
		}
	})
}
