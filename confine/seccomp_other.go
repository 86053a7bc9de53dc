//go:build !linux || !(amd64 || arm64)

package confine

import (
	"fmt"
	"runtime"
)

// SeccompProgram is only implemented for linux/amd64 and linux/arm64.
func SeccompProgram() ([]byte, error) {
	return nil, fmt.Errorf("confine: no seccomp filter for %s/%s", runtime.GOOS, runtime.GOARCH)
}

// SeccompDenied is empty where no filter exists.
func SeccompDenied() []string { return nil }
