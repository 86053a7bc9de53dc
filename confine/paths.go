package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// defaultDenylist is the credential denylist (docs/security.md, "What is enforced",
// "Denylist") resolved against home. Every entry is masked in both layers,
// under its literal and its resolved spelling.
func defaultDenylist(home, xdgConfig string) []string {
	rel := []string{
		".ssh", ".aws", ".config/gcloud", ".netrc", ".config/evener", ".config/evener-mcp",
		".gnupg", ".docker/config.json", ".kube", ".git-credentials",
		// The equally sensitive ones beyond that first floor.
		".npmrc", ".pypirc", ".config/gh", ".cargo/credentials.toml", ".cargo/credentials",
		".pgpass", ".vault-token", ".azure", ".config/hub", ".terraform.d/credentials.tfrc.json",
		".bash_history", ".zsh_history", ".local/share/fish/fish_history", ".python_history",
		".psql_history", ".mysql_history", ".node_repl_history", ".lesshst", ".password-store",
		".local/share/keyrings", ".mozilla", ".config/google-chrome", ".config/chromium",
		".local/state/evener-mcp",
		// Agent hosts' own credentials (file-exact: the rest of these
		// directories is the agents' settings, which tools may read).
		".claude/.credentials.json", ".codex/auth.json",
		".gemini/oauth_creds.json", ".gemini/mcp-oauth-tokens.json", ".gemini/google_accounts.json",
		// Cloud, container-VM and build-tool credentials.
		".config/rclone/rclone.conf", ".docker/desktop", ".colima", ".lima",
		".m2/settings.xml", ".m2/settings-security.xml", ".gradle/gradle.properties",
	}
	out := make([]string, 0, len(rel)+4)
	for _, r := range rel {
		out = append(out, filepath.Join(home, r))
	}
	if xdgConfig != "" && filepath.Clean(xdgConfig) != filepath.Join(home, ".config") {
		out = append(out,
			filepath.Join(xdgConfig, "evener"),
			filepath.Join(xdgConfig, "evener-mcp"),
			filepath.Join(xdgConfig, "gcloud"),
			filepath.Join(xdgConfig, "gh"),
			filepath.Join(xdgConfig, "rclone", "rclone.conf"))
	}
	return out
}

// localHomes are the home directories of the host's people: root's and
// every account's with a uid from 1000 (login.defs' UID_MIN) that
// /etc/passwd names (nobody's excepted), and every directory directly
// under /home; each symlink-resolved, existing, a directory, and not "/",
// without duplicates, in a stable order. System accounts' homes (/bin,
// /var/lib/postgresql) are left out: they are system directories, and
// whatever secret such an account keeps there mode 0600 is out of reach
// of a root server that dropped its capabilities.
func localHomes() []string {
	var cands []string
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for l := range strings.Lines(string(b)) {
			f := strings.Split(strings.TrimSpace(l), ":")
			if len(f) < 6 || !filepath.IsAbs(f[5]) {
				continue
			}
			if uid, err := strconv.Atoi(f[2]); err == nil && (uid == 0 || uid >= 1000 && uid != 65534) {
				cands = append(cands, f[5])
			}
		}
	}
	if ents, err := os.ReadDir("/home"); err == nil {
		for _, e := range ents {
			cands = append(cands, filepath.Join("/home", e.Name()))
		}
	}
	var out []string
	for _, c := range cands {
		r, err := filepath.EvalSymlinks(c)
		if err != nil || r == "/" || slices.Contains(out, r) {
			continue
		}
		if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
			continue
		}
		out = append(out, r)
	}
	return out
}

// otherUsersDenylist is the credential denylist under every local home but
// home, for a server started by root: its commands run as kernel uid 0,
// which owns nothing of another user's home but may still read whatever
// its modes let "other" read (a world-readable ~/.aws/credentials).
func otherUsersDenylist(home string) []string {
	var out []string
	for _, h := range localHomes() {
		if h == filepath.Clean(home) || slices.Contains(resolvedSpellings(home), h) {
			continue
		}
		out = append(out, defaultDenylist(h, "")...)
	}
	return out
}

// PseudoDenylist is the non-removable floor of pseudo-filesystems and daemon
// control sockets. For spawned processes /proc is a fresh procfs of the
// sandbox's own PID namespace and /dev a minimal devtmpfs, so the host ones
// are never visible; the sockets are masked where they exist.
var PseudoDenylist = []string{
	"/proc", "/sys", "/dev/fd", "/dev/mem", "/run/user",
	"/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock",
	"/run/containerd/containerd.sock", "/run/dbus/system_bus_socket",
	"/var/run/dbus/system_bus_socket", "/run/snapd.socket", "/run/systemd/private",
}

// daemonSockets are the privileged control sockets masked for spawned
// processes (a read-only bind of / does not stop a connect()).
var daemonSockets = PseudoDenylist[5:]

// procMasks are procfs entries that leak host kernel state to a reader that
// is kernel uid 0 (a server started by root). Writes are handled wholesale:
// the sandbox's procfs is remounted read-only, and bwrap itself covers
// /proc/irq and /proc/bus.
var procMasks = []string{
	// Readable by kernel uid 0: keys it can view, kernel timers.
	"/proc/keys", "/proc/timer_list", "/proc/sched_debug",
	// Mode 0400 and read by owner alone, so readable by kernel uid 0
	// without capabilities: kernel heap and vmalloc layout (addresses and
	// caller symbols), page allocator state.
	"/proc/slabinfo", "/proc/vmallocinfo", "/proc/pagetypeinfo",
	// Address maps and page tables, gated today by capabilities or
	// kptr_restrict, masked in case a host's settings open them.
	"/proc/kallsyms", "/proc/iomem", "/proc/ioports", "/proc/kpageflags", "/proc/kpagecount",
	"/proc/kpagecgroup", "/proc/kmsg",
	// Not in mainline, present on some hosts' kernels: every host
	// program's CPU use, by name.
	"/proc/program_cpu",
	// Refused without capabilities at open, masked in case a kernel does not.
	"/proc/kcore", "/proc/sysrq-trigger",
}

// systemReadRoots are restricted mode's read-only system roots (docs/security.md,
// "What is enforced", the table of modes).
var systemReadRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/opt", "/nix/store"}

// globalGitConfigFiles returns the two files git-config(1) names under FILES,
// admitted only if each exists and is not a directory (file-exact: the
// file is granted, never its directory).
func globalGitConfigFiles(home, xdgConfig string) []string {
	xdg := xdgConfig
	if xdg == "" {
		xdg = filepath.Join(home, ".config")
	}
	var out []string
	for _, c := range []string{filepath.Join(xdg, "git", "config"), filepath.Join(home, ".gitconfig")} {
		fi, err := os.Stat(c)
		if err != nil || fi.IsDir() || !fi.Mode().IsRegular() {
			continue
		}
		// The same shared-tree guard as every other grant: an XDG config
		// home of "/" must not turn this into a grant of "/git/config".
		if sharedTreeGuard(c, home, "", nil) != nil {
			continue
		}
		out = append(out, c)
	}
	return out
}

// errSharedTree is returned by sharedTreeGuard.
var errSharedTree = errors.New("refused: a shared, multi-tenant tree")

// sharedTreeGuard refuses a candidate grant root that is at or above home,
// the worktree (when given) or a temp root, or fewer than two components
// deep, or the same directory as an entry directly under "/": a grant is
// never a shared, multi-tenant tree (docs/hooks.md, "Hooks", "Where it runs").
// candidate must be absolute; it is judged both as spelled and
// symlink-resolved.
func sharedTreeGuard(candidate, home, worktree string, temps []string) error {
	if !filepath.IsAbs(candidate) {
		return fmt.Errorf("%w: %s is not absolute", errSharedTree, candidate)
	}
	spellings := []string{filepath.Clean(candidate)}
	if r, err := filepath.EvalSymlinks(candidate); err == nil && r != spellings[0] {
		spellings = append(spellings, r)
	}
	// macOS: /System/Volumes/Data/Users/me is /Users/me through a firmlink
	// (stripped before this check, so the alias cannot pass the guard).
	for _, c := range spellings {
		if Within(c, dataVolume) && c != dataVolume {
			spellings = append(spellings, strings.TrimPrefix(c, dataVolume))
		}
	}
	for _, c := range spellings {
		if depth(c) < 2 {
			return fmt.Errorf("%w: %s is fewer than two components deep", errSharedTree, c)
		}
		for _, above := range append([]string{home, worktree}, temps...) {
			if above == "" {
				continue
			}
			for _, a := range resolvedSpellings(above) {
				if Within(a, c) {
					return fmt.Errorf("%w: %s is at or above %s", errSharedTree, c, a)
				}
			}
		}
	}
	// The same directory as an entry directly under / (say /var reached
	// through a deeper symlink, or bind-mounted elsewhere) is refused too.
	if fi, err := os.Stat(candidate); err == nil && fi.IsDir() {
		for name, ti := range topLevelDirs() {
			if os.SameFile(fi, ti) {
				return fmt.Errorf("%w: %s is the directory /%s", errSharedTree, candidate, name)
			}
		}
	}
	return nil
}

// topLevelDirs are the directories directly under /, read once.
var topLevelDirs = sync.OnceValue(func() map[string]os.FileInfo {
	out := map[string]os.FileInfo{}
	ents, _ := os.ReadDir("/")
	for _, e := range ents {
		if ti, err := os.Stat("/" + e.Name()); err == nil && ti.IsDir() {
			out[e.Name()] = ti
		}
	}
	return out
})

func resolvedSpellings(p string) []string {
	out := []string{filepath.Clean(p)}
	// One stat first: most denylist entries do not exist, and where stat
	// fails (absent, dangling, unreachable) EvalSymlinks fails too, after
	// an lstat per component.
	if _, err := os.Stat(p); err != nil {
		return out
	}
	if r, err := filepath.EvalSymlinks(p); err == nil && r != out[0] {
		out = append(out, r)
	}
	return out
}

func depth(p string) int {
	p = strings.Trim(filepath.Clean(p), "/")
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}

// Within reports whether p is root or lies beneath it, lexically.
func Within(p, root string) bool {
	return withinClean(filepath.Clean(p), filepath.Clean(root))
}

// withinClean is Within for paths already cleaned (no allocation: it runs
// for every denylist spelling on every file-tool call).
func withinClean(p, root string) bool {
	if root == "/" {
		return true
	}
	return p == root || (len(p) > len(root) && p[len(root)] == '/' && p[:len(root)] == root)
}

func canonicalDir(d string) (string, error) {
	if d == "" {
		var err error
		if d, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(r)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", d)
	}
	return r, nil
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
