//go:build !linux

package main

import "os"

// pollableStdin is standard input (see stdin_linux.go).
func pollableStdin() (*os.File, func()) { return os.Stdin, func() {} }
