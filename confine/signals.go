package confine

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// inheritedIgnored are the signals a Go program keeps ignored when it was
// started with them ignored (every other one gets the runtime's handler,
// which an exec resets to the default). A server started in the
// background by a non-interactive shell (`cmd &`) or under nohup has
// SIGINT or SIGHUP ignored, and every process it starts would inherit
// that: C-c in a terminal would interrupt nothing, and a command's own
// `kill -INT` would do nothing.
var inheritedIgnored = []os.Signal{syscall.SIGINT, syscall.SIGHUP}

var defaultSignals sync.Once

// defaultSignalsForChildren gives every process started from here on the
// default disposition of the signals in inheritedIgnored. The server's
// own stays as it was: a signal it ignored is received here and dropped
// (a handled signal is reset to the default by exec, an ignored one is
// not). A handler the program installed itself is left alone.
func defaultSignalsForChildren() {
	defaultSignals.Do(func() {
		var ignored []os.Signal
		for _, s := range inheritedIgnored {
			if signal.Ignored(s) {
				ignored = append(ignored, s)
			}
		}
		if len(ignored) == 0 {
			return
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, ignored...)
		go func() {
			for range ch {
			}
		}()
	})
}
