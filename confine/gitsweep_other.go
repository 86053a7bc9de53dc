//go:build !linux

package confine

// nestedGitPins: the git sweep and the pins of nested repositories are
// Linux-only (see gitsweep.go).
func nestedGitPins(roots []string) (dirs, links []string) { return nil, nil }
