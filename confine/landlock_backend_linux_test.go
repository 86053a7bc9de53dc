package confine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGrantWalkKeepsDeniedOut: a tree holding a denied path is granted
// entry by entry around it, never the denied path, nor a link to it.
func TestGrantWalkKeepsDeniedOut(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	for _, d := range []string{".ssh", ".config/gh", ".config/tool", "src/deep"} {
		mustMkdir(t, filepath.Join(home, d))
	}
	for _, f := range []string{".ssh/id", ".config/gh/hosts.yml", ".config/tool/x", "notes", "src/deep/y"} {
		if err := os.WriteFile(filepath.Join(home, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "keys")))
	must(os.Symlink(home, filepath.Join(home, "src", "up")))
	must(os.Symlink(filepath.Join(home, ".config", "tool"), filepath.Join(home, "tool")))
	g := &grantWalk{deny: []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".config", "gh")}}
	if err := g.grant(home, 0); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"notes", "src", ".config/tool"} {
		if !slices.Contains(g.out, filepath.Join(home, want)) {
			t.Errorf("%s not granted: %v", want, g.out)
		}
	}
	for _, p := range g.out {
		for _, d := range append(g.deny, home) {
			if p == d || Within(d, p) && d != home {
				t.Errorf("granted %s, which is or holds the denied %s", p, d)
			}
		}
	}
	if slices.Contains(g.out, home) || slices.Contains(g.out, filepath.Join(home, ".config")) {
		t.Errorf("a tree holding a denied path was granted whole: %v", g.out)
	}
}

func TestLandlockRulesBindRoundTrip(t *testing.T) {
	r := LandlockRules{Read: []string{"/usr"}, GuardTCP: true, TCPPorts: []uint16{4000}, GuardBind: true, HostNetNS: "1:2"}
	got, err := ParseLandlockRules(r.Encode())
	if err != nil || !got.GuardBind || !got.GuardTCP || len(got.TCPPorts) != 1 {
		t.Errorf("round trip: %+v %v", got, err)
	}
	x, err := parseLandlockBackend("v1;net=host;rl=1,2,3")
	if err != nil || !x.netHost || x.nofile != 1 || x.fsize != 2 || x.dataLim != 3 {
		t.Errorf("backend extras: %+v %v", x, err)
	}
	if _, err := parseLandlockBackend("v2"); err == nil {
		t.Error("unknown version accepted")
	}
	for _, host := range []bool{false, true} {
		if _, err := landlockBackendFilter(host); err != nil {
			t.Errorf("filter (host %v): %v", host, err)
		}
	}
}
