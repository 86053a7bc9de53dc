package confine

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// envHost is a server environment full of things that must not reach a
// sandbox, with the few that must.
var envHost = []string{
	"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI",
	"AWS_PROFILE=prod",
	"github_token=ghp_lower",
	"GITHUB_TOKEN=ghp_upper",
	"DATABASE_URL=postgres://u:p@h/db",
	"http_proxy=http://u:p@corp:3128",
	"SENTRY_DSN=https://k@o.ingest/1",
	"CI_JOB_JWT=eyJhbGciOi",
	"SSH_AUTH_SOCK=/tmp/ssh-XXXX/agent.1",
	"GNUPGHOME=/home/u/.gnupg",
	"DOCKER_HOST=unix:///run/docker.sock",
	"GOOGLE_APPLICATION_CREDENTIALS=/home/u/sa.json",
	"VAULT_ADDR=https://vault:8200",
	"KUBECONFIG=/elsewhere/kube",
	"OPENAI_API_KEY=sk-xxx",
	"MY_PLAIN=ok",
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/home/u",
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"GOPROXY=https://u:p@proxy/",
}

// envSecretNames are the names of envHost that never pass, in any mode.
var envSecretNames = []string{
	"AWS_SECRET_ACCESS_KEY", "github_token", "GITHUB_TOKEN", "DATABASE_URL", "http_proxy",
	"SENTRY_DSN", "CI_JOB_JWT", "OPENAI_API_KEY", "GOPROXY",
}

// envFloorNames are dropped in every sandbox (docs/security.md, "What is enforced",
// "Environment floor").
var envFloorNames = []string{
	"AWS_PROFILE", "SSH_AUTH_SOCK", "GNUPGHOME", "DOCKER_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "VAULT_ADDR",
}

func envNames(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k)
	}
	return out
}

func TestEnvFloor(t *testing.T) {
	sandboxed := []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted}
	type tcase struct {
		Name      string
		Host      []string
		Extra     []string
		Mode      Mode
		Overrides map[string]string
		Roots     []string
		Want      []string // exact result, when set
		WantHas   []string // KEY=VALUE entries that must be present
		WantNot   []string // names that must be absent
	}
	var tests []tcase
	for _, m := range sandboxed {
		tests = append(tests,
			tcase{
				Name: string(m) + "/floor-only", Host: envHost, Mode: m, Roots: []string{"/work/repo"},
				Want: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C.UTF-8"},
			},
			tcase{
				Name: string(m) + "/floor-plus-overrides", Host: envHost, Mode: m, Roots: []string{"/work/repo"},
				Overrides: map[string]string{"TMPDIR": "/scratch/s1", "EVENER_SCRATCH_DIR": "/scratch/s1"},
				Want: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
					"EVENER_SCRATCH_DIR=/scratch/s1", "TMPDIR=/scratch/s1"},
			},
			tcase{
				// A trusted passthrough list admits a plain name, never a
				// secret-looking one or the floor's families.
				Name: string(m) + "/extra-passthrough", Host: envHost, Mode: m, Roots: []string{"/work/repo"},
				Extra: append(append([]string{"MY_PLAIN"}, envSecretNames...), envFloorNames...),
				Want:  []string{"MY_PLAIN=ok", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C.UTF-8"},
			},
			tcase{
				Name: string(m) + "/kubeconfig-inside-write-root", Mode: m, Roots: []string{"/work/repo"},
				Host:    []string{"KUBECONFIG=/work/repo/.kube/config", "PATH=/bin"},
				WantHas: []string{"KUBECONFIG=/work/repo/.kube/config"},
			},
			tcase{
				Name: string(m) + "/kubeconfig-list-partly-outside", Mode: m, Roots: []string{"/work/repo"},
				Host:    []string{"KUBECONFIG=/work/repo/kube:/home/u/.kube/config", "PATH=/bin"},
				WantNot: []string{"KUBECONFIG"},
			},
			tcase{
				Name: string(m) + "/kubeconfig-relative", Mode: m, Roots: []string{"/work/repo"},
				Host:    []string{"KUBECONFIG=kube/config", "PATH=/bin"},
				WantNot: []string{"KUBECONFIG"},
			},
			tcase{
				Name: string(m) + "/kubeconfig-dotdot-escape", Mode: m, Roots: []string{"/work/repo"},
				Host:    []string{"KUBECONFIG=/work/repo/../other/kube", "PATH=/bin"},
				WantNot: []string{"KUBECONFIG"},
			},
			tcase{
				Name: string(m) + "/kubeconfig-no-roots", Mode: m,
				Host:    []string{"KUBECONFIG=/work/repo/kube", "PATH=/bin"},
				WantNot: []string{"KUBECONFIG"},
			},
		)
	}
	tests = append(tests,
		tcase{
			// Off keeps the host environment but still drops what looks
			// like a secret.
			Name: "off/host-env", Host: envHost, Mode: ModeOff,
			WantHas: []string{"MY_PLAIN=ok", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
				"KUBECONFIG=/elsewhere/kube"},
			WantNot: envSecretNames,
		},
		tcase{
			Name: "overrides-win-once", Mode: ModeWorkspaceWrite,
			Host:      []string{"PATH=/usr/bin", "TMPDIR=/tmp", "GOPATH=/home/u/go", "HOME=/home/u"},
			Overrides: map[string]string{"TMPDIR": "/scratch/s1", "GOPATH": "/scratch/s1/cache/gopath:/home/u/go", "PWD": "/work/repo"},
			Want:      []string{"PATH=/usr/bin", "HOME=/home/u", "GOPATH=/scratch/s1/cache/gopath:/home/u/go", "PWD=/work/repo", "TMPDIR=/scratch/s1"},
		},
		tcase{
			Name: "off/overrides-win-once", Mode: ModeOff,
			Host:      []string{"PWD=/old", "MY_PLAIN=ok", "PWD=/older"},
			Overrides: map[string]string{"PWD": "/work/repo"},
			Want:      []string{"MY_PLAIN=ok", "PWD=/work/repo"},
		},
		tcase{
			Name: "last-occurrence-wins", Mode: ModeRestricted,
			Host: []string{"PATH=/first", "LANG=C", "PATH=/second"},
			Want: []string{"LANG=C", "PATH=/second"},
		},
		tcase{
			// Regression: "AUTH" must not match AUTHOR.
			Name: "git-author-kept", Mode: ModeWorkspaceWrite,
			Host: []string{"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada",
				"GIT_COMMITTER_EMAIL=ada@example.com", "PATH=/bin"},
			Want: []string{"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada",
				"GIT_COMMITTER_EMAIL=ada@example.com", "PATH=/bin"},
		},
		tcase{
			Name: "off/git-author-kept", Mode: ModeOff,
			Host:    []string{"GIT_AUTHOR_NAME=Ada", "AUTHOR=me"},
			WantHas: []string{"GIT_AUTHOR_NAME=Ada", "AUTHOR=me"},
		},
		tcase{
			Name: "auth-shaped-names-dropped", Mode: ModeOff,
			Host:    []string{"npm_config__auth=dXNlcjpwYXNz", "NODE_AUTH_TOKEN=x", "AUTH=x", "MY_AUTH=x", "SOME_PASSWORD=x", "GPG_PASSPHRASE=x", "SESSION_COOKIE=x", "PATH=/bin"},
			Want:    []string{"PATH=/bin"},
			WantNot: []string{"npm_config__auth", "AUTH", "MY_AUTH"},
		},
		tcase{
			Name: "safe-name-with-credentials-in-value", Mode: ModeWorkspaceWrite,
			Host: []string{"GOPROXY=https://u:p@proxy/", "GOPRIVATE=git.corp", "NODE_OPTIONS=--max-old-space-size=4096", "PATH=/bin"},
			Want: []string{"GOPRIVATE=git.corp", "NODE_OPTIONS=--max-old-space-size=4096", "PATH=/bin"},
		},
		tcase{
			Name: "lowercase-floor-family", Mode: ModeWorkspaceWrite, Extra: []string{"aws_profile", "vault_addr"},
			Host: []string{"aws_profile=prod", "vault_addr=x", "PATH=/bin"},
			Want: []string{"PATH=/bin"},
		},
		tcase{
			Name: "lc-secret-dropped", Mode: ModeWorkspaceWrite,
			Host: []string{"LC_TIME=C", "LC_API_KEY=x", "PATH=/bin"},
			Want: []string{"LC_TIME=C", "PATH=/bin"},
		},
		tcase{
			Name: "malformed-entries-skipped", Mode: ModeOff,
			Host: []string{"NOEQUALS", "=emptyname", "PATH=/bin"},
			Want: []string{"PATH=/bin"},
		},
	)
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			host := slices.Clone(tt.Host)
			got := EnvFloor(tt.Host, tt.Extra, tt.Mode, tt.Overrides, tt.Roots)
			if !slices.Equal(host, tt.Host) {
				t.Error("EnvFloor modified its host argument")
			}
			if tt.Want != nil && !slices.Equal(got, tt.Want) {
				t.Errorf("EnvFloor =\n  %q\nwant\n  %q", got, tt.Want)
			}
			for _, w := range tt.WantHas {
				if !slices.Contains(got, w) {
					t.Errorf("EnvFloor lacks %s: %q", w, got)
				}
			}
			names := envNames(got)
			for _, n := range tt.WantNot {
				if slices.Contains(names, n) {
					t.Errorf("EnvFloor kept %s: %q", n, got)
				}
			}
			// Every name appears once, and every override is present as given.
			seen := map[string]bool{}
			for _, n := range names {
				if seen[n] {
					t.Errorf("%s appears twice in %q", n, got)
				}
				seen[n] = true
			}
			for k, v := range tt.Overrides {
				if !slices.Contains(got, k+"="+v) {
					t.Errorf("override %s=%s missing from %q", k, v, got)
				}
			}
			if tt.Mode != ModeOff {
				for _, n := range append(slices.Clone(envSecretNames), envFloorNames...) {
					if slices.Contains(names, n) {
						t.Errorf("sandboxed EnvFloor kept %s", n)
					}
				}
			}
		})
	}
}

func TestCacheEnv(t *testing.T) {
	const scratch = "/scratch/evener-mcp-1"
	const ambient = "/home/u/go"
	wantKeys := []string{"CARGO_HOME", "GOCACHE", "GOMODCACHE", "GOPATH", "npm_config_cache"}
	tests := []struct {
		Mode       Mode
		Ambient    string
		WantGOPATH string
	}{
		{ModeWorkspaceWrite, ambient, scratch + "/cache/gopath:" + ambient},
		{ModeWorkspaceWrite, "", scratch + "/cache/gopath"},
		{ModeRestricted, ambient, scratch + "/cache/gopath"},
		{ModeReadOnly, ambient, scratch + "/cache/gopath"},
	}
	for _, tt := range tests {
		t.Run(string(tt.Mode)+"/ambient="+tt.Ambient, func(t *testing.T) {
			got := CacheEnv(scratch, tt.Mode, tt.Ambient)
			var keys []string
			for k := range got {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("CacheEnv keys = %v, want %v", keys, wantKeys)
			}
			for k, v := range got {
				first := filepath.SplitList(v)[0]
				if !filepath.IsAbs(first) || !Within(first, scratch) || first == scratch {
					t.Errorf("%s=%s does not point under the scratch %s", k, v, scratch)
				}
				if k != "GOPATH" && len(filepath.SplitList(v)) != 1 {
					t.Errorf("%s=%s is a list", k, v)
				}
			}
			if got["GOPATH"] != tt.WantGOPATH {
				t.Errorf("GOPATH = %q, want %q", got["GOPATH"], tt.WantGOPATH)
			}
			// Go records sumdb tree heads under the first GOPATH entry: it
			// must be the scratch one, so a cold download can write it.
			if first := filepath.SplitList(got["GOPATH"])[0]; !Within(first, scratch) {
				t.Errorf("first GOPATH entry %s is not in the scratch", first)
			}
			// Distinct directories: no two caches share one.
			seen := map[string]string{}
			for k, v := range got {
				if k == "GOPATH" {
					continue
				}
				if o, dup := seen[v]; dup {
					t.Errorf("%s and %s share %s", k, o, v)
				}
				seen[v] = k
			}
		})
	}
}

func TestCacheEnvThroughEnvFloor(t *testing.T) {
	// As the launcher uses them: the cache redirects are overrides, so the
	// host's own cache variables never appear beside them.
	host := []string{"PATH=/bin", "HOME=/home/u", "GOPATH=/home/u/go", "GOCACHE=/home/u/.cache/go-build",
		"GOMODCACHE=/home/u/go/pkg/mod", "CARGO_HOME=/home/u/.cargo", "npm_config_cache=/home/u/.npm"}
	over := CacheEnv("/scratch/s", ModeWorkspaceWrite, "/home/u/go")
	over["TMPDIR"] = "/scratch/s"
	got := EnvFloor(host, nil, ModeWorkspaceWrite, over, []string{"/work/repo"})
	want := []string{"PATH=/bin", "HOME=/home/u",
		"CARGO_HOME=/scratch/s/cache/cargo", "GOCACHE=/scratch/s/cache/go-build",
		"GOMODCACHE=/scratch/s/cache/gopath/pkg/mod", "GOPATH=/scratch/s/cache/gopath:/home/u/go",
		"TMPDIR=/scratch/s", "npm_config_cache=/scratch/s/cache/npm"}
	if !slices.Equal(got, want) {
		t.Errorf("EnvFloor =\n  %q\nwant\n  %q", got, want)
	}
}
