//go:build linux

package confine

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestFileLayerAgentCredentials (issue 13 item 10): the file layer refuses
// the agent hosts' and tools' credential files the issue names, in every
// sandboxed mode, and only those: the settings beside them stay readable
// (file-exact where the item names a file).
func TestFileLayerAgentCredentials(t *testing.T) {
	f := newFixtureUnder(t, "/var/tmp")
	secret := []string{
		".claude/.credentials.json", ".codex/auth.json", ".gemini/oauth_creds.json",
		".gemini/mcp-oauth-tokens.json", ".config/rclone/rclone.conf",
		".docker/desktop/docker.sock.txt", ".colima/default/colima.yaml", ".lima/default/lima.yaml",
		".m2/settings.xml", ".gradle/gradle.properties", ".terraform.d/credentials.tfrc.json",
		".password-store/email.gpg",
	}
	open := []string{".claude/settings.json", ".codex/config.toml", ".gemini/settings.json", ".m2/repository/x.pom", ".gradle/init.gradle", ".config/rclone/README"}
	for _, r := range append(append([]string{}, secret...), open...) {
		mustWrite(t, filepath.Join(f.home, r), "x\n")
	}
	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite} {
		t.Run(string(mode), func(t *testing.T) {
			fa, err := NewFileAccess(f.resolve(t, mode, NetworkOff, usableHost), "")
			if err != nil {
				t.Fatal(err)
			}
			defer fa.Close()
			for _, r := range secret {
				_, _, err := fa.ReadFile(filepath.Join(f.home, r))
				var d *Denial
				if !errors.As(err, &d) {
					t.Errorf("read %s: %v, want a denial", r, err)
				}
			}
			for _, r := range open {
				if _, _, err := fa.ReadFile(filepath.Join(f.home, r)); err != nil {
					t.Errorf("read %s: %v, want it readable", r, err)
				}
			}
		})
	}
}
