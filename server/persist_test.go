package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func goodRecord(id, parent string) *sessionRecord {
	now := time.Now().UTC()
	return &sessionRecord{
		Version: recordVersion, MCPID: id, SessionID: "0123456789abcdef",
		Mode: "workspace-write", Network: "off", Tools: []string{"shell", "read_file"},
		Workdir: "/work/tree", Scratch: filepath.Join(parent, "evener-mcp-123"),
		Created: now, LastUsed: now, Protocol: "2025-11-25",
	}
}

// TestSessionRecords: a record is written 0600 and read back as written; one
// that does not parse, carries an unknown field, or whose fields are not
// what this server writes is refused, not guessed at.
func TestSessionRecords(t *testing.T) {
	state := t.TempDir()
	parent := t.TempDir()
	st, err := openPersistStore(state, parent)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if _, err := openPersistStore(state, parent); err == nil {
		t.Errorf("a second server opened the same store")
	}
	id := strings.Repeat("A", 26)
	if err := st.write(goodRecord(id, parent)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(st.dir, recordFile(id))); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v", fi, err)
	}
	if rec, err := st.load(id); err != nil || rec.Mode != "workspace-write" || rec.Scratch != filepath.Join(parent, "evener-mcp-123") {
		t.Fatalf("load: %+v %v", rec, err)
	}
	bad := map[string]func(*sessionRecord){
		"version":   func(r *sessionRecord) { r.Version = 2 },
		"other id":  func(r *sessionRecord) { r.MCPID = strings.Repeat("B", 26) },
		"sandbox":   func(r *sessionRecord) { r.SessionID = "../x" },
		"mode":      func(r *sessionRecord) { r.Mode = "unconfined" },
		"network":   func(r *sessionRecord) { r.Network = "maybe" },
		"tool":      func(r *sessionRecord) { r.Tools = append(r.Tools, "sudo") },
		"workdir":   func(r *sessionRecord) { r.Workdir = "tree" },
		"scratch":   func(r *sessionRecord) { r.Scratch = "/tmp/evener-mcp-1" },
		"dotdot":    func(r *sessionRecord) { r.Scratch = parent + "/x/../evener-mcp-1" },
		"times":     func(r *sessionRecord) { r.LastUsed = r.Created.Add(-time.Hour) },
		"protocol":  func(r *sessionRecord) { r.Protocol = "" },
		"no create": func(r *sessionRecord) { r.Created = time.Time{} },
	}
	for name, f := range bad {
		r := goodRecord(id, parent)
		f(r)
		if err := r.validate(id, parent); err == nil {
			t.Errorf("%s: a record that is not what this server writes was accepted", name)
		}
	}
	for name, text := range map[string]string{
		"truncated": `{"version":1`,
		"unknown":   `{"version":1,"widen":true}`,
		"trailing":  `{"version":1} {}`,
		"empty":     ``,
	} {
		if err := os.WriteFile(filepath.Join(st.dir, recordFile(id)), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := st.load(id); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	// A record file that is a symbolic link is not followed.
	os.Remove(filepath.Join(st.dir, recordFile(id)))
	target := filepath.Join(t.TempDir(), "rec.json")
	if err := st.write(goodRecord(id, parent)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(st.dir, recordFile(id)), target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(st.dir, recordFile(id))); err != nil {
		t.Fatal(err)
	}
	if _, err := st.load(id); err == nil {
		t.Errorf("a record behind a symbolic link was loaded")
	}
	if _, err := st.load("../" + id); err == nil {
		t.Errorf("a malformed id was loaded")
	}
}

// TestSessionRecordSweep: records idle past the timeout go, live ones and
// fresh ones stay.
func TestSessionRecordSweep(t *testing.T) {
	parent := privateTempDir(t)
	st, err := openPersistStore(t.TempDir(), parent)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	old, fresh, live := strings.Repeat("C", 26), strings.Repeat("D", 26), strings.Repeat("E", 26)
	for _, id := range []string{old, fresh, live} {
		r := goodRecord(id, parent)
		if id != fresh {
			r.Created = r.Created.Add(-time.Hour)
			r.LastUsed = r.Created
		}
		if err := st.write(r); err != nil {
			t.Fatal(err)
		}
	}
	n, _ := st.sweep(time.Minute, time.Now(), func(id string) bool { return id == live })
	if n != 1 || st.has(old) || !st.has(fresh) || !st.has(live) {
		t.Errorf("sweep removed %d: old %v fresh %v live %v", n, st.has(old), st.has(fresh), st.has(live))
	}
}

// privateTempDir is a temporary directory of mode 0700, as the server's own
// scratch parent is (ownDir).
func privateTempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err == nil {
		err = os.Chmod(d, 0o700)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSessionRecordSweepChmodScratch: a persisted session whose command ran
// `chmod 0755 $TMPDIR` (and left a read-only directory in it) no longer
// keeps its scratch and record for good: the sweep sets the scratch's mode
// back, removes both, and counts only what is gone; a scratch that is not
// this server's to remove keeps its record, is not counted, and is named.
func TestSessionRecordSweepChmodScratch(t *testing.T) {
	parent := privateTempDir(t)
	st, err := openPersistStore(t.TempDir(), parent)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	id := strings.Repeat("F", 26)
	r := goodRecord(id, parent)
	r.Created = r.Created.Add(-time.Hour)
	r.LastUsed = r.Created
	for _, d := range []string{r.Scratch, filepath.Join(r.Scratch, "mod"), filepath.Join(r.Scratch, "mod", "pkg")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.Scratch, "mod", "pkg", "x.go"), []byte("package x"), 0o444); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(r.Scratch, "mod", "pkg"), filepath.Join(r.Scratch, "mod")} {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(r.Scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := st.write(r); err != nil {
		t.Fatal(err)
	}
	n, errs := st.sweep(time.Minute, time.Now(), func(string) bool { return false })
	if n != 1 || len(errs) != 0 || st.has(id) {
		t.Errorf("sweep: removed %d, errors %v, record still there: %v", n, errs, st.has(id))
	}
	if _, err := os.Lstat(r.Scratch); !os.IsNotExist(err) {
		t.Errorf("the chmod'ed scratch is still there: %v", err)
	}

	// Not ours: a scratch name that is a symbolic link to elsewhere.
	other := t.TempDir()
	keep := filepath.Join(other, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	id2 := strings.Repeat("G", 26)
	r2 := goodRecord(id2, parent)
	r2.Scratch = filepath.Join(parent, "evener-mcp-456")
	r2.Created = r2.Created.Add(-time.Hour)
	r2.LastUsed = r2.Created
	if err := os.Symlink(other, r2.Scratch); err != nil {
		t.Fatal(err)
	}
	if err := st.write(r2); err != nil {
		t.Fatal(err)
	}
	n, errs = st.sweep(time.Minute, time.Now(), func(string) bool { return false })
	if n != 0 || len(errs) != 1 || !st.has(id2) {
		t.Errorf("sweep of a record whose scratch is a link: removed %d, errors %v, record kept: %v", n, errs, st.has(id2))
	}
	if len(errs) == 1 && strings.Contains(errs[0].Error(), other) {
		t.Errorf("the error names a host path: %v", errs[0])
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the link's target lost a file: %v", err)
	}
}
