//go:build !unix

package memory

func lockDir(string) (func(), error) { return func() {}, nil }
