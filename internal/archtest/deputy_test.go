package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The server is never the sandbox's deputy (docs/security.md, "What is enforced",
// "The server itself"; docs/architecture.md, invariant 6): what it creates,
// removes, renames or changes in a tree a sandbox can write goes through a
// held directory (confine.HeldDir, openat2 beneath a held descriptor,
// O_CREAT|O_EXCL|O_NOFOLLOW, unlinkat, renameat2), never a path string,
// which a running command can redirect with a symbolic link between the
// server's check and its use. TestNoPathMutations fails on a path-based
// mutating call anywhere in the server's packages outside the reviewed
// list below, each entry with the reason it cannot be redirected.

// pathMutations are the calls, by package, that change the filesystem at
// a path string. os.OpenFile, syscall.Open and unix.Open count when their
// flags can create, write or truncate.
var pathMutations = map[string][]string{
	"os": {"WriteFile", "Create", "CreateTemp", "Mkdir", "MkdirAll", "MkdirTemp", "Remove", "RemoveAll",
		"Rename", "Chmod", "Chown", "Lchown", "Chtimes", "Symlink", "Link", "Truncate", "OpenFile"},
	"syscall": {"Mkdir", "Rmdir", "Unlink", "Rename", "Chmod", "Chown", "Lchown", "Symlink", "Link",
		"Mknod", "Mkfifo", "Truncate", "Creat", "Utimes", "Open"},
	"unix": {"Mkdir", "Rmdir", "Unlink", "Rename", "Chmod", "Chown", "Lchown", "Symlink", "Link",
		"Mknod", "Mkfifo", "Truncate", "Creat", "Utimes", "UtimesNano", "Open", "Setxattr", "Removexattr"},
}

// writeFlags are the open flags that make an open mutate.
var writeFlags = []string{"O_WRONLY", "O_RDWR", "O_CREATE", "O_CREAT", "O_TRUNC", "O_APPEND"}

// deputyExceptions are the reviewed path-based mutations, keyed
// "dir/file.go Func pkg.Call", each with why no sandbox can redirect it.
var deputyExceptions = map[string]string{
	// Trees no sandbox can write: cgroupfs, the server's own state
	// directory (masked in every sandbox), its private 0700 directories,
	// and directories it has just made exclusively under a random name.
	"confine/cgroup_linux.go": "cgroupfs: no sandbox mounts it writable (docs/security.md, \"What is enforced\")",
	"confine/session_sandbox_linux.go (*sessionBox).setPidsMax os.WriteFile": "pids.max of the session's pids cgroup: cgroupfs, which no sandbox mounts writable",
	"confine/session_sandbox_linux.go newStdio os.OpenFile":                  "/dev/null, opened for writing as a call's absent output",
	"confine/session_sandbox_inside_linux.go (*tmpPlan).apply os.MkdirAll":   "run by the slot, a sandbox process (PID 1 of namespaces of its own), never by the server: in the tmpfs it has just mounted",
	"confine/session_sandbox_inside_linux.go (*tmpPlan).apply os.Mkdir":      "the same: the slot's own fresh tmpfs",
	"confine/session_sandbox_inside_linux.go (*tmpPlan).apply os.OpenFile":   "the same: the slot's own fresh tmpfs",
	"confine/launcher.go NewLauncherUnder os.MkdirTemp":                      "a new directory with a random name, made exclusively (mkdir fails on any existing entry) in TMPDIR or the server's private scratch parent, before any sandbox over it exists",
	"confine/gitprotect.go (*checker).copyToPrivate os.MkdirTemp":            "the protected-in-git check's private directory for its index copy: random name, made exclusively in TMPDIR, then held by a descriptor",
	"confine/gitprotect.go (*checker).close os.Remove":                       "the same private directory, emptied by descriptor and checked to be the held inode; it lies in TMPDIR, never in a sandbox's tree",
	"confine/gitprotect.go (*checker).copyToPrivate os.Remove":               "the same directory, just made, when it cannot be opened",
	"confine/gitsweep.go chmodFD unix.Fchmodat":                              "by descriptor: /proc/self/fd/N of an O_PATH descriptor names the inode the sweep holds, not a path a command can redirect",
	"confine/launcher_trace.go FlushPhases os.OpenFile":                      "EVENER_MCP_PHASES: a file the user names for a benchmark, never in a sandbox's tree",
	"confine/probe_linux.go overlayWorks os.MkdirTemp":                       "the probe's own temporary directory, made exclusively before its probe sandbox",
	"confine/probe_linux.go overlayWorks os.RemoveAll":                       "the probe's own temporary directory, after its probe sandbox ended (Go's RemoveAll opens every level without following a link)",
	"egress/bridge.go newBridge os.MkdirTemp":                                "the bridge's own directory, random name, made exclusively; sandboxes are bound its sockets, never the directory",
	"egress/bridge.go newBridge os.Chmod":                                    "the same directory, just made by this server",
	"egress/bridge.go newBridge os.RemoveAll":                                "the same directory, on a failed start, before any sandbox",
	"egress/bridge.go (*socketBridge).Close os.RemoveAll":                    "the bridge's directory, which holds only its two sockets; no sandbox can write it",
	"sshagent/agent.go Listen os.MkdirTemp":                                  "the agent's own directory, random name, made exclusively in the server's private scratch parent or TMPDIR; sandboxes are bound its socket, never the directory",
	"sshagent/agent.go Listen os.RemoveAll":                                  "the same directory, just made, when the socket cannot be bound",
	"sshagent/agent.go (*Server).Close os.RemoveAll":                         "the agent's directory, which holds only its socket; no sandbox can write it",
	"session/audit.go OpenAudit os.MkdirAll":                                 "the state directory: the user's, masked in every sandbox",
	"session/audit.go OpenAudit os.OpenFile":                                 "the audit log in the state directory, masked in every sandbox",
	"server/persist.go ownDir os.Mkdir":                                      "the server's private directories (sessions/ of the state directory, the scratch parent); PrivateDir then refuses a link or another owner's entry",
	"server/transport_http.go makeScratchParent os.MkdirTemp":                "the scratch parent, a new directory with a random name made exclusively before any session",
	"cmd/evener-mcp-server/main.go runStdio os.Create":                       "EVENER_MCP_CPUPROFILE: a file the user names to profile the server, never in a sandbox's tree",
	"memory/memory.go openRoot os.MkdirAll":                                  "the state directory, masked in every sandbox",
	"gateway/pins/pins.go":                                                   "the gateway's pins in the state directory (gateway-pins/), masked in every sandbox: a temporary file made exclusively with a random name, renamed over the pin file",
	"gateway/pins/lock_unix.go":                                              "the gateway's pins directory (0700) and lock files (O_NOFOLLOW) in the state directory, masked in every sandbox",
}

// deputyPackages are the directories whose code runs in the server.
// integration/, internal/ and deploy/ hold tests and benchmarks only.
func deputyPackages(t *testing.T, root string) []string {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			switch {
			case rel == ".":
				return nil
			case strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "node_modules",
				rel == "integration", rel == "internal", rel == "deploy", rel == "scripts", rel == "docs":
				return filepath.SkipDir
			}
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

type mutation struct {
	key string // "dir/file.go Func pkg.Call"
	pos string // file:line, for the message
}

// findMutations lists the path-based mutating calls in the non-test Go
// files of dir.
func findMutations(t *testing.T, root, dir string) []mutation {
	fset := token.NewFileSet()
	ents, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []mutation
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(root, dir, name)
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		local := map[string]string{} // local import name -> "os", "syscall", "unix"
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			base := map[string]string{"os": "os", "syscall": "syscall", "golang.org/x/sys/unix": "unix"}[p]
			if base == "" {
				continue
			}
			n := base
			if imp.Name != nil {
				n = imp.Name.Name
			}
			local[n] = base
		}
		for _, decl := range f.Decls {
			fn := "(file)"
			if fd, ok := decl.(*ast.FuncDecl); ok {
				fn = funcName(fd)
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				id, ok := sel.X.(*ast.Ident)
				if !ok || local[id.Name] == "" {
					return true
				}
				pkg := local[id.Name]
				call1 := sel.Sel.Name
				mut := slices.Contains(pathMutations[pkg], call1)
				if mut && (call1 == "OpenFile" || call1 == "Open") && len(call.Args) >= 2 && !mentions(call.Args[1], writeFlags) {
					mut = false
				}
				// A *at call relative to the working directory is a path call.
				if !mut && strings.HasSuffix(call1, "at") && len(call.Args) > 0 && mentions(call.Args[0], []string{"AT_FDCWD"}) {
					mut = true
				}
				if mut {
					out = append(out, mutation{
						key: fmt.Sprintf("%s/%s %s %s.%s", filepath.ToSlash(dir), name, fn, pkg, call1),
						pos: fset.Position(call.Pos()).String(),
					})
				}
				return true
			})
		}
	}
	return out
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	var b strings.Builder
	var recv func(e ast.Expr)
	recv = func(e ast.Expr) {
		switch x := e.(type) {
		case *ast.StarExpr:
			b.WriteString("*")
			recv(x.X)
		case *ast.Ident:
			b.WriteString(x.Name)
		case *ast.IndexExpr:
			recv(x.X)
		case *ast.IndexListExpr:
			recv(x.X)
		}
	}
	recv(fd.Recv.List[0].Type)
	return "(" + b.String() + ")." + fd.Name.Name
}

// mentions reports whether expression e names any of idents.
func mentions(e ast.Expr, idents []string) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Ident:
			if slices.Contains(idents, x.Name) {
				found = true
			}
		case *ast.SelectorExpr:
			if slices.Contains(idents, x.Sel.Name) {
				found = true
			}
		}
		return !found
	})
	return found
}

// exceptionFor is the reason covering key: an entry for the call itself,
// or for its whole file, or for its whole directory.
func exceptionFor(key string) (string, string) {
	file, _, _ := strings.Cut(key, " ")
	for _, k := range []string{key, file, filepath.Dir(file)} {
		if r, ok := deputyExceptions[k]; ok {
			return k, r
		}
	}
	return "", ""
}

func TestNoPathMutations(t *testing.T) {
	root := moduleRoot(t)
	used := map[string]bool{}
	var bad []string
	for _, dir := range deputyPackages(t, root) {
		for _, m := range findMutations(t, root, dir) {
			k, r := exceptionFor(m.key)
			if r == "" {
				rel, _ := filepath.Rel(root, m.pos)
				bad = append(bad, fmt.Sprintf("%s: %s", rel, m.key))
				continue
			}
			used[k] = true
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("path-based mutating call outside the reviewed exceptions (use confine.HeldDir, or add an exception with its reason): %s", b)
	}
	for k := range deputyExceptions {
		if !used[k] {
			t.Errorf("stale exception (no such call any more; remove it): %s", k)
		}
	}
}

// TestFindMutations: the scanner finds what it must (a test that cannot
// fail is a defect).
func TestFindMutations(t *testing.T) {
	dir := t.TempDir()
	src := `package x
import (
	"os"
	sys "golang.org/x/sys/unix"
)
func a() { os.WriteFile("p", nil, 0) }
func (s *T) b() { _, _ = os.OpenFile("p", os.O_WRONLY|os.O_CREATE, 0) }
func c() { _, _ = os.OpenFile("p", os.O_RDONLY, 0) }
func d() { sys.Unlinkat(sys.AT_FDCWD, "p", 0) }
func e() { sys.Unlinkat(3, "p", 0) }
func f() { os.Rename("a", "b") }
`
	if err := os.MkdirAll(filepath.Join(dir, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pkg", "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range findMutations(t, dir, "pkg") {
		keys = append(keys, m.key)
	}
	want := []string{"pkg/x.go a os.WriteFile", "pkg/x.go (*T).b os.OpenFile", "pkg/x.go d unix.Unlinkat", "pkg/x.go f os.Rename"}
	if !slices.Equal(keys, want) {
		t.Errorf("found %q, want %q", keys, want)
	}
}

// moduleRoot is the directory holding go.mod (the test runs in its own
// package directory).
func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}
