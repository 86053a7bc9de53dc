//go:build !linux

package confine

// DropServerCapabilities is Linux-only: elsewhere root has no capability
// sets to narrow, and the file layer is not offered (see ErrNoFileLayer).
func DropServerCapabilities() error { return nil }
