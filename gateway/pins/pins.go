// Package pins keeps what the user approved of each downstream MCP
// server's tools (docs/gateway.md, "Pins"): per user, project and server,
// the name, title, description and input schema hash of each approved
// tool, and the tools listed since that await approval. A tool is
// published only while it matches its pin.
//
// The files live in the state directory (gateway-pins/KEY.json), which
// every sandbox has masked; each change is made under an exclusive lock
// (KEY.lock, flock) and written atomically (a temporary file renamed over
// the old one), so servers of several sessions and the command line can
// change one file at once. It imports neither the MCP library nor any
// package of ours: the launcher binary (`evener-mcp gateway`) links it.
package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// Policies (config.Approval*, repeated here: this package imports none
// of ours).
const (
	FirstUse = "first-use"
	Always   = "always"
	Off      = "off"
)

// Tool is what a pin holds of one tool: what the model reads of it.
type Tool struct {
	Title       string `json:"title,omitempty"`
	Description string `json:"description"`
	// Schema is SchemaHash of its input schema.
	Schema string `json:"input_schema_sha256"`
}

// Pin is an approved tool.
type Pin struct {
	Tool
	Approved time.Time `json:"approved"`
	// By says how: "first-use" (the server's first listing in the
	// project), "cli" or "elicitation".
	By string `json:"by"`
}

// Pending is a tool listed but not approved: new, or changed since its
// pin (Old).
type Pending struct {
	Tool
	Seen time.Time `json:"seen"`
	Old  *Pin      `json:"old,omitempty"`
}

// File is one server's pins in one project, for one user.
type File struct {
	Version int    `json:"version"`
	Server  string `json:"server"`
	Project string `json:"project"`
	UID     int    `json:"uid"`
	// Pinned maps a tool's own name (without the SERVER__ prefix) to its
	// approved form.
	Pinned map[string]Pin `json:"pinned"`
	// Pending maps a tool's own name to what was listed last.
	Pending map[string]Pending `json:"pending"`
}

// Dir is the pins' directory under the state directory.
func Dir(stateDir string) string { return filepath.Join(stateDir, "gateway-pins") }

// Key names the file of one user's pins of server in project (a resolved
// absolute path): the server's name, then a hash of all three, so that
// neither a project's path nor a name reaches the file name unhashed.
func Key(uid int, project, server string) string {
	h := sha256.Sum256([]byte(strconv.Itoa(uid) + "\x00" + project + "\x00" + server))
	return server + "-" + hex.EncodeToString(h[:10])
}

// SchemaHash is the hex SHA-256 of the canonical JSON of a schema: decoded
// and encoded again with members sorted by name, no blanks, numbers as
// written and no HTML escaping. An empty schema hashes as {}.
func SchemaHash(raw []byte) (string, error) {
	c, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(c)
	return hex.EncodeToString(h[:]), nil
}

// Canonical is raw's canonical JSON (SchemaHash).
func Canonical(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("canonical JSON: more than one value")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// MaxPending bounds the tools one file records as awaiting approval: a
// server listing more gets the rest withheld unrecorded, so that it
// cannot grow the file (and every session's reading of it) without end.
const MaxPending = 256

// Review applies policy to the tools a server lists now (by own name),
// updating f: it returns the names to publish, sorted, and whether f
// changed. exists says whether f was read from a file (under first-use, a
// server with no file yet has what it lists pinned as approved). A tool
// that matches its pin is published; one that is new or changed is
// recorded as pending and not published; a pending tool no longer listed,
// or listed again as pinned, is no longer pending.
func Review(f *File, listed map[string]Tool, policy string, exists bool, now time.Time) ([]string, bool) {
	var out []string
	if policy == Off {
		for n := range listed {
			out = append(out, n)
		}
		sort.Strings(out)
		return out, false
	}
	changed := false
	if f.Pinned == nil {
		f.Pinned = map[string]Pin{}
	}
	if f.Pending == nil {
		f.Pending = map[string]Pending{}
	}
	if !exists && policy == FirstUse {
		for n, t := range listed {
			f.Pinned[n] = Pin{Tool: t, Approved: now, By: FirstUse}
		}
		changed = true
	}
	if !exists {
		changed = true // the file is new
	}
	for n := range f.Pending {
		if _, ok := listed[n]; !ok {
			delete(f.Pending, n)
			changed = true
		}
	}
	for n, t := range listed {
		pin, ok := f.Pinned[n]
		if ok && pin.Tool == t {
			out = append(out, n)
			if _, was := f.Pending[n]; was {
				delete(f.Pending, n)
				changed = true
			}
			continue
		}
		p := Pending{Tool: t, Seen: now}
		if ok {
			old := pin
			p.Old = &old
		}
		prev, was := f.Pending[n]
		if was && prev.Tool == t && samePin(prev.Old, p.Old) {
			continue // the same wait: keep when it was first seen
		}
		if !was && len(f.Pending) >= MaxPending {
			continue // withheld, unrecorded
		}
		f.Pending[n] = p
		changed = true
	}
	sort.Strings(out)
	return out, changed
}

func samePin(a, b *Pin) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Tool == b.Tool
}

// Approve pins the pending tool name as approved by by.
func Approve(f *File, name, by string, now time.Time) error {
	p, ok := f.Pending[name]
	if !ok {
		return fmt.Errorf("%s: no such tool awaits approval", name)
	}
	if f.Pinned == nil {
		f.Pinned = map[string]Pin{}
	}
	f.Pinned[name] = Pin{Tool: p.Tool, Approved: now, By: by}
	delete(f.Pending, name)
	return nil
}

// Store is the pins' directory of one state directory.
type Store struct{ dir string }

// Open is the store under stateDir (made on the first change).
func Open(stateDir string) Store { return Store{dir: Dir(stateDir)} }

// Read reads the file of key; exists is false when there is none yet (an
// empty File is returned then).
func (s Store) Read(key string) (f *File, exists bool, err error) {
	data, err := os.ReadFile(filepath.Join(s.dir, key+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Version: 1}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("gateway pins: %w", err)
	}
	f = &File{}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, false, fmt.Errorf("gateway pins %s.json: %w", key, err)
	}
	return f, true, nil
}

// Update reads the file of key under its lock, lets change edit it
// (exists as in Read), and writes it when change says so. The lock is
// held until the new file is in place; the stamp returned (Stamp) is the
// file's as this update left it.
func (s Store) Update(key string, change func(f *File, exists bool) (bool, error)) (*File, string, error) {
	unlock, err := s.lock(key)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	f, exists, err := s.Read(key)
	if err != nil {
		return nil, "", err
	}
	write, err := change(f, exists)
	if err != nil || !write {
		return f, s.Stamp(key), err
	}
	f.Version = 1
	if err := s.write(key, f); err != nil {
		return nil, "", err
	}
	return f, s.Stamp(key), nil
}

// Keys lists the keys of the files in the store.
func (s Store) Keys() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gateway pins: %w", err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); filepath.Ext(n) == ".json" && e.Type().IsRegular() {
			out = append(out, n[:len(n)-len(".json")])
		}
	}
	sort.Strings(out)
	return out, nil
}

// write replaces the file of key: a temporary file in the same directory,
// synced, renamed over it, the directory synced.
func (s Store) write(key string, f *File) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("gateway pins: %w", err)
	}
	tmp, err := os.CreateTemp(s.dir, key+".*.tmp")
	if err != nil {
		return fmt.Errorf("gateway pins: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing of that name is left
	if _, err := tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.dir, key+".json"))
	}
	if err != nil {
		return fmt.Errorf("gateway pins: %w", err)
	}
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Stamp identifies the version of the file of key on disk (inode, size
// and modification time; every write renames a new file in), "" when
// there is none: a server waiting for an
// approval polls it.
func (s Store) Stamp(key string) string {
	fi, err := os.Stat(filepath.Join(s.dir, key+".json"))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d/%d/%d", inode(fi), fi.Size(), fi.ModTime().UnixNano())
}
