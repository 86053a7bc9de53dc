//go:build linux

package confine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The protected-in-git check. A protected path is read-only in every
// sandbox, but git holds more copies of it: the entry in the index and the
// entry in the tree of every commit a ref names. A sandboxed command can
// write the object store, the index and the refs (the worktree's git dir is
// writable), so without this check it could put its own version of a
// protected file into HEAD, a branch or the index, and the user's own
// `git checkout -- FILE`, `git reset --hard` or `git push` would write or
// ship it. So around every writing sandboxed spawn, for every repository
// that holds one of the policy's protected paths and that its sandboxes
// can write (the worktree's, a nested one, one under an extra root), the
// server records what git holds at each protected path (the index entries
// at and under it; for every ref, for HEAD and for the pseudo-refs the
// mode and object id of the tree entry there), and after the spawn sets
// back every ref, HEAD, pseudo-ref and index entry that now holds something
// else there, keeping the commit it named reachable under
// refs/evener-quarantine/ (docs/protected-paths.md, "Protected paths and runner state").
// Not judged: a ref, HEAD or pseudo-ref now naming a commit a ref (not a
// quarantine ref) or HEAD already named, which holds nothing the command
// made; and, for a new ref or a pseudo-ref, a protected path its commit
// does not hold at all (unrelated history: notes, another project's
// remote, an old tag). A ref that moved may not drop one.
//
// What the server runs is inert: git with no system or global
// configuration, an explicit git dir and work tree, fsmonitor, hooks,
// submodule recursion, the commit graph, replace refs and every transport
// off, and only to read (for-each-ref, ls-files on a private copy of the
// index, cat-file); what it reads is compared, never shown. Every write
// into the git dir, which a running sandbox can write, is the server's own,
// through descriptors held on the git dir and its common dir (openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, a temporary file renamed over the
// ref), never a path string a running command could redirect. The one
// thing git writes is the private copy of the index, through a descriptor
// the server holds on its private directory.
//
// The record is one per repository and set of protected paths. It is taken
// again only when no spawn with a share in that repository runs (as the
// sweep's record), and replaced after every check by what is there once
// the check set things back: so a change a command that still runs made is
// judged at the next spawn's end against the state before it, never taken
// for the user's. A check that cannot finish (git hangs on a FIFO left for
// a ref, a refs directory became a symlink) fails closed: that
// repository's spawns are refused until one does.

const (
	quarantineRefPrefix = "refs/evener-quarantine/"
	// guardMaxRefs bounds the refs a repository with protected paths may
	// hold: a larger one refuses the spawn (the check never skips a ref).
	guardMaxRefs = 20000
	// guardMaxOut bounds what one git invocation may print.
	guardMaxOut = 16 << 20
	// guardMaxFile bounds the index and packed-refs the server copies.
	guardMaxFile = 256 << 20
	// guardMaxTrees bounds the tree bytes one check reads.
	guardMaxTrees = 256 << 20
	// guardMaxTreeCache bounds the trees a record keeps between checks.
	guardMaxTreeCache = 16 << 20
	// guardMaxRaw bounds HEAD and a pseudo-ref.
	guardMaxRaw = 64 << 10
)

// guardTimeout bounds one record or check (git hangs on a FIFO a command
// leaves for a ref or an object); a variable for the tests.
var guardTimeout = 30 * time.Second

// guardPseudoRefs are the refs in the git dir outside refs/ that the
// user's git takes commits from (git merge FETCH_HEAD, git reset ORIG_HEAD,
// the next commit's MERGE_HEAD parent).
var guardPseudoRefs = []string{"ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "BISECT_HEAD", "AUTO_MERGE"}

// guardGitArgs make the server's git inert whatever the repository's own
// configuration says.
var guardGitArgs = []string{
	"-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
	"-c", "submodule.recurse=false", "-c", "core.commitGraph=false",
	"-c", "core.useReplaceRefs=false", "-c", "core.splitIndex=false",
	"-c", "core.untrackedCache=false", "-c", "protocol.allow=never",
	"-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "core.pager=cat",
}

type gitGuard struct {
	mu    sync.Mutex // guards repos
	repos map[string]*guardRepo
}

// guardRepo is one repository holding protected paths: its spawns are
// counted, and its records and checks made, one at a time, under its own
// lock (a command that makes git hang in one repository, a FIFO for a ref
// say, holds up only the spawns that write it, for at most guardTimeout).
type guardRepo struct {
	mu      sync.Mutex           // guards running and recs, and serialises this repository's records and checks
	running int                  // writing sandboxed spawns with a share here, between begin and end
	recs    map[string]*guardRec // by protected paths
}

var theGuard = &gitGuard{repos: map[string]*guardRepo{}}

// guardRec is what is known of one repository for one set of protected
// paths.
type guardRec struct {
	bin                 string // the git the server runs
	gitDir, common, top string // canonical
	paths               []string
	state               *gitState
	// failed says why the last check could not finish: until one does,
	// spawns are refused (the state is still the last good one).
	failed string
	sigs   map[string][]string // commit-ish -> what it holds at paths
	// trees caches the trees that hold protected paths (a commit that
	// leaves their directories alone reads none), up to
	// guardMaxTreeCache bytes.
	trees     map[string][]byte
	treeBytes int64
	// kept are the quarantine refs checks made since the last one that
	// finished: never judged themselves (a check that finishes records
	// them with the rest).
	kept []string
}

type refVal struct{ oid, symref string }

// rawRef is HEAD or a pseudo-ref as written: its content, or the target
// of the symlink it is.
type rawRef struct {
	present, link bool
	data          string
}

type gitState struct {
	refs    map[string]refVal
	head    rawRef
	headOID string // what HEAD resolves to ("" unborn)
	pseudo  map[string]rawRef
	index   indexState
}

type indexState struct {
	present bool
	id      fileID
	entries []string // "mode oid stage\tpath", at or under a protected path
}

// guardTicket is one spawn's share of the check: one per repository that
// holds protected paths.
type guardTicket struct {
	shares  []guardShare
	workdir string
	pending []GitProtected // set back at begin, after a failed check
}

type guardShare struct {
	repo *guardRepo
	rec  *guardRec
}

var guardBin = sync.OnceValue(func() string {
	p, err := exec.LookPath("git")
	if err != nil {
		return ""
	}
	if p, err = filepath.Abs(p); err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return ""
})

// guardRecs finds the repositories that hold p's protected paths and
// that p's sandboxes can write: the one p's worktree belongs to, and any
// other whose git dir lies in a write root (a nested repository, one under
// an extra root). Each comes with the protected paths in its work tree,
// relative to its top. None when there is no git to check with.
func guardRecs(p *Policy, bin string) ([]*guardRec, error) {
	if bin == "" || len(p.protect) == 0 {
		return nil, nil
	}
	roots := append(p.WriteRoots(), p.StateRW()...)
	var recs []*guardRec
	add := func(gitDir, gitlink, common string, mustWrite bool) *guardRec {
		top := filepath.Dir(gitDir)
		if gitlink != "" {
			top = filepath.Dir(gitlink)
		}
		for _, d := range []*string{&gitDir, &common, &top} {
			r, err := filepath.EvalSymlinks(*d)
			if err != nil {
				return nil
			}
			*d = r
		}
		if mustWrite && !underAny(gitDir, roots) && !underAny(common, roots) {
			return nil
		}
		for _, r := range recs {
			if r.gitDir == gitDir {
				return r
			}
		}
		r := &guardRec{bin: bin, gitDir: gitDir, common: common, top: top, sigs: map[string][]string{}, trees: map[string][]byte{}}
		recs = append(recs, r)
		return r
	}
	if gitDir, gitlink, common, err := discoverRepo(p.Workdir()); err == nil && gitDir != "" {
		add(gitDir, gitlink, common, false)
	}
	for _, q := range p.protectSpellings() {
		q = filepath.Clean(q)
		if !filepath.IsAbs(q) || strings.ContainsAny(q, "\n\x00") {
			continue
		}
		// The innermost repository whose work tree holds q.
		var rec *guardRec
		for _, r := range recs {
			if Within(q, r.top) && (rec == nil || len(r.top) > len(rec.top)) {
				rec = r
			}
		}
		if d := existingAncestor(q); d != "" {
			if gitDir, gitlink, common, err := discoverRepo(d); err == nil && gitDir != "" {
				if r := add(gitDir, gitlink, common, true); r != nil && (rec == nil || len(r.top) > len(rec.top)) {
					rec = r
				}
			}
		}
		if rec == nil || !Within(q, rec.top) || Within(q, filepath.Join(rec.top, ".git")) || Within(q, rec.gitDir) || Within(q, rec.common) {
			continue
		}
		if rel, err := filepath.Rel(rec.top, q); err == nil && !slices.Contains(rec.paths, rel) {
			rec.paths = append(rec.paths, rel)
		}
	}
	recs = slices.DeleteFunc(recs, func(r *guardRec) bool { return len(r.paths) == 0 })
	if len(recs) > 0 && underAny(bin, roots) {
		return nil, errors.New("protected paths in git: the git on the server's PATH lies where sandboxed commands can write")
	}
	for _, r := range recs {
		slices.Sort(r.paths)
	}
	return recs, nil
}

// existingAncestor is the nearest directory at or above p that exists ("" for
// none).
func existingAncestor(p string) string {
	for d := p; ; d = filepath.Dir(d) {
		if k, _ := lstatKind(d); k == PathDir {
			return d
		}
		if d == "/" {
			return ""
		}
	}
}

// begin counts a writing spawn in with every repository holding its
// protected paths, first taking a new record of one when none of its
// spawns runs. It refuses the spawn when no record can be taken, or when
// the last check could not finish and cannot now.
func (g *gitGuard) begin(p *Policy) (*guardTicket, error) {
	fresh, err := guardRecs(p, guardBin())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsafeLayout, err)
	}
	t := &guardTicket{workdir: p.Workdir()}
	for _, f := range fresh {
		g.mu.Lock()
		repo := g.repos[f.gitDir]
		if repo == nil {
			repo = &guardRepo{recs: map[string]*guardRec{}}
			g.repos[f.gitDir] = repo
		}
		g.mu.Unlock()
		if err := t.join(repo, f); err != nil {
			t.end()
			return nil, err
		}
	}
	return t, nil
}

func (t *guardTicket) join(repo *guardRepo, fresh *guardRec) error {
	repo.mu.Lock()
	defer repo.mu.Unlock()
	key := strings.Join(fresh.paths, "\x00")
	rec := repo.recs[key]
	if rec == nil {
		rec = fresh
		repo.recs[key] = rec
	}
	if rec.failed != "" && rec.state != nil {
		changes, err := rec.check(t.workdir)
		t.pending = append(t.pending, changes...)
		if err != nil {
			rec.failed = err.Error()
			return fmt.Errorf("%w: protected paths in git: %s", ErrUnsafeLayout, rec.failed)
		}
		rec.failed = ""
	}
	if repo.running == 0 || rec.state == nil {
		if err := rec.record(); err != nil {
			return fmt.Errorf("%w: protected paths in git: %s", ErrUnsafeLayout, err)
		}
	}
	repo.running++
	t.shares = append(t.shares, guardShare{repo: repo, rec: rec})
	return nil
}

// end checks every repository after the spawn and returns what was set
// back.
func (t *guardTicket) end() []GitProtected {
	if t == nil {
		return nil
	}
	out := t.pending
	for _, sh := range t.shares {
		out = append(out, sh.end(t.workdir)...)
	}
	t.shares = nil
	return out
}

func (sh guardShare) end(workdir string) []GitProtected {
	sh.repo.mu.Lock()
	defer sh.repo.mu.Unlock()
	sh.repo.running--
	changes, err := sh.rec.check(workdir)
	if err != nil {
		sh.rec.failed = err.Error()
		return append(changes, GitProtected{What: "the protected-in-git check failed, later commands are refused until it succeeds: " + sh.rec.failed})
	}
	sh.rec.failed = ""
	return changes
}

// record takes the record anew.
func (r *guardRec) record() error {
	c, err := r.open()
	if err != nil {
		return err
	}
	defer c.close()
	st, err := c.snapshot(r.state)
	if err != nil {
		return err
	}
	r.state = st
	return nil
}

// check compares what is there with the record, sets back what changed
// a protected path, and makes what is there then the record.
func (r *guardRec) check(workdir string) ([]GitProtected, error) {
	c, err := r.open()
	if err != nil {
		return nil, err
	}
	defer c.close()
	cur, err := c.snapshot(r.state)
	if err != nil {
		return nil, err
	}
	offs, err := c.compare(r.state, cur)
	if err != nil {
		return nil, err
	}
	if len(offs) == 0 {
		r.state, r.kept = cur, nil
		return nil, nil
	}
	changes, err := c.restore(r.state, cur, offs, workdir)
	if err != nil {
		return changes, err
	}
	after, err := c.snapshot(cur)
	if err != nil {
		return changes, err
	}
	left, err := c.compare(r.state, after)
	if err != nil {
		return changes, err
	}
	if len(left) > 0 {
		return changes, fmt.Errorf("%s could not be set back (changed again while the check ran?)", left[0].name)
	}
	r.state, r.kept = after, nil
	return changes, nil
}

// checker is one record or check: descriptors held on the git dir and the
// common dir, the private directory for the index copy, the cat-file
// process.
type checker struct {
	r               *guardRec
	ctx             context.Context
	cancel          func()
	gitFD, commonFD int
	priv            *os.File // private directory holding the copy of the index ("" until needed)
	privPath        string
	info, cat       *catFile // cat-file --batch-check and --batch, started when needed
	treeBytes       int64    // tree bytes read by this check
	rootOwner       bool     // the server is root: what it creates gets the owner of its directory
	indexCopied     bool     // priv holds the index the last snapshot read
}

func (r *guardRec) open() (*checker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), guardTimeout)
	c := &checker{r: r, ctx: ctx, cancel: cancel, gitFD: -1, commonFD: -1, rootOwner: os.Geteuid() == 0}
	var err error
	if c.gitFD, err = openAbsDir(r.gitDir); err != nil {
		c.close()
		return nil, fmt.Errorf("the git dir: %w", err)
	}
	if c.commonFD, err = openAbsDir(r.common); err != nil {
		c.close()
		return nil, fmt.Errorf("the git common dir: %w", err)
	}
	return c, nil
}

func (c *checker) close() {
	for _, cf := range []*catFile{c.info, c.cat} {
		if cf != nil {
			cf.close()
		}
	}
	for _, fd := range []int{c.gitFD, c.commonFD} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if c.priv != nil {
		for _, n := range []string{"index", "index.lock"} {
			_ = unix.Unlinkat(int(c.priv.Fd()), n, 0)
		}
		var a, b unix.Stat_t
		if unix.Fstat(int(c.priv.Fd()), &a) == nil && unix.Lstat(c.privPath, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino {
			_ = os.Remove(c.privPath)
		}
		c.priv.Close()
	}
	c.cancel()
}

// openAbsDir opens the canonical directory p without following a symlink
// on the way.
func openAbsDir(p string) (int, error) {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	rel := strings.TrimPrefix(filepath.Clean(p), "/")
	if rel == "" {
		rel = "."
	}
	return openat2Retry(root, rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, strictResolve)
}

// ---------------------------------------------------------------------------
// The server's git.

func (c *checker) gitCmd(index bool, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(c.ctx, c.r.bin, append(slices.Clone(guardGitArgs), args...)...)
	cmd.Dir = "/"
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"GIT_DIR=" + c.r.gitDir, "GIT_WORK_TREE=" + c.r.top,
		"GIT_NO_REPLACE_OBJECTS=1", "GIT_LITERAL_PATHSPECS=1", "GIT_OPTIONAL_LOCKS=0",
		"GIT_TERMINAL_PROMPT=0", "GIT_NO_LAZY_FETCH=1", "GIT_PAGER=cat",
	}
	if index {
		// The private copy, through the descriptor held on its directory
		// (the child's fd 3).
		cmd.ExtraFiles = []*os.File{c.priv}
		cmd.Env = append(cmd.Env, "GIT_INDEX_FILE=/proc/self/fd/3/index")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// git runs the server's git and returns what it printed (bounded). exit 1
// is returned as ok1 for the commands where it means "nothing".
func (c *checker) git(index bool, stdin []byte, args ...string) ([]byte, error) {
	cmd := c.gitCmd(index, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out := &boundedBuf{max: guardMaxOut}
	cmd.Stdout = out
	err := cmd.Run()
	if out.over {
		return nil, fmt.Errorf("git %s printed more than %d bytes", args[0], guardMaxOut)
	}
	if err != nil {
		if c.ctx.Err() != nil {
			return nil, fmt.Errorf("git %s took longer than %s", args[0], guardTimeout)
		}
		return nil, fmt.Errorf("git %s failed (%v)", args[0], exitOf(err))
	}
	return out.b.Bytes(), nil
}

func exitOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "exit " + strconv.Itoa(ee.ExitCode())
	}
	return "could not run it"
}

type boundedBuf struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (w *boundedBuf) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		w.over = true
		return 0, errors.New("too much output")
	}
	return w.b.Write(p)
}

// catFile is one long-lived `git cat-file --batch-check` (info) or
// `--batch` (contents) the check asks objects of, one line at a time
// (both exist in every git; --batch-command needs 2.36).
type catFile struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func (c *checker) catFile(contents bool) (*catFile, error) {
	at, mode := &c.info, "--batch-check"
	if contents {
		at, mode = &c.cat, "--batch"
	}
	if *at != nil {
		return *at, nil
	}
	cmd := c.gitCmd(false, "cat-file", mode)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	*at = &catFile{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}
	return *at, nil
}

func (cf *catFile) close() {
	cf.in.Close()
	_ = cf.cmd.Wait()
}

// header asks for obj and reads the header: oid, type and size, or ok
// false when git has no such object.
func (cf *catFile) header(obj string) (oid, typ string, size int64, ok bool, err error) {
	if _, err := io.WriteString(cf.in, obj+"\n"); err != nil {
		return "", "", 0, false, fmt.Errorf("git cat-file: %w", err)
	}
	line, err := cf.out.ReadSlice('\n')
	if err != nil {
		return "", "", 0, false, fmt.Errorf("git cat-file: %w", err)
	}
	f := strings.Fields(string(line))
	if len(f) == 3 && isHexOID(f[0]) {
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err == nil && n >= 0 {
			return f[0], f[1], n, true, nil
		}
	}
	if strings.HasSuffix(strings.TrimSpace(string(line)), " missing") || strings.HasSuffix(strings.TrimSpace(string(line)), " ambiguous") {
		return "", "", 0, false, nil
	}
	return "", "", 0, false, errors.New("git cat-file: unexpected answer")
}

func isHexOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// tree returns the content of the tree oid (cached for the check, bounded).
func (c *checker) tree(oid string) ([]byte, error) {
	if b, ok := c.r.trees[oid]; ok {
		return b, nil
	}
	cf, err := c.catFile(true)
	if err != nil {
		return nil, err
	}
	_, typ, size, ok, err := cf.header(oid)
	if err != nil || !ok {
		return nil, err
	}
	if c.treeBytes+size > guardMaxTrees {
		return nil, fmt.Errorf("more than %d bytes of trees to read", guardMaxTrees)
	}
	c.treeBytes += size
	b := make([]byte, size+1)
	if _, err := io.ReadFull(cf.out, b); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	if typ != "tree" {
		return nil, nil
	}
	b = b[:size]
	if c.r.treeBytes+size > guardMaxTreeCache {
		clear(c.r.trees)
		c.r.treeBytes = 0
	}
	c.r.trees[oid], c.r.treeBytes = b, c.r.treeBytes+size
	return b, nil
}

// sig returns what the commit-ish oid holds at each protected path: "mode
// oid" of its tree entry, or "-" when there is none ("" oid: none at all).
func (c *checker) sig(oid string) ([]string, error) {
	out := make([]string, len(c.r.paths))
	if oid == "" {
		for i := range out {
			out[i] = "-"
		}
		return out, nil
	}
	if s, ok := c.r.sigs[oid]; ok {
		return s, nil
	}
	cf, err := c.catFile(false)
	if err != nil {
		return nil, err
	}
	for i, p := range c.r.paths {
		out[i] = "-"
		if p == "." {
			t, typ, _, ok, err := cf.header(oid + "^{tree}")
			if err != nil {
				return nil, err
			}
			if ok && typ == "tree" {
				out[i] = "40000 " + t
			}
			continue
		}
		dir, base := path.Split(p)
		t, typ, _, ok, err := cf.header(oid + ":" + strings.TrimSuffix(dir, "/"))
		if err != nil {
			return nil, err
		}
		if !ok || typ != "tree" {
			continue
		}
		b, err := c.tree(t)
		if err != nil {
			return nil, err
		}
		if mode, eoid, found := treeEntry(b, base, len(t)/2); found {
			out[i] = mode + " " + eoid
		}
	}
	if len(c.r.sigs) > 4096 {
		clear(c.r.sigs)
	}
	c.r.sigs[oid] = out
	return out, nil
}

// treeEntry finds name in a tree object's content: its mode and oid.
func treeEntry(tree []byte, name string, rawLen int) (mode, oid string, found bool) {
	for len(tree) > 0 {
		sp := bytes.IndexByte(tree, ' ')
		nul := bytes.IndexByte(tree, 0)
		if sp < 0 || nul < sp || len(tree) < nul+1+rawLen {
			return "", "", false
		}
		if string(tree[sp+1:nul]) == name {
			return string(tree[:sp]), hex.EncodeToString(tree[nul+1 : nul+1+rawLen]), true
		}
		tree = tree[nul+1+rawLen:]
	}
	return "", "", false
}

// ---------------------------------------------------------------------------
// Reading the state.

func (c *checker) snapshot(prev *gitState) (*gitState, error) {
	st := &gitState{refs: map[string]refVal{}, pseudo: map[string]rawRef{}}
	out, err := c.git(false, nil, "for-each-ref", "--format=%(objectname)%00%(refname)%00%(symref)")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\x00")
		if len(f) != 3 || !isHexOID(f[0]) {
			return nil, errors.New("git for-each-ref: unexpected output")
		}
		if len(st.refs) >= guardMaxRefs {
			return nil, fmt.Errorf("the repository has more than %d refs", guardMaxRefs)
		}
		st.refs[f[1]] = refVal{oid: f[0], symref: f[2]}
	}
	if st.head, err = readRaw(c.gitFD, "HEAD"); err != nil {
		return nil, err
	}
	st.headOID = c.resolveRaw(st, st.head)
	for _, n := range guardPseudoRefs {
		r, err := readRaw(c.gitFD, n)
		if err != nil {
			return nil, err
		}
		if r.present {
			st.pseudo[n] = r
		}
	}
	if st.index, err = c.readIndex(prev); err != nil {
		return nil, err
	}
	return st, nil
}

// resolveRaw is the commit HEAD (or a one-line pseudo-ref) names.
func (c *checker) resolveRaw(st *gitState, r rawRef) string {
	if !r.present {
		return ""
	}
	s := strings.TrimSpace(r.data)
	if r.link {
		return st.refs[s].oid
	}
	if t, ok := strings.CutPrefix(s, "ref:"); ok {
		return st.refs[strings.TrimSpace(t)].oid
	}
	if isHexOID(s) {
		return s
	}
	return ""
}

// rawOIDs are the commits a pseudo-ref names: the first field of each line
// (FETCH_HEAD holds one a line).
func (c *checker) rawOIDs(st *gitState, r rawRef) []string {
	if r.link || strings.HasPrefix(strings.TrimSpace(r.data), "ref:") {
		if o := c.resolveRaw(st, r); o != "" {
			return []string{o}
		}
		return nil
	}
	var out []string
	for _, line := range strings.Split(r.data, "\n") {
		if f := strings.Fields(line); len(f) > 0 && isHexOID(f[0]) && !slices.Contains(out, f[0]) {
			out = append(out, f[0])
		}
	}
	return out
}

// readRaw reads name in the git dir: a regular file's content (bounded),
// or a symlink's target.
func readRaw(dirfd int, name string) (rawRef, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return rawRef{}, nil
		}
		return rawRef{}, fmt.Errorf("%s: %w", name, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return rawRef{present: true, link: true, data: readlinkAt(dirfd, name)}, nil
	case unix.S_IFREG:
	default:
		return rawRef{}, fmt.Errorf("%s is not a file", name)
	}
	fd, err := openat2Retry(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, strictResolve)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return rawRef{}, nil
		}
		return rawRef{}, fmt.Errorf("%s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, guardMaxRaw+1))
	if err != nil {
		return rawRef{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > guardMaxRaw {
		return rawRef{}, fmt.Errorf("%s is larger than %d bytes", name, guardMaxRaw)
	}
	return rawRef{present: true, data: string(b)}, nil
}

// readIndex reads the index entries at and under the protected paths. An
// index unchanged since prev (same inode, size and ctime) is not read
// again; one that changed is copied, through the held git dir, into the
// server's private directory, and git reads the copy.
func (c *checker) readIndex(prev *gitState) (indexState, error) {
	c.indexCopied = false
	var st unix.Stat_t
	if err := unix.Fstatat(c.gitFD, "index", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return indexState{}, nil
		}
		return indexState{}, fmt.Errorf("the index: %w", err)
	}
	if prev != nil && prev.index.present && prev.index.id == idOf(&st) {
		return prev.index, nil
	}
	fd, err := openat2Retry(c.gitFD, "index", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, strictResolve)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return indexState{}, nil
		}
		return indexState{}, fmt.Errorf("the index: %w", err)
	}
	src := os.NewFile(uintptr(fd), "index")
	defer src.Close()
	if err := unix.Fstat(fd, &st); err != nil {
		return indexState{}, fmt.Errorf("the index: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return indexState{}, errors.New("the index is not a regular file")
	}
	if st.Size > guardMaxFile {
		return indexState{}, fmt.Errorf("the index is larger than %d bytes", guardMaxFile)
	}
	if err := c.copyToPrivate(src, "index"); err != nil {
		return indexState{}, err
	}
	c.indexCopied = true
	out, err := c.git(true, nil, append([]string{"ls-files", "-s", "-z", "--"}, c.r.paths...)...)
	if err != nil {
		return indexState{}, err
	}
	is := indexState{present: true, id: idOf(&st)}
	for _, e := range strings.Split(string(out), "\x00") {
		if e != "" {
			is.entries = append(is.entries, e)
		}
	}
	return is, nil
}

// copyToPrivate copies src into name in the server's private directory
// (made on first use, mode 0700, held by a descriptor).
func (c *checker) copyToPrivate(src *os.File, name string) error {
	if c.priv == nil {
		d, err := os.MkdirTemp("", "evener-git-")
		if err != nil {
			var errno syscall.Errno
			errors.As(err, &errno)
			return fmt.Errorf("the server's private directory for the index copy (%v)", errno)
		}
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			os.Remove(d)
			return fmt.Errorf("the server's private directory for the index copy (%v)", err)
		}
		c.priv, c.privPath = os.NewFile(uintptr(fd), d), d
	}
	_ = unix.Unlinkat(int(c.priv.Fd()), name, 0)
	fd, err := openat2Retry(int(c.priv.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, strictResolve)
	if err != nil {
		return fmt.Errorf("private copy: %w", err)
	}
	dst := os.NewFile(uintptr(fd), name)
	defer dst.Close()
	n, err := io.Copy(dst, io.LimitReader(src, guardMaxFile+1))
	if err != nil {
		return fmt.Errorf("private copy: %w", err)
	}
	if n > guardMaxFile {
		return fmt.Errorf("the %s is larger than %d bytes", name, guardMaxFile)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Comparing.

const (
	offRef = iota
	offHead
	offPseudo
	offIndex
)

// offence is one thing that now holds something else at a protected path.
type offence struct {
	kind  int
	name  string   // the ref, HEAD, the pseudo-ref, "index"
	oids  []string // the commits it names now (quarantined)
	paths []string // the protected paths it changed (relative to the top)
}

// differs returns the protected paths where one of oids holds something
// else than baseOID. A commit the user already had a ref to (known) holds
// nothing the command made and is not judged. With lenient, a path a
// commit does not hold at all is no change: a new ref may name unrelated
// history (git notes, another project's remote, an old tag), which cannot
// put anything at a protected path; a ref that moved may not drop one.
func (c *checker) differs(baseOID string, oids []string, known map[string]bool, lenient bool) ([]string, error) {
	base, err := c.sig(baseOID)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, o := range oids {
		if o != "" && known[o] {
			continue
		}
		s, err := c.sig(o)
		if err != nil {
			return nil, err
		}
		for i := range s {
			if s[i] != base[i] && !(lenient && s[i] == "-") && !slices.Contains(paths, c.r.paths[i]) {
				paths = append(paths, c.r.paths[i])
			}
		}
	}
	return paths, nil
}

// compare lists what in cur holds something else at a protected path than
// before did: a ref that moved (one that is new: against what HEAD named
// before), HEAD and the pseudo-refs when they changed (against what HEAD
// named before), the index entries. Quarantine refs the checks made are
// not judged; what a quarantine ref names is never known.
func (c *checker) compare(before, cur *gitState) ([]offence, error) {
	known := map[string]bool{}
	if before.headOID != "" {
		known[before.headOID] = true
	}
	for n, v := range before.refs {
		if !strings.HasPrefix(n, quarantineRefPrefix) {
			known[v.oid] = true
		}
	}
	var offs []offence
	names := make([]string, 0, len(cur.refs))
	for n := range cur.refs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v := cur.refs[n]
		o, had := before.refs[n]
		if (had && o == v) || slices.Contains(c.r.kept, n) || (had && v.symref != "" && o.symref == v.symref) {
			continue
		}
		base := before.headOID
		if had {
			base = o.oid
		}
		paths, err := c.differs(base, []string{v.oid}, known, !had)
		if err != nil {
			return nil, err
		}
		if len(paths) > 0 {
			offs = append(offs, offence{kind: offRef, name: n, oids: []string{v.oid}, paths: paths})
		}
	}
	if cur.head != before.head {
		oids := []string{cur.headOID} // "" (unborn): holds nothing
		paths, err := c.differs(before.headOID, oids, known, false)
		if err != nil {
			return nil, err
		}
		if len(paths) > 0 {
			offs = append(offs, offence{kind: offHead, name: "HEAD", oids: oids, paths: paths})
		}
	}
	for _, n := range guardPseudoRefs {
		r, ok := cur.pseudo[n]
		if !ok || r == before.pseudo[n] {
			continue
		}
		oids := c.rawOIDs(cur, r)
		paths, err := c.differs(before.headOID, oids, known, true)
		if err != nil {
			return nil, err
		}
		if len(paths) > 0 {
			offs = append(offs, offence{kind: offPseudo, name: n, oids: oids, paths: paths})
		}
	}
	if cur.index.present {
		if paths := c.indexChanges(before.index.entries, cur.index.entries); len(paths) > 0 {
			offs = append(offs, offence{kind: offIndex, name: "the index", paths: paths})
		}
	}
	return offs, nil
}

// indexPath is the path of an ls-files -s entry.
func indexPath(e string) string {
	_, p, _ := strings.Cut(e, "\t")
	return p
}

// owner is the protected path an index entry lies at or under.
func (c *checker) owner(p string) string {
	for _, q := range c.r.paths {
		if q == "." || p == q || strings.HasPrefix(p, q+"/") {
			return q
		}
	}
	return ""
}

// indexChanges: the protected paths whose index entries differ.
func (c *checker) indexChanges(before, now []string) []string {
	group := func(es []string) map[string][]string {
		m := map[string][]string{}
		for _, e := range es {
			if o := c.owner(indexPath(e)); o != "" {
				m[o] = append(m[o], e)
			}
		}
		return m
	}
	b, n := group(before), group(now)
	var paths []string
	for _, q := range c.r.paths {
		if !slices.Equal(b[q], n[q]) {
			paths = append(paths, q)
		}
	}
	return paths
}

// ---------------------------------------------------------------------------
// Setting back.

func (c *checker) restore(before, cur *gitState, offs []offence, workdir string) ([]GitProtected, error) {
	var out []GitProtected
	q := 0
	for n := range cur.refs {
		if s, ok := strings.CutPrefix(n, quarantineRefPrefix); ok {
			if i, err := strconv.Atoi(s); err == nil && i > q {
				q = i
			}
		}
	}
	kept := map[string]string{} // oid -> quarantine ref
	keep := func(oids []string) ([]string, error) {
		var names []string
		for _, o := range oids {
			if o == "" {
				continue
			}
			if n, ok := kept[o]; ok {
				names = append(names, n)
				continue
			}
			n, err := c.quarantine(o, &q)
			if err != nil {
				return nil, err
			}
			kept[o] = n
			names = append(names, n)
		}
		return names, nil
	}
	for _, off := range offs {
		names, err := keep(off.oids)
		if err != nil {
			return out, err
		}
		var what string
		switch off.kind {
		case offRef:
			if o, had := before.refs[off.name]; had {
				content := o.oid
				if o.symref != "" {
					content = "ref: " + o.symref
				}
				err = c.writeRef(off.name, content+"\n")
				what = off.name + " was moved to a commit that changes it in git; set back to " + shortRef(o)
			} else {
				err = c.deleteRef(off.name)
				what = off.name + " was created at a commit that changes it in git; removed"
			}
		case offHead:
			err = c.writeRaw(c.gitFD, "HEAD", before.head)
			what = "HEAD was moved to a commit that changes it in git; set back"
		case offPseudo:
			if r, had := before.pseudo[off.name]; had {
				err = c.writeRaw(c.gitFD, off.name, r)
			} else if err = unix.Unlinkat(c.gitFD, off.name, 0); errors.Is(err, unix.ENOENT) {
				err = nil
			}
			what = off.name + " was written naming a commit that changes it in git; set back"
		case offIndex:
			err = c.restoreIndex(before.index.entries, cur.index.entries, off.paths)
			what = "its entry in the index was changed; set back to what it was before the command"
		}
		if err != nil {
			return out, fmt.Errorf("could not set back %s: %w", off.name, err)
		}
		if len(names) > 0 {
			what += ", the commit kept as " + strings.Join(names, ", ")
		}
		display := func(p string) string { return sweepDisplay(filepath.Join(c.r.top, p), workdir) }
		if len(off.paths) > 1 {
			var more []string
			for _, p := range off.paths[1:] {
				more = append(more, display(p))
			}
			what += " (also changes " + strings.Join(more, ", ") + ")"
		}
		out = append(out, GitProtected{Path: display(off.paths[0]), What: what})
	}
	return out, nil
}

func shortRef(o refVal) string {
	if o.symref != "" {
		return "ref: " + o.symref
	}
	return o.oid[:min(12, len(o.oid))]
}

// restoreIndex sets the index entries at and under paths back to before's:
// git changes the private copy, which is then renamed over the index
// through the held git dir.
func (c *checker) restoreIndex(before, now []string, paths []string) error {
	if !c.indexCopied {
		return errors.New("the index copy is gone")
	}
	in := func(e string) bool { return slices.Contains(paths, c.owner(indexPath(e))) }
	zero := strings.Repeat("0", 40)
	for _, e := range append(slices.Clone(now), before...) {
		if f := strings.Fields(e); len(f) >= 2 && isHexOID(f[1]) {
			zero = strings.Repeat("0", len(f[1]))
			break
		}
	}
	var b bytes.Buffer
	seen := map[string]bool{}
	for _, e := range append(slices.Clone(now), before...) {
		if p := indexPath(e); in(e) && !seen[p] {
			seen[p] = true
			b.WriteString("0 " + zero + "\t" + p + "\x00")
		}
	}
	for _, e := range before {
		if in(e) {
			b.WriteString(e + "\x00")
		}
	}
	if _, err := c.git(true, b.Bytes(), "update-index", "-z", "--index-info"); err != nil {
		return err
	}
	fd, err := openat2Retry(int(c.priv.Fd()), "index", unix.O_RDONLY|unix.O_NOFOLLOW, strictResolve)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "index")
	defer f.Close()
	var st unix.Stat_t
	mode := uint32(0o644)
	if unix.Fstatat(c.gitFD, "index", &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		mode = st.Mode & 0o666
	}
	return c.writeFileAt(c.gitFD, "index", io.LimitReader(f, guardMaxFile), mode)
}

// perWorktreeRef: refs git keeps in the worktree's own git dir.
func perWorktreeRef(n string) bool {
	for _, p := range []string{"refs/bisect/", "refs/worktree/", "refs/rewritten/"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

func (c *checker) refBase(n string) int {
	if perWorktreeRef(n) {
		return c.gitFD
	}
	return c.commonFD
}

// openRefDir opens (creating when asked) the directory rel under base, one
// component at a time, never through a symlink.
func (c *checker) openRefDir(base int, rel string, create bool) (int, error) {
	fd, err := unix.Dup(base)
	if err != nil {
		return -1, err
	}
	for _, comp := range strings.Split(strings.Trim(rel, "/"), "/") {
		if comp == "" {
			continue
		}
		if comp == "." || comp == ".." {
			unix.Close(fd)
			return -1, errors.New("a ref name with . or ..")
		}
		nfd, err := openat2Retry(fd, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, strictResolve)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, comp, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				nfd, err = openat2Retry(fd, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, strictResolve)
				if err == nil {
					c.ownLike(nfd, fd)
				}
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = nfd
	}
	return fd, nil
}

// ownLike gives what fd names the owner of the directory dirfd, when the
// server is root (so the user's own git can replace it later).
func (c *checker) ownLike(fd, dirfd int) {
	if !c.rootOwner {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(dirfd, &st) == nil {
		_ = unix.Fchownat(fd, "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH)
	}
}

// writeFileAt replaces name in dirfd with what r holds: a temporary file
// made beside it, renamed over it.
func (c *checker) writeFileAt(dirfd int, name string, r io.Reader, mode uint32) error {
	tmp := ".evener-" + randHex()
	fd, err := openat2Retry(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, strictResolve)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(os.FileMode(mode))
	}
	c.ownLike(fd, dirfd)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}

func randHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeRef writes the loose ref n (a loose ref wins over a packed one).
func (c *checker) writeRef(n, content string) error {
	dir, leaf := path.Split(n)
	dfd, err := c.openRefDir(c.refBase(n), dir, true)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return c.writeFileAt(dfd, leaf, strings.NewReader(content), 0o644)
}

// deleteRef removes the ref n: its loose file and its packed-refs line.
func (c *checker) deleteRef(n string) error {
	dir, leaf := path.Split(n)
	if dfd, err := c.openRefDir(c.refBase(n), dir, false); err == nil {
		err = unix.Unlinkat(dfd, leaf, 0)
		unix.Close(dfd)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return err
	}
	if perWorktreeRef(n) {
		return nil
	}
	return c.dropPacked(n)
}

// dropPacked removes n from packed-refs.
func (c *checker) dropPacked(n string) error {
	fd, err := openat2Retry(c.commonFD, "packed-refs", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, strictResolve)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "packed-refs")
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > guardMaxFile {
		return errors.New("packed-refs is not a regular file of a sane size")
	}
	b, err := io.ReadAll(io.LimitReader(f, guardMaxFile))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	dropped, skipPeeled := false, false
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if line[0] == '^' && skipPeeled {
			continue
		}
		skipPeeled = false
		if f := strings.Fields(string(line)); len(f) == 2 && f[1] == n && line[0] != '#' {
			dropped, skipPeeled = true, true
			continue
		}
		out.Write(line)
	}
	if !dropped {
		return nil
	}
	return c.writeFileAt(c.commonFD, "packed-refs", &out, st.Mode&0o666)
}

// writeRaw sets HEAD or a pseudo-ref back to what it was.
func (c *checker) writeRaw(dirfd int, name string, r rawRef) error {
	if !r.present {
		if err := unix.Unlinkat(dirfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		return nil
	}
	if !r.link {
		return c.writeFileAt(dirfd, name, strings.NewReader(r.data), 0o644)
	}
	tmp := ".evener-" + randHex()
	if err := unix.Symlinkat(r.data, dirfd, tmp); err != nil {
		return err
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return err
	}
	return nil
}

// quarantine keeps oid reachable as refs/evener-quarantine/<n>, never
// replacing one that exists.
func (c *checker) quarantine(oid string, q *int) (string, error) {
	dfd, err := c.openRefDir(c.commonFD, strings.TrimSuffix(quarantineRefPrefix, "/"), true)
	if err != nil {
		return "", err
	}
	defer unix.Close(dfd)
	for i := 0; i < 1000; i++ {
		*q++
		leaf := strconv.Itoa(*q)
		fd, err := openat2Retry(dfd, leaf, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, strictResolve)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", err
		}
		f := os.NewFile(uintptr(fd), leaf)
		_, err = f.WriteString(oid + "\n")
		if err == nil {
			err = f.Chmod(0o644)
		}
		c.ownLike(fd, dfd)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = unix.Unlinkat(dfd, leaf, 0)
			return "", err
		}
		c.r.kept = append(c.r.kept, quarantineRefPrefix+leaf)
		return quarantineRefPrefix + leaf, nil
	}
	return "", errors.New("every quarantine ref name is taken")
}
