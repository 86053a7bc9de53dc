//go:build !linux && !darwin

package confine

import (
	"context"
	"errors"
	"os"
)

var errNoBackend = errors.New("no sandbox backend in this build")

// Session is unavailable outside Linux and macOS in this build.
type Launcher struct{ p *Policy }

func NewLauncher(p *Policy, envPassthrough []string) (*Launcher, error) { return nil, errNoBackend }
func NewLauncherUnder(p *Policy, envPassthrough []string, parent string) (*Launcher, error) {
	return nil, errNoBackend
}
func (s *Launcher) Policy() *Policy         { return s.p }
func (s *Launcher) Scratch() string         { return os.TempDir() }
func (s *Launcher) Close() error            { return nil }
func (s *Launcher) Narrow(np *Policy) error { return errNoBackend }

// SetEgress is unavailable outside Linux and macOS in this build.
func (s *Launcher) SetEgress(b EgressBridge) error { return errNoBackend }

func (s *Launcher) Prepare(c Command) (*Prepared, error) { return nil, errNoBackend }
func (s *Launcher) Run(ctx context.Context, c Command) (Result, error) {
	return Result{ExitCode: -1}, errNoBackend
}

// SealInheritedFDs is a no-op outside Linux and macOS in this build.
func SealInheritedFDs() error { return nil }

func (s *Launcher) StartSpawner() {}
