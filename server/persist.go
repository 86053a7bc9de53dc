package server

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
)

// Sessions that survive a restart (docs/http.md, "Sessions that survive a
// restart"): with `serve --persist-sessions` each HTTP session's record
// (the inputs of its narrowed policy, its tool scope, its worktree, its
// scratch, its client's initialize) is kept in <state dir>/sessions, a
// directory of the state directory, which every sandbox has masked and
// only this server writes. On SIGTERM the sessions' processes end but
// their records and scratch stay; the next server resumes a session on the
// first request carrying its Mcp-Session-Id (persist_http.go), re-resolving
// its policy against the host as it is then, or refuses it.

// recordVersion is the version of the record format.
const recordVersion = 1

// maxRecordBytes bounds one record read back.
const maxRecordBytes = 1 << 20

// maxRecords bounds the records one sweep reads.
const maxRecords = 10000

// mcpIDPattern is the shape of the session ids idManager mints (rand.Text):
// only such an id names a record file.
var mcpIDPattern = regexp.MustCompile(`^[A-Z2-7]{26}$`)

var sandboxIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// sessionRecord is what is persisted of one session.
type sessionRecord struct {
	Version   int    `json:"version"`
	MCPID     string `json:"mcp_session_id"`
	SessionID string `json:"session_id"`
	// Mode and Network are the session's resolved policy (after the
	// client's narrowing and the delegate floor); DegradedShell says the
	// floor could not confine the shell.
	Mode          string `json:"mode"`
	Network       string `json:"network"`
	DegradedShell bool   `json:"degraded_shell,omitempty"`
	// Tools are the session's own tools; AskedTools what the client asked
	// for (nil: nothing), which also scopes the gateway's tools.
	Tools      []string `json:"tools"`
	AskedTools []string `json:"asked_tools,omitempty"`
	// Workdir is the session's worktree (narrowed by its roots);
	// RootsApplied says the roots were read (they are read once).
	Workdir      string    `json:"workdir"`
	RootsApplied bool      `json:"roots_applied,omitempty"`
	Scratch      string    `json:"scratch"`
	Created      time.Time `json:"created"`
	LastUsed     time.Time `json:"last_used"`
	// The client's initialize, replayed to the transport on resume.
	Protocol     string                 `json:"protocol_version"`
	ClientInfo   mcp.Implementation     `json:"client_info"`
	Capabilities mcp.ClientCapabilities `json:"capabilities"`
}

// validate refuses a record whose fields are not what this server writes:
// a record is never guessed at.
func (r *sessionRecord) validate(id, scratchParent string) error {
	switch {
	case r.Version != recordVersion:
		return fmt.Errorf("version %d, not %d", r.Version, recordVersion)
	case r.MCPID != id:
		return errors.New("its session id is not its file's")
	case !sandboxIDPattern.MatchString(r.SessionID):
		return errors.New("a malformed sandbox session id")
	case r.Protocol == "":
		return errors.New("no protocol version")
	case r.Created.IsZero() || r.LastUsed.Before(r.Created):
		return errors.New("malformed times")
	case r.Workdir == "" || !filepath.IsAbs(r.Workdir) || filepath.Clean(r.Workdir) != r.Workdir:
		return errors.New("a malformed worktree")
	case filepath.Dir(r.Scratch) != scratchParent || filepath.Clean(r.Scratch) != r.Scratch:
		return errors.New("its scratch does not lie where this server puts scratch")
	}
	if _, err := confine.ParseMode(r.Mode); err != nil {
		return err
	}
	if _, err := confine.ParseNetwork(r.Network); err != nil {
		return err
	}
	known := tools.Names()
	for _, t := range r.Tools {
		if !slices.Contains(known, t) {
			return fmt.Errorf("unknown tool %q", t)
		}
	}
	return nil
}

// persistStore keeps the records of one server's sessions.
type persistStore struct {
	dir           string           // <state dir>/sessions, mode 0700 (messages only)
	held          *confine.HeldDir // dir, held: every record operation is relative to it
	scratchParent string
	lock          *os.File // held (flock) while the server runs: one server per store

	mu   sync.Mutex                // guards live
	live map[string]*sessionRecord // records of the sessions this server runs, by MCP id
}

// scratchParentFor is the stable directory holding a persisting server's
// session scratch: in root (TMPDIR or the scratch root), named after the
// state directory, so the next server on that state directory finds it.
func scratchParentFor(root, stateDir string) (string, error) {
	sum := sha256.Sum256([]byte(stateDir))
	// A short name: the bridge sockets live here (107-byte socket paths).
	dir := filepath.Join(root, "evp-"+hex.EncodeToString(sum[:6]))
	if err := ownDir(dir); err != nil {
		return "", fmt.Errorf("scratch parent: %w", err)
	}
	return filepath.EvalSymlinks(dir)
}

// ownDir creates dir (0700) or checks that it is a directory, not a
// symbolic link, owned by this process's user, mode 0700.
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return confine.PrivateDir(dir)
}

// openPersistStore opens (creating) <stateDir>/sessions and locks it.
func openPersistStore(stateDir, scratchParent string) (*persistStore, error) {
	if stateDir == "" {
		return nil, errors.New("--persist-sessions needs a state directory")
	}
	dir := filepath.Join(stateDir, "sessions")
	if err := ownDir(dir); err != nil {
		return nil, fmt.Errorf("--persist-sessions: %w", err)
	}
	held, err := confine.OpenHeld(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("--persist-sessions: %w", err)
	}
	f, err := held.OpenFile(".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		held.Close()
		return nil, fmt.Errorf("--persist-sessions: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		held.Close()
		return nil, fmt.Errorf("--persist-sessions: another server keeps its sessions in %s: %w", dir, err)
	}
	return &persistStore{dir: dir, held: held, scratchParent: scratchParent, lock: f, live: map[string]*sessionRecord{}}, nil
}

func (p *persistStore) close() {
	if p != nil && p.lock != nil {
		p.lock.Close()
		p.held.Close()
	}
}

// recordFile is id's record file name in the store.
func recordFile(id string) string { return id + ".json" }

// has reports whether a record file exists for id (a well-formed id).
func (p *persistStore) has(id string) bool {
	if !mcpIDPattern.MatchString(id) {
		return false
	}
	return p.held.Kind(recordFile(id)) == confine.PathFile
}

// write saves rec atomically (a temporary file renamed over the record,
// mode 0600) and remembers it as live.
func (p *persistStore) write(rec *sessionRecord) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	tmp := ".rec-" + rand.Text()[:12]
	f, err := p.held.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("session record: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = p.held.Rename(tmp, recordFile(rec.MCPID))
	}
	if err != nil {
		p.held.Remove(tmp)
		return fmt.Errorf("session record: %w", err)
	}
	p.mu.Lock()
	p.live[rec.MCPID] = rec
	p.mu.Unlock()
	return nil
}

// load reads and validates id's record.
func (p *persistStore) load(id string) (*sessionRecord, error) {
	if !mcpIDPattern.MatchString(id) {
		return nil, errors.New("not a session id of this server")
	}
	f, err := p.held.OpenFile(recordFile(id), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("the session's record: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("the session's record is not a regular file")
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxRecordBytes+1)); err != nil {
		return nil, fmt.Errorf("the session's record: %w", err)
	}
	if buf.Len() > maxRecordBytes {
		return nil, errors.New("the session's record is too large")
	}
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	var rec sessionRecord
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("the session's record does not parse: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the session's record has trailing data")
	}
	if err := rec.validate(id, p.scratchParent); err != nil {
		return nil, fmt.Errorf("the session's record is invalid: %w", err)
	}
	return &rec, nil
}

// forget removes id's record (its session ended: DELETE, idle expiry).
func (p *persistStore) forget(id string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.live, id)
	p.mu.Unlock()
	p.held.Remove(recordFile(id))
}

// remove removes a record that no live session holds, with its scratch,
// and says whether the record is gone. A scratch that cannot be removed
// keeps its record (so a later sweep tries again), and the error says why.
func (p *persistStore) remove(id string) (bool, error) {
	if rec, err := p.load(id); err == nil {
		if err := confine.RemoveScratch(p.scratchParent, rec.Scratch); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("session %s: scratch %s: %w", id, filepath.Base(rec.Scratch), err)
		}
	}
	if err := p.held.Remove(recordFile(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("session %s: record: %w", id, err)
	}
	return true, nil
}

// touch rewrites the record of a live session last used at t, when its
// record is older than that by more than slack.
func (p *persistStore) touch(id string, t time.Time, slack time.Duration) {
	p.mu.Lock()
	rec := p.live[id]
	if rec == nil || t.Sub(rec.LastUsed) <= slack {
		p.mu.Unlock()
		return
	}
	c := *rec
	c.LastUsed = t
	p.mu.Unlock()
	_ = p.write(&c)
}

// update rewrites a live session's record after f changed it.
func (p *persistStore) update(id string, f func(*sessionRecord)) error {
	p.mu.Lock()
	rec := p.live[id]
	if rec == nil {
		p.mu.Unlock()
		return nil
	}
	c := *rec
	p.mu.Unlock()
	f(&c)
	return p.write(&c)
}

// sweep removes the records (and scratch) of sessions no live session
// holds and idle for longer than ttl; a record that does not parse is
// removed once its file is that old; stale temporary files go too. removed
// counts only records actually gone; errs says what could not be removed.
func (p *persistStore) sweep(ttl time.Duration, now time.Time, isLive func(string) bool) (removed int, errs []error) {
	names, _ := p.held.Names(maxRecords)
	for _, n := range names {
		st, err := p.held.Stat(n)
		if err != nil {
			continue
		}
		mtime := time.Unix(st.Mtim.Unix())
		if strings.HasPrefix(n, ".rec-") {
			if now.Sub(mtime) > time.Minute {
				p.held.Remove(n)
			}
			continue
		}
		id, ok := strings.CutSuffix(n, ".json")
		if !ok || !mcpIDPattern.MatchString(id) || isLive(id) {
			continue
		}
		rec, err := p.load(id)
		switch {
		case err != nil && now.Sub(mtime) > ttl:
			if err := p.held.Remove(n); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
		case err == nil && now.Sub(rec.LastUsed) > ttl:
			gone, err := p.remove(id)
			if err != nil {
				errs = append(errs, err)
			}
			if gone {
				removed++
			}
		}
	}
	return removed, errs
}
