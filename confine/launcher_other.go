//go:build !linux && !darwin

package confine

import (
	"errors"
	"syscall"
)

var errNoBackend = errors.New("no sandbox backend in this build")

// osBackend: no sandbox backend outside Linux and macOS in this build, so
// NewLauncher fails and nothing else is reached.
type osBackend struct{}

type osSpawn struct{}

func (b *osBackend) ready() error { return errNoBackend }
func (b *osBackend) prepare(s *Launcher, p *Policy, c Command, dir string, over map[string]string) (*Prepared, error) {
	return nil, errNoBackend
}
func (b *osBackend) setEgress(s *Launcher, eg EgressBridge) error         { return errNoBackend }
func (b *osBackend) start(s *Launcher, sp *spawn, onStart func()) error   { return errNoBackend }
func (b *osBackend) release(s *Launcher, sp *spawn, onStart func()) error { return errNoBackend }
func (b *osBackend) end(s *Launcher, sp *spawn)                           {}
func (b *osBackend) startSpawner(s *Launcher)                             {}
func (b *osBackend) close(s *Launcher)                                    {}
func procAttr(sandboxed, terminal bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// SealInheritedFDs is a no-op outside Linux and macOS in this build.
func SealInheritedFDs() error { return nil }
