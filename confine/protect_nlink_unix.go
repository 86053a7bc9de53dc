//go:build unix

package confine

import (
	"io/fs"
	"syscall"
)

// fileNlink is the link count of the file fi describes (1 when unknown).
func fileNlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
