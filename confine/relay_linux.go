package confine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// RunRelay is the hidden helper's body: listen on the namespace's loopback,
// relay to the bridge sockets, run the command, exit with its status.
func RunRelay(args []string) int {
	// Not dumpable: the command runs as the same user beside it, and must
	// not read or write this process's memory through /proc.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "evener-mcp relay: no command")
		return 125
	}
	if code := listenRelays(relayHTTPSock, relaySOCKSSock); code != 0 {
		return code
	}
	// The sandbox's Landlock layer (landlock_linux.go) binds this thread,
	// which starts the command: the relay's other threads stay as they are.
	runtime.LockOSThread()
	if code := landlockSelf(); code != 0 {
		return code
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "evener-mcp relay: %v\n", err)
		return 127
	}
	return 0
}

// listenRelays listens on the namespace's two proxy ports and relays each
// to its bridge socket; non-zero is the exit code of a failure.
func listenRelays(httpSock, socksSock string) int {
	for _, l := range []struct {
		port int
		sock string
	}{{RelayHTTPPort, httpSock}, {RelaySOCKSPort, socksSock}} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(l.port))
		if err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp relay: listen on port %d: %v\n", l.port, err)
			return 125
		}
		go serveRelay(ln, l.sock)
	}
	return 0
}
