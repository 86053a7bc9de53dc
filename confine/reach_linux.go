package confine

import (
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// reachableWithoutCaps reports whether a process with this server's uid and
// groups but no capabilities (exactly what a sandboxed process is) could
// read or traverse path. A secret it could not reach needs no mask, and a
// mask costs a mount at every spawn. Any doubt answers true.
func reachableWithoutCaps(path string, isDir bool) bool {
	uid := uint32(os.Geteuid())
	gids := []uint32{uint32(os.Getegid())}
	if gs, err := os.Getgroups(); err == nil {
		for _, g := range gs {
			gids = append(gids, uint32(g))
		}
	}
	allowed := func(p string, need uint32) bool {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			return true
		}
		mode := st.Mode & 0o777
		switch {
		case st.Uid == uid:
			return mode&(need<<6) != 0
		case slices.Contains(gids, st.Gid):
			return mode&(need<<3) != 0
		}
		return mode&need != 0
	}
	// Every parent must be traversable.
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if !allowed(d, 0o1) {
			return false
		}
		if d == "/" {
			break
		}
	}
	if isDir {
		return allowed(path, 0o5) // r lists it, x reaches known names
	}
	return allowed(path, 0o4)
}

// canWrite reports whether this process may create entries in dir.
func canWrite(dir string) bool { return unix.Access(dir, unix.W_OK) == nil }
