//go:build linux && !cgo

package confine

// cgoBuild: every thread is the Go runtime's, and
// syscall.AllThreadsSyscall changes all of them at once.
const cgoBuild = false

// earlyDrop: a build without cgo has no constructor that runs before the
// runtime (caps_cgo_linux.go), so nothing was dropped early.
func earlyDrop() (asked bool, err error) { return false, nil }
