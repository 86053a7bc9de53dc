package confine

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Host Unix sockets (docs/security.md, "What is enforced", "Denylist"): host services
// listen on pathname Unix sockets. A read-only bind of "/" does not stop
// connect(2), and an unshared network namespace does not cover pathname
// sockets, so every socket a host process has bound where the sandbox could
// reach it is masked, not only the daemon sockets of daemonSockets:
//
//   - the pathname sockets the server's network namespace lists in
//     /proc/net/unix, read at every spawn. Sockets bound by sandboxed
//     processes live in the sandboxes' own network namespaces and are not
//     listed, so a session keeps its own sockets; a socket a host process
//     made in the worktree (a dev server's) is the host's and is masked
//     like any other. A socket bound after the spawn starts is not seen:
//     that race is what serviceSocketDirs narrows;
//   - serviceSocketDirs, masked whole, so a service that (re)creates its
//     socket later is still out of reach.
//
// A socket that lies where the sandbox sees something else anyway (its
// private /tmp, /dev, /proc, /sys, /run/user, a masked directory, the
// server's scratch parent) is left alone: Plan filters those lexically.

// serviceSocketDirs are directories that hold the sockets of common host
// services; each is masked whole where it exists.
var serviceSocketDirs = []string{
	"/run/postgresql", "/var/run/postgresql", "/run/mysqld", "/var/run/mysqld",
	"/run/redis", "/var/run/redis", "/run/valkey", "/run/memcached", "/run/mongodb",
	"/run/php", "/run/php-fpm", "/run/docker", "/run/containerd", "/run/podman",
	"/run/libvirt", "/var/run/libvirt", "/run/lxd", "/var/snap/lxd/common/lxd",
	"/run/incus", "/var/lib/incus", "/run/crio", "/run/k3s", "/run/flannel",
	"/run/rabbitmq", "/run/dovecot", "/run/cups", "/var/run/cups", "/run/avahi-daemon",
	"/run/systemd/journal", "/run/systemd/io.systemd.Credentials", "/run/systemd/userdb",
}

// procNetUnix is where the server's network namespace lists its Unix
// sockets (a variable for tests).
var procNetUnix = "/proc/net/unix"

// boundSocketPaths returns the distinct pathname sockets in procNetUnix, as
// bound (one entry per listener, however many connections share its path).
// Abstract ("@...") and unnamed sockets are skipped: the sandbox's own
// network namespace already hides abstract ones.
func boundSocketPaths() []string {
	b, err := os.ReadFile(procNetUnix)
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]struct{}{}
	// "Num: RefCount Protocol Flags Type St Inode Path": the path is what
	// follows the seventh space-separated field.
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		rest := line
		for f := 0; f < 7 && rest != nil; f++ {
			rest = bytes.TrimLeft(rest, " ")
			if i := bytes.IndexByte(rest, ' '); i >= 0 {
				rest = rest[i+1:]
			} else {
				rest = nil
			}
		}
		if len(rest) < 2 || rest[0] != '/' {
			continue
		}
		if _, ok := seen[string(rest)]; ok {
			continue
		}
		p := string(rest)
		seen[p] = struct{}{}
		out = append(out, p)
	}
	return out
}

// inspectHostSockets fills l.HostSockets with the real location of every
// socket bound in the server's network namespace that exists and is still
// a socket, and l.SocketDirs with the serviceSocketDirs that exist, each
// kept only if visible says the sandbox could see it.
func inspectHostSockets(l *Layout, visible func(string) bool) {
	for _, s := range boundSocketPaths() {
		sp, ok := realLocation(s)
		if !ok || !visible(sp) || slices.Contains(l.HostSockets, sp) || ownBridge(sp) {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(sp, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			continue // gone, or replaced by something that is not a socket
		}
		// connect(2) needs write permission on the socket and a path to
		// it; where this identity has neither, there is nothing to mask
		// (and an unprivileged bubblewrap could not reach the spot). For
		// a root server this is the view without the capabilities it
		// dropped at start (DropServerCapabilities).
		if unix.Access(sp, unix.W_OK) != nil {
			continue
		}
		l.HostSockets = append(l.HostSockets, sp)
	}
	for _, d := range serviceSocketDirs {
		if sp, ok := realLocation(d); ok && visible(sp) && !slices.Contains(l.SocketDirs, sp) {
			if k, _ := lstatKind(sp); k == PathDir && unix.Access(sp, unix.X_OK) == nil {
				l.SocketDirs = append(l.SocketDirs, sp)
			}
		}
	}
}

// ownBridge reports whether socket p lies in a directory an evener-mcp
// server made for a session's egress bridge or scratch (evener-egress-*,
// evs-*, evener-mcp-*). Those come and go with their sessions, so a mask
// planned for one can find its mount point gone (bubblewrap then fails
// the spawn: it cannot create a destination under a read-only tree), and
// they need none: every bridge leads only to proxies that demand their own
// session's random credentials.
func ownBridge(p string) bool {
	dir := filepath.Base(filepath.Dir(p))
	return slices.ContainsFunc([]string{"evener-mcp-", "evs-", "evener-egress-"}, func(pre string) bool { return strings.HasPrefix(dir, pre) })
}

// hostSocketHidden reports whether the host socket p needs no mask: it
// lies where the sandbox sees something else anyway, or a mask of the
// plan covers it already.
func hostSocketHidden(p string, l Layout, pol *Policy) bool {
	return notHostView(p, l, pol) || underAny(p, l.SocketDirs) || slices.Contains(l.Sockets, p)
}

// notHostView reports whether the sandbox sees something other than the
// host's p: p is outside restricted mode's bound roots, or under a cover
// (the private /tmp, /dev, /proc, /sys, /run/user, the server's scratch
// parent) and not under a root bound back after it, or in a masked
// directory.
func notHostView(p string, l Layout, pol *Policy) bool {
	back := append(append(pol.WriteRoots(), pol.Workdir(), l.Scratch), pol.AddDirs()...)
	back = append(back, l.HookDirs...)
	back = append(back, pol.StateRW()...)
	if pol.Mode() == ModeRestricted {
		// An empty root: only what is bound into it is there.
		seen := slices.Clone(back)
		for _, r := range l.SystemRoots {
			if r.Kind == PathDir {
				seen = append(seen, r.Path)
			}
		}
		if !underAny(p, seen) {
			return true
		}
	}
	if underAny(p, l.denyDirs()) {
		return true
	}
	if underAny(p, back) {
		return false
	}
	covers := []string{"/tmp", "/dev", "/proc", "/sys", "/run/user"}
	if l.ScratchParent != "" {
		covers = append(covers, l.ScratchParent)
	}
	return underAny(p, covers)
}

// denyDirs are the masked directories of the layout.
func (l Layout) denyDirs() []string {
	var out []string
	for _, e := range l.Deny {
		if e.Kind == PathDir {
			out = append(out, e.Path)
		}
	}
	return out
}
