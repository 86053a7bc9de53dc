//go:build !linux

package confine

// DropServerCapabilities is Linux-only: elsewhere root has no capability
// sets to narrow, and the file layer is not offered (see ErrNoFileLayer).
func DropServerCapabilities() error { return nil }

// DropBeforeExec is Linux-only (caps_linux.go): nothing to drop or hand on
// elsewhere.
func DropBeforeExec() ([]string, error) { return nil, nil }
