//go:build !unix

package confine

import "io/fs"

// fileNlink is 1 where this build cannot read a link count.
func fileNlink(fs.FileInfo) uint64 { return 1 }
