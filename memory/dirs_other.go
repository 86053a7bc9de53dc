//go:build !linux

package memory

import "errors"

// Without Linux there is no confined file layer, so no memory root opens
// (docs/memory.md, "Memory"); these only keep the package building.

var errNoHeldDirs = errors.New("memory needs Linux")

func layout(string, []string) (int, int, error)        { return -1, -1, errNoHeldDirs }
func recordProjectAt(int, string, string) error        { return errNoHeldDirs }
func lockHeld(int) (func(), error)                     { return nil, errNoHeldDirs }
func closeHeld(int) error                              { return nil }
func (r *Root) removeDirectory(string, []string) error { return errNoHeldDirs }
func (r *Root) pruneParents([]string)                  {}
