package confine

import (
	"bytes"
	"io"
	"sync"

	"golang.org/x/sys/unix"
)

// A host Unix socket the spawn's inspection found (mountplan_sockets.go) is
// masked by a bind over its path. A host program that removes its socket
// between the inspection and bubblewrap's mount setup (a client closing,
// a test harness ending) leaves bubblewrap without a mount point under a
// read-only tree: bubblewrap prints "Can't create file at PATH" (or "Can't
// mkdir parents for PATH") and exits 1 before the command exists. Nothing
// ran, and the socket that would have needed the mask is gone, so Run
// builds the sandbox again from a fresh inspection, once
// (docs/residuals.md).

// whyHostSocket is the Why of a host socket's mask in the mount plan.
const whyHostSocket = "host Unix socket"

// hostSocketMasks are the plan's host-socket mask points.
func hostSocketMasks(p MountPlan) []string {
	var out []string
	for _, m := range p {
		if m.Kind == MountMaskFile && m.Why == whyHostSocket {
			out = append(out, m.Dst)
		}
	}
	return out
}

// setupSniffer passes a spawn's output through, except a first line that
// is bubblewrap's failure to make the mount point of one of the masks: it
// holds that line back until it knows whether the spawn is retried
// (dropped) or not (flushed, in order, before anything written after it).
type setupSniffer struct {
	w     io.Writer
	masks []string
	// mu guards every field below (stdout and stderr may share a sniffer
	// and are copied by two goroutines).
	mu      sync.Mutex
	first   bool   // no byte seen yet
	pending []byte // bytes of the first line, held until it ends or proves harmless
	held    []byte // a complete first line naming a mask point
	path    string // the mask point held names
}

func newSetupSniffer(w io.Writer, masks []string) *setupSniffer {
	return &setupSniffer{w: w, masks: masks, first: true}
}

func (s *setupSniffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(b)
	if s.first {
		s.pending = append(s.pending, b...)
		i := bytes.IndexByte(s.pending, '\n')
		if i < 0 && len(s.pending) < 4096 && bytes.HasPrefix([]byte("bwrap: "), s.pending[:min(len(s.pending), 7)]) {
			return n, nil // maybe bubblewrap's line: wait for its end
		}
		s.first = false
		line := s.pending
		if i >= 0 {
			line = s.pending[:i+1]
		}
		if path, ok := s.mountPointFailure(line); ok {
			s.held, s.path = line, path
			b = s.pending[len(line):]
		} else {
			b = s.pending
		}
		s.pending = nil
		if len(b) == 0 {
			return n, nil
		}
	}
	if err := s.flushLocked(); err != nil {
		return n, err
	}
	_, err := s.w.Write(b)
	return n, err
}

// mountPointFailure reports whether line is bubblewrap's failure to make a
// mask's mount point, and which.
func (s *setupSniffer) mountPointFailure(line []byte) (string, bool) {
	for _, pre := range []string{"bwrap: Can't create file at ", "bwrap: Can't mkdir parents for "} {
		rest, ok := bytes.CutPrefix(line, []byte(pre))
		if !ok {
			continue
		}
		for _, m := range s.masks {
			if r, ok := bytes.CutPrefix(rest, []byte(m)); ok && (len(r) == 0 || r[0] == ':' || r[0] == '\n') {
				return m, true
			}
		}
	}
	return "", false
}

// retry reports whether the spawn, which exited with code, failed only
// because a masked host socket went away before its sandbox was built:
// bubblewrap said so, it exited 1, and the socket is no longer there.
// Otherwise what was held back is written.
func (s *setupSniffer) retry(code int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil && code == 1 && len(s.pending) == 0 {
		var st unix.Stat_t
		if err := unix.Lstat(s.path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return true
		}
	}
	_ = s.flushLocked()
	return false
}

// flushLocked writes what is held back, pending first-line bytes included.
func (s *setupSniffer) flushLocked() error {
	held := append(s.held, s.pending...)
	s.held, s.pending = nil, nil
	if len(held) == 0 {
		return nil
	}
	_, err := s.w.Write(held)
	return err
}
