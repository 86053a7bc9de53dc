//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var inspectorPackages npmDir

// TestInspectorCLI: the MCP Inspector's CLI (2.12, on the SDK v2 client)
// gets every tool's denial as a tool result carrying the typed denial in
// _meta, and every success as a result, over stdio, with the server as root
// and as the unprivileged user. It exits 5 ("tool_is_error") for an isError
// result; anything else (a schema error, a protocol error) fails the test.
func TestInspectorCLI(t *testing.T) {
	dir := inspectorPackages.install(t, "inspector", "@modelcontextprotocol/inspector")
	cli := filepath.Join(dir, "node_modules", ".bin", "inspector")
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "SECRET-KEY\n")
		e.chown(t)
		target := []string{binPath}
		if !e.id.root {
			target = []string{"setpriv", "--reuid", strconv.Itoa(e.id.uid), "--regid", strconv.Itoa(e.id.gid), "--clear-groups", "--", binPath}
		}
		target = append(target, "--sandbox", "workspace-write", "--sandbox-net", "off")
		secret := filepath.Join(e.home, ".ssh")
		for _, c := range []struct {
			tool   string
			args   []string
			denied bool
		}{
			{"read_file", []string{"path=README"}, false},
			{"read_file", []string{"path=" + filepath.Join(secret, "id_rsa")}, true},
			{"write_file", []string{"path=new.txt", "content=x"}, false},
			{"write_file", []string{"path=../sibling/x", "content=x"}, true},
			{"list_dir", []string{"path=."}, false},
			{"list_dir", []string{"path=" + secret}, true},
			{"glob", []string{"pattern=*"}, false},
			{"glob", []string{"pattern=*", "path=" + secret}, true},
			{"grep", []string{"pattern=worktree"}, false},
			{"grep", []string{"pattern=SECRET", "path=" + secret}, true},
			{"shell", []string{"command=echo hi"}, false},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			args := []string{"--cli", "--method", "tools/call", "--tool-name", c.tool, "--tool-arg"}
			args = append(args, c.args...)
			args = append(append(args, "--cwd", e.work), target...)
			cmd := exec.CommandContext(ctx, cli, args...)
			cmd.Dir = e.work
			cmd.Env = e.serverEnv(t)
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			err := cmd.Run()
			cancel()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("%s: %v", c.tool, err)
			}
			out := so.String()
			var res struct {
				IsError bool           `json:"isError"`
				Meta    map[string]any `json:"_meta"`
			}
			start := strings.Index(out, "{")
			if start < 0 || json.NewDecoder(strings.NewReader(out[start:])).Decode(&res) != nil {
				t.Errorf("%s %v: no result (exit %d):\n%s\n%s", c.tool, c.args, code, out, se.String())
				continue
			}
			if strings.Contains(out+se.String(), "does not match") || strings.Contains(out, `"code":-32`) {
				t.Errorf("%s %v: the Inspector rejected the result:\n%s", c.tool, c.args, out)
			}
			switch {
			case c.denied && (!res.IsError || res.Meta["evener-mcp/denial"] == nil || code != 5):
				t.Errorf("%s %v: want a denial with _meta (exit 5), got exit %d:\n%s", c.tool, c.args, code, out)
			case !c.denied && (res.IsError || code != 0):
				t.Errorf("%s %v: want a result, got exit %d:\n%s", c.tool, c.args, code, out)
			}
			if strings.Contains(out, "SECRET-KEY") {
				t.Errorf("%s: the secret reached the Inspector", c.tool)
			}
		}
		_ = os.Remove(filepath.Join(e.work, "new.txt"))
	})
}
