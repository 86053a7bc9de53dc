//go:build linux || darwin

package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// NewLauncher creates the session's scratch directory (mode 0700).
func NewLauncher(p *Policy, envPassthrough []string) (*Launcher, error) {
	return NewLauncherUnder(p, envPassthrough, "")
}

func (s *Launcher) Policy() *Policy { return s.p.Load() }
func (s *Launcher) Scratch() string { return s.scratch }

// Narrow makes later spawns follow np, which must be no wider than the
// current policy: the same or a stricter mode, the network kept or turned
// off, the worktree kept or narrowed to a directory inside it. Processes
// already running keep the sandbox they started in.
func (s *Launcher) Narrow(np *Policy) error {
	cur := s.p.Load()
	switch {
	case !np.Mode().NoWiderThan(cur.Mode()):
		return fmt.Errorf("narrow: mode %s is wider than %s", np.Mode(), cur.Mode())
	case cur.Network() == NetworkOff && np.Network() != NetworkOff:
		return errors.New("narrow: the network cannot be turned on")
	case !Within(np.Workdir(), cur.Workdir()):
		return errors.New("narrow: the worktree cannot move outside the current one")
	case len(np.AddDirs()) > len(cur.AddDirs()):
		return errors.New("narrow: roots cannot be added")
	case cur.WritesBlocked() && !np.WritesBlocked():
		return errors.New("narrow: blocked writes cannot be unblocked")
	}
	s.p.Store(np)
	return nil
}

// resolveDir places the working directory inside the worktree, a write root
// or the scratch; never elsewhere.
func (s *Launcher) resolveDir(d string) (string, error) {
	p := s.p.Load()
	wd := p.Workdir()
	if d == "" {
		return wd, nil
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(wd, d)
	}
	d = filepath.Clean(d)
	if p.Mode() != ModeOff && !underAny(d, append(append(p.WriteRoots(), wd, s.scratch), p.AddDirs()...)) {
		return "", fmt.Errorf("working directory %s is outside the worktree", d)
	}
	r, err := filepath.EvalSymlinks(d)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	if p.Mode() != ModeOff && !underAny(r, append(append(p.WriteRoots(), wd, s.scratch), p.AddDirs()...)) {
		return "", fmt.Errorf("working directory %s resolves outside the worktree", d)
	}
	return r, nil
}

// removeAllForce removes dir even when a command left read-only directories
// in it (the Go module cache does).
func removeAllForce(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// prepareCommon is what every backend's Prepare starts with: the working
// directory, the variables every spawn sets, and, in mode off, the whole
// (unconfined) spawn.
func (s *Launcher) prepareCommon(c Command) (p *Policy, dir string, over map[string]string, off *Prepared, err error) {
	if len(c.Args) == 0 {
		return nil, "", nil, nil, errors.New("no command")
	}
	p = s.p.Load()
	if dir, err = s.resolveDir(c.Dir); err != nil {
		return nil, "", nil, nil, err
	}
	over = map[string]string{"PWD": dir}
	for k, v := range c.Env {
		over[k] = v
	}
	over["TMPDIR"] = s.scratch
	over["EVENER_SCRATCH_DIR"] = s.scratch
	if p.Mode() == ModeOff {
		env := EnvFloor(p.env, s.envPass, ModeOff, over, nil)
		path, err := exec.LookPath(c.Args[0])
		if err != nil {
			return nil, "", nil, nil, err
		}
		return p, dir, over, &Prepared{Path: path, Args: c.Args, Env: env, Dir: dir}, nil
	}
	return p, dir, over, nil, nil
}
