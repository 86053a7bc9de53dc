package confine

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// PhasesEnv names a developer's knob: set to a file path, every process of
// this build appends one line per phase of its start and of each spawn
// ("pid name unix-nanoseconds") to that file, so where a one-shot `exec`
// spends its milliseconds can be measured from outside (docs/speed.md, "Speed").
// Unset, Phase costs one branch.
const PhasesEnv = "EVENER_MCP_PHASES"

var phases = struct {
	sync.Mutex // guards buf and the appends to the file at path
	path       string
	buf        []byte
}{path: os.Getenv(PhasesEnv)}

// Phase records that the named phase starts now (a no-op unless PhasesEnv
// is set).
func Phase(name string) {
	if phases.path == "" {
		return
	}
	now := time.Now().UnixNano()
	phases.Lock()
	phases.buf = fmt.Appendf(phases.buf, "%d %s %s\n", os.Getpid(), name, strconv.FormatInt(now, 10))
	phases.Unlock()
}

// FlushPhases appends what Phase recorded to the PhasesEnv file.
func FlushPhases() {
	if phases.path == "" {
		return
	}
	phases.Lock()
	defer phases.Unlock()
	f, err := os.OpenFile(phases.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	_, _ = f.Write(phases.buf)
	f.Close()
	phases.buf = phases.buf[:0]
}
