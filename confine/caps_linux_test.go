//go:build linux

package confine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const capsChildEnv = "EVENER_CAPS_CHILD" // value: a 0600 file owned by another uid

// TestDropServerCapabilities (issue 13 item 2): a process started by root
// that calls DropServerCapabilities can no longer open another user's
// 0600 file, in any thread, and bubblewrap it then starts still gets the
// capabilities it needs to build a sandbox (execve refills them from the
// bounding set). Run in a re-executed child: dropping is for the life of
// the process. With cgo (CGO_ENABLED=1 go test) the child re-executes
// itself once more to drop (caps_linux.go).
func TestDropServerCapabilities(t *testing.T) {
	if os.Getenv(capsChildEnv) != "" {
		t.Skip("helper process")
	}
	if os.Geteuid() != 0 {
		if err := DropServerCapabilities(); err != nil {
			t.Fatalf("not root: DropServerCapabilities = %v, want a no-op", err)
		}
		t.Skip("dropping applies to a process started by root")
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap not installed")
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "id_rsa")
	if err := os.WriteFile(secret, []byte("PRIVATE KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(secret, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(secret); err != nil {
		t.Fatalf("control: root cannot read the file before dropping: %v", err)
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^TestDropServerCapabilitiesChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), capsChildEnv+"="+secret, "EVENER_CAPS_BWRAP="+bwrap)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDropServerCapabilitiesChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestDropServerCapabilitiesChild(t *testing.T) {
	secret := os.Getenv(capsChildEnv)
	if secret == "" {
		t.Skip("helper process for TestDropServerCapabilities")
	}
	if err := DropServerCapabilities(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(secret); err == nil {
		t.Error("read another user's 0600 file after dropping")
	}
	// Every thread: a read from many goroutines lands on many threads.
	errs := make(chan error, 32)
	for range 32 {
		go func() { _, err := os.ReadFile(secret); errs <- err }()
	}
	for range 32 {
		if err := <-errs; err == nil {
			t.Error("a thread still reads another user's 0600 file")
		}
	}
	if err := verifyThreadCaps(); err != nil {
		t.Error(err)
	}
	// bwrap as root with no user namespace of its own needs
	// CAP_SYS_ADMIN and friends: they come back at exec.
	out, err := exec.Command(os.Getenv("EVENER_CAPS_BWRAP"), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--unshare-pid", "--", "/bin/sh", "-c", "grep CapEff /proc/self/status").CombinedOutput()
	if err != nil {
		t.Fatalf("bwrap after dropping: %v\n%s", err, out)
	}
	t.Logf("bwrap child: %s", strings.TrimSpace(string(out)))
}

// TestDropCapsNoReexecLoop: an image of a cgo build started with
// dropCapsEnv that still holds the capabilities (here: asked to drop
// none) refuses to start instead of re-executing again.
func TestDropCapsNoReexecLoop(t *testing.T) {
	if os.Getenv(capsChildEnv) != "" {
		t.Skip("helper process")
	}
	if os.Geteuid() != 0 || !cgoBuild {
		t.Skip("re-execution applies to a cgo build started by root (CGO_ENABLED=1 go test as root)")
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^TestDropCapsNoReexecLoopChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), capsChildEnv+"=loop", dropCapsEnv+"=0")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDropCapsNoReexecLoopChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "=== RUN   TestDropCapsNoReexecLoopChild"); n != 1 {
		t.Fatalf("the child ran %d times, want once (no re-execution):\n%s", n, out)
	}
}

func TestDropCapsNoReexecLoopChild(t *testing.T) {
	if os.Getenv(capsChildEnv) != "loop" {
		t.Skip("helper process for TestDropCapsNoReexecLoop")
	}
	err := DropServerCapabilities()
	if err == nil || !strings.Contains(err.Error(), "still holding") {
		t.Fatalf("DropServerCapabilities = %v, want a refusal: still holding the capabilities", err)
	}
	if os.Getenv(dropCapsEnv) != "" {
		t.Errorf("%s still in the environment", dropCapsEnv)
	}
}
