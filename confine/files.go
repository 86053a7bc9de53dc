package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// The rules a file-tool Denial names. They are part of the tool contract
// (a denial's structured result carries the rule).
const (
	RuleDenylist    = "denylist"       // a masked credential or pseudo-filesystem path
	RuleOutside     = "outside-roots"  // not under a root the mode grants for this op
	RuleReadOnly    = "read-only-mode" // the mode writes nothing but the scratch
	RuleGitMetadata = "git-metadata"   // a .git component (any letter case) in a write, delete or rename
	RuleSymlink     = "symlink"        // a write/delete/rename through or onto a symlink
	RuleNotRegular  = "not-regular"    // FIFO, socket, device (would hang or leak)
	RuleInvalidPath = "invalid-path"   // NUL byte, leading ~, empty, not valid UTF-8
	RuleTooLarge    = "too-large"
	RuleProtected   = "protected" // a protected path, anything in it or an ancestor of it (--protect)
)

// ErrNoFileLayer is returned by NewFileAccess where this build has no
// race-safe file layer (it needs Linux's openat2): the file tools cannot be
// offered there, the shell still can.
var ErrNoFileLayer = errors.New("confined file access needs Linux (openat2) in this build")

// Denial is a refusal of a file operation the model can reason about: the
// operation, the mode, the offending path and the rule. Its message names
// the path by basename only, never a full host path of a secret.
type Denial struct {
	Op   string // "read", "write", "list", "delete", "rename", "resolve"
	Path string // workdir-relative when inside the workdir, else the cleaned path as given
	Base string // filepath.Base of the offending path (what messages name)
	Rule string // one of the Rule* constants
	Mode Mode
}

func (d *Denial) Error() string {
	return fmt.Sprintf("%s refused in %s mode: %q (rule: %s)", d.Op, d.Mode, d.Base, d.Rule)
}

// Info describes one path as a file tool sees it.
type Info struct {
	Display   string // the path as the model should see it
	Abs       string // the absolute, lexically cleaned path the syscall used
	Real      string // where the kernel actually found it (OpenRead/Stat), "" when unknown
	Size      int64
	Mode      os.FileMode
	IsDir     bool
	IsSymlink bool
	Nlink     uint64
	ModTime   time.Time
	Target    string // symlink target as read (Lstat of a symlink), for list_dir
}

// DirEntry is one child of a Dir, described without following it.
type DirEntry struct {
	Name   string
	Kind   PathKind
	Size   int64
	Mode   os.FileMode
	Target string // symlink target as read, for PathSymlink
}

// WriteOptions tunes WriteFile and Stage.Write.
type WriteOptions struct {
	// CreateParents creates missing parent directories (0755), one
	// component at a time relative to the held root.
	CreateParents bool
	// Mode is the permission of the written file; 0 keeps the existing
	// file's permission bits (setuid/setgid dropped) or uses 0644.
	Mode os.FileMode
}

// FileAccessOptions are the limits of a FileAccess; zero values take the
// defaults.
type FileAccessOptions struct {
	// MaxReadBytes bounds ReadFile and is what read tools should cap at
	// (default 10 MiB).
	MaxReadBytes int64
	// MaxWriteBytes bounds one file's content in WriteFile and Stage.Write
	// (default 10 MiB).
	MaxWriteBytes int64
	// DenyRefresh is how often the real locations of the denylist are
	// re-resolved (a ~/.ssh made a symlink mid-session); default 2 s,
	// negative: only at construction.
	DenyRefresh time.Duration
	// MaxDirNames bounds how many names Dir.Entries reads from one
	// directory before reporting truncation (default 1<<20).
	MaxDirNames int
	// HideBeside is the server-private directory that holds every
	// session's scratch (see NewLauncherUnder): everything in it but this
	// access's own scratch is refused like a masked path.
	HideBeside string
}

const (
	defaultMaxReadBytes  int64 = 10 << 20
	defaultMaxWriteBytes int64 = 10 << 20
	defaultDenyRefresh         = 2 * time.Second
	defaultMaxDirNames         = 1 << 20
)

func (o FileAccessOptions) withDefaults() FileAccessOptions {
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = defaultMaxReadBytes
	}
	if o.MaxWriteBytes <= 0 {
		o.MaxWriteBytes = defaultMaxWriteBytes
	}
	if o.DenyRefresh == 0 {
		o.DenyRefresh = defaultDenyRefresh
	}
	if o.MaxDirNames <= 0 {
		o.MaxDirNames = defaultMaxDirNames
	}
	return o
}

// cleanModelPath validates a model-supplied path and makes it absolute
// (relative to workdir) and lexically clean. It touches no filesystem.
func cleanModelPath(workdir, path string) (abs, display string, ok bool) {
	if path == "" || strings.IndexByte(path, 0) >= 0 || strings.HasPrefix(path, "~") || !utf8.ValidString(path) {
		return "", "", false
	}
	given := filepath.Clean(path)
	if filepath.IsAbs(given) {
		abs = given
	} else {
		abs = filepath.Join(workdir, given)
	}
	return abs, displayPath(workdir, abs, given), true
}

// displayPath is workdir-relative when abs lies inside the workdir, else
// the cleaned path as given.
func displayPath(workdir, abs, given string) string {
	if Within(abs, workdir) {
		if abs == workdir {
			return "."
		}
		return strings.TrimPrefix(abs, strings.TrimSuffix(workdir, "/")+"/")
	}
	return given
}

// isGitComponent reports whether one path component names git metadata on
// some filesystem Linux mounts: ".git" in any letter case, with the
// trailing dots and spaces vfat strips, with default-ignorable code points
// removed, or as vfat's 8.3 alias GIT~N.
func isGitComponent(c string) bool {
	if len(c) < 4 {
		return false
	}
	var b strings.Builder
	for _, r := range c {
		switch {
		case r == 0xAD, r == 0x34F, r == 0x180E, r >= 0x200B && r <= 0x200F,
			r >= 0x202A && r <= 0x202E, r >= 0x2060 && r <= 0x206F, r == 0xFEFF,
			r >= 0xFE00 && r <= 0xFE0F:
			continue
		}
		b.WriteRune(r)
	}
	n := strings.TrimRight(b.String(), ". ")
	if strings.EqualFold(n, ".git") {
		return true
	}
	if len(n) > 4 && strings.EqualFold(n[:4], "git~") {
		for _, r := range n[4:] {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	return false
}

// hasGitComponent reports whether any component of the slash-separated
// relative path rel names git metadata.
func hasGitComponent(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if isGitComponent(c) {
			return true
		}
	}
	return false
}

func fileModeFromUnix(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0o170000 {
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

func kindFromUnix(m uint32) PathKind {
	switch m & 0o170000 {
	case 0o100000:
		return PathFile
	case 0o040000:
		return PathDir
	case 0o120000:
		return PathSymlink
	}
	return PathOther
}
