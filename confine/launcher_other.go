//go:build !linux && !darwin

package confine

import (
	"context"
	"errors"
	"os"
)

var errNoBackend = errors.New("no sandbox backend in this build")

// Session is unavailable outside Linux and macOS in this build.
type Session struct{ p *Policy }

func NewSession(p *Policy, envPassthrough []string) (*Session, error) { return nil, errNoBackend }
func NewSessionUnder(p *Policy, envPassthrough []string, parent string) (*Session, error) {
	return nil, errNoBackend
}
func (s *Session) Policy() *Policy         { return s.p }
func (s *Session) Scratch() string         { return os.TempDir() }
func (s *Session) Close() error            { return nil }
func (s *Session) Narrow(np *Policy) error { return errNoBackend }

// SetEgress is unavailable outside Linux and macOS in this build.
func (s *Session) SetEgress(b EgressBridge) error { return errNoBackend }

func (s *Session) Prepare(c Command) (*Prepared, error) { return nil, errNoBackend }
func (s *Session) Run(ctx context.Context, c Command) (Result, error) {
	return Result{ExitCode: -1}, errNoBackend
}

// SealInheritedFDs is a no-op outside Linux and macOS in this build.
func SealInheritedFDs() error { return nil }

func (s *Session) StartSpawner() {}
