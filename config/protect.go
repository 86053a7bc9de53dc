package config

import "fmt"

// Protected paths and runner state directories (docs/protected-paths.md, "Protected paths
// and runner state"). protected_paths accumulate over every layer, the
// untrusted project file included (it may add, never remove: a protected
// path only narrows); runner_state_dirs widen what is writable, so only
// the trusted layers set them (the project file's are ignored with a
// warning, see project.go).

// protectPaths appends l's protected_paths and, for a trusted layer, its
// runner_state_dirs; relative paths resolve against base.
func (m *merger) protectPaths(l *layer, base string, trusted bool) error {
	for _, d := range l.Protected {
		p, err := m.path(d, base)
		if err != nil {
			return fmt.Errorf("protected_paths: %w", err)
		}
		m.c.Spec.Protected = appendNew(m.c.Spec.Protected, p)
	}
	if !trusted {
		return nil
	}
	for _, d := range l.StateRW {
		p, err := m.path(d, base)
		if err != nil {
			return fmt.Errorf("runner_state_dirs: %w", err)
		}
		m.c.Spec.StateRW = appendNew(m.c.Spec.StateRW, p)
	}
	return nil
}

// protectFlags applies --protect and --state-rw (relative to the current
// directory).
func (m *merger) protectFlags(f Flags) error {
	for _, d := range f.Protect {
		p, err := m.path(d, ".")
		if err != nil {
			return fmt.Errorf("--protect: %w", err)
		}
		m.c.Spec.Protected = appendNew(m.c.Spec.Protected, p)
	}
	for _, d := range f.StateRW {
		p, err := m.path(d, ".")
		if err != nil {
			return fmt.Errorf("--state-rw: %w", err)
		}
		m.c.Spec.StateRW = appendNew(m.c.Spec.StateRW, p)
	}
	return nil
}
