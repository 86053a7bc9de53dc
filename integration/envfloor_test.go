//go:build linux

package integration

// Spec 000 "The environment floor", as a table: what the server's
// environment holds -> what `env` prints inside the sandbox, in every
// sandboxed mode, as root and as the unprivileged user.

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// floorRow is one variable the server is started with and its fate.
type floorRow struct {
	name, value string
	// keep: the variable reaches the command with exactly this value.
	keep bool
	// secret is a substring of value that must appear nowhere in the
	// command's environment when the row is dropped ("" = the whole value).
	secret string
}

// floorDropped are dropped in every sandboxed mode.
var floorDropped = []floorRow{
	{name: "SSH_AUTH_SOCK", value: "/run/user/1000/evener-floor-agent.sock"},
	{name: "GNUPGHOME", value: "/srv/evener-floor-gnupg"},
	{name: "DOCKER_HOST", value: "unix:///run/evener-floor-docker.sock"},
	{name: "AWS_PROFILE", value: "evener-floor-aws-profile"},
	{name: "AWS_SECRET_ACCESS_KEY", value: "evener-floor-aws-secret"},
	{name: "AWS_REGION", value: "evener-floor-aws-region"},
	{name: "GOOGLE_APPLICATION_CREDENTIALS", value: "/srv/evener-floor-gcp.json"},
	{name: "GOOGLE_CLOUD_PROJECT", value: "evener-floor-google-project"},
	{name: "GCLOUD_PROJECT", value: "evener-floor-gcloud-project"},
	{name: "VAULT_ADDR", value: "https://evener-floor-vault.example"},
	{name: "VAULT_TOKEN", value: "evener-floor-vault-token"},
	{name: "OPENAI_API_KEY", value: "sk-evener-floor-key"},
	{name: "MY_SECRET", value: "evener-floor-my-secret"},
	{name: "GH_TOKEN", value: "evener-floor-gh-token"},
	{name: "DB_PASSWORD", value: "evener-floor-db-password"},
	{name: "NPM_CREDENTIALS", value: "evener-floor-npm-credentials"},
	{name: "github_token", value: "ghp_evenerfloorlowercase"},
	{name: "DATABASE_URL", value: "postgres://app:evener-floor-dbpass@db.internal/app", secret: "evener-floor-dbpass"},
	{name: "http_proxy", value: "http://u:evener-floor-proxypass@corp:3128", secret: "evener-floor-proxypass"},
	{name: "SENTRY_DSN", value: "https://evenerfloorsentrykey@o1.ingest.sentry.io/1", secret: "evenerfloorsentrykey"},
	{name: "CI_JOB_JWT", value: "eyJevener.floor.jwt"},
	{name: "MY_RANDOM_VAR", value: "evener-floor-random-value"},
	{name: "MY_API_KEY", value: "evener-floor-my-api-key"},
}

// floorKept reach the command unchanged (PATH, HOME, LANG come from the
// harness and are checked against it).
var floorKept = []floorRow{
	{name: "GIT_AUTHOR_NAME", value: "Evener Floor Author", keep: true},
}

func floorEnvMap(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && k != "" && !strings.ContainsAny(k, " \t") {
			m[k] = v
		}
	}
	return m
}

func floorUnder(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// TestEnvFloor is the README's environment floor, row by row.
func TestEnvFloor(t *testing.T) {
	// The server's PATH as the harness sets it, then once more with the Go
	// toolchain appended (last occurrence wins, as in getenv).
	const goPath = "/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		outsideKube := filepath.Join(e.home, ".kube", "config")
		insideKube := filepath.Join(e.work, "kubeconfig")
		writeFile(t, outsideKube, "apiVersion: v1\n")
		writeFile(t, insideKube, "apiVersion: v1\n")
		hostCaches := map[string]string{
			"GOCACHE":          filepath.Join(e.home, ".cache", "go-build"),
			"GOMODCACHE":       filepath.Join(e.home, "go", "pkg", "mod"),
			"GOPATH":           filepath.Join(e.home, "go"),
			"npm_config_cache": filepath.Join(e.home, ".npm"),
			"CARGO_HOME":       filepath.Join(e.home, ".cargo"),
		}
		base := []string{"PATH=" + goPath}
		for _, r := range append(append([]floorRow{}, floorDropped...), floorKept...) {
			base = append(base, r.name+"="+r.value)
		}
		for k, v := range hostCaches {
			base = append(base, k+"="+v)
		}
		passCfg := filepath.Join(e.root, "cfg", "passthrough.toml")
		writeFile(t, passCfg, "env_passthrough = [\"MY_RANDOM_VAR\", \"MY_API_KEY\"]\n")

		script := `env; echo "EVENER_PROBE_GOENV=$(go env GOCACHE 2>/dev/null)"; ` +
			`if [ -d "$TMPDIR" ] && touch "$TMPDIR/floor-probe" 2>/dev/null; then echo EVENER_PROBE_TMPDIR=writable; else echo EVENER_PROBE_TMPDIR=unwritable; fi`

		// Proof: outside the sandbox the server's environment reaches the
		// command (so "dropped" below is the floor's doing, not the
		// harness's), and it does hold the variables.
		e.extra = append(slices.Clone(base), "KUBECONFIG="+outsideKube)
		off := floorEnvMap(e.sh(t, "off", script).stdout)
		for _, k := range []string{"MY_RANDOM_VAR", "GIT_AUTHOR_NAME", "KUBECONFIG"} {
			if off[k] == "" {
				t.Errorf("probe: %s does not reach the command even with --sandbox off", k)
			}
		}

		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				// Run 1: KUBECONFIG outside every granted root.
				e.extra = append(slices.Clone(base), "KUBECONFIG="+outsideKube)
				r := e.sh(t, mode, script)
				if r.code != 0 {
					t.Fatalf("script failed: %s", r)
				}
				got := floorEnvMap(r.stdout)
				for _, row := range floorDropped {
					if v, ok := got[row.name]; ok {
						t.Errorf("%s=%q reached the command; the floor drops it", row.name, v)
					}
					secret := row.secret
					if secret == "" {
						secret = row.value
					}
					if strings.Contains(r.stdout, secret) {
						t.Errorf("the value of %s (%q) shows in the command's environment", row.name, secret)
					}
				}
				if v, ok := got["KUBECONFIG"]; ok {
					t.Errorf("KUBECONFIG=%q outside every granted root reached the command", v)
				}
				for _, row := range floorKept {
					if got[row.name] != row.value {
						t.Errorf("%s = %q, want %q (kept)", row.name, got[row.name], row.value)
					}
				}
				for k, want := range map[string]string{"PATH": goPath, "HOME": e.home, "LANG": "C.UTF-8"} {
					if got[k] != want {
						t.Errorf("%s = %q, want %q (kept)", k, got[k], want)
					}
				}

				// TMPDIR and EVENER_SCRATCH_DIR: one existing, writable
				// directory outside the worktree.
				tmp, scratch := got["TMPDIR"], got["EVENER_SCRATCH_DIR"]
				switch {
				case tmp == "" || tmp != scratch:
					t.Errorf("TMPDIR=%q EVENER_SCRATCH_DIR=%q, want the same directory", tmp, scratch)
				case !filepath.IsAbs(tmp) || floorUnder(tmp, e.work):
					t.Errorf("TMPDIR=%q is not an absolute path outside the worktree %s", tmp, e.work)
				case tmp == filepath.Join(e.root, "tmp"):
					t.Errorf("TMPDIR=%q is the server's own TMPDIR, not a per-session scratch", tmp)
				}
				if got["EVENER_PROBE_TMPDIR"] != "writable" {
					t.Errorf("TMPDIR %q is not an existing writable directory inside the sandbox", tmp)
				}

				// Language caches under the scratch (session-private
				// strategy: this bwrap has no overlay).
				if mode == "workspace-write" || mode == "restricted" {
					for k := range hostCaches {
						v := got[k]
						if k == "GOPATH" {
							v, _, _ = strings.Cut(v, ":")
						}
						if tmp == "" || !floorUnder(v, tmp) {
							t.Errorf("%s = %q, want a path under the scratch %q", k, got[k], tmp)
						}
					}
				}
				if mode == "workspace-write" {
					if g := got["EVENER_PROBE_GOENV"]; g == "" || g != got["GOCACHE"] {
						t.Errorf("go env GOCACHE = %q, want the scratch value %q\n%s", g, got["GOCACHE"], r)
					}
				}

				// Run 2: KUBECONFIG inside the worktree, and a trusted
				// env_passthrough naming one harmless and one secret name.
				e.extra = append(slices.Clone(base), "KUBECONFIG="+insideKube)
				r = e.sh(t, mode, "env", "--config", passCfg)
				if r.code != 0 {
					t.Fatalf("script failed: %s", r)
				}
				got = floorEnvMap(r.stdout)
				if got["KUBECONFIG"] != insideKube {
					t.Errorf("KUBECONFIG inside the worktree = %q, want %q (kept)", got["KUBECONFIG"], insideKube)
				}
				if got["MY_RANDOM_VAR"] != "evener-floor-random-value" {
					t.Errorf("env_passthrough = [\"MY_RANDOM_VAR\"] did not let it through (got %q)", got["MY_RANDOM_VAR"])
				}
				if v, ok := got["MY_API_KEY"]; ok || strings.Contains(r.stdout, "evener-floor-my-api-key") {
					t.Errorf("env_passthrough let the secret-looking MY_API_KEY=%q through", v)
				}
				for _, row := range floorDropped {
					if row.name == "MY_RANDOM_VAR" {
						continue
					}
					if _, ok := got[row.name]; ok {
						t.Errorf("with env_passthrough: %s reached the command", row.name)
					}
				}
			})
		}
	})
}
