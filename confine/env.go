package confine

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// safeEnvNames are the variables passed to spawned processes: a known-safe
// set, not a blacklist (scrubbing by name misses github_token,
// DATABASE_URL=postgres://u:p@h, SENTRY_DSN and the rest).
var safeEnvNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM",
	"TZ", "EDITOR", "VISUAL", "PAGER", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "COLUMNS", "LINES",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_DATA_DIRS", "XDG_CONFIG_DIRS",
	"GOROOT", "GOPATH", "GOFLAGS", "GOPROXY", "GOPRIVATE", "GONOSUMDB", "GONOPROXY", "GOSUMDB",
	"GOTOOLCHAIN", "GOENV", "GOARCH", "GOOS", "GOAMD64", "CGO_ENABLED", "GOEXPERIMENT",
	"CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "RUSTFLAGS", "CARGO_TARGET_DIR",
	"NVM_DIR", "NVM_BIN", "NODE_PATH", "NODE_OPTIONS",
	"PYENV_ROOT", "PYENV_VERSION", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "CONDA_PREFIX",
	"JAVA_HOME", "MAVEN_HOME", "GRADLE_HOME",
	"CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "PKG_CONFIG_PATH", "MAKEFLAGS",
	"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_EDITOR",
	"npm_config_cache", "KUBECONFIG", "DEBIAN_FRONTEND", "CI",
}

// secretName matches variable names that look like they carry a secret even
// when a trusted layer asked for them to pass through. Compiled at first use,
// as the other patterns of this package: the helpers that run inside a
// sandbox link this package, and each start pays its initialisation.
var secretName = lazyRegexp(`(?i)(KEY|SECRET|TOKEN|PASSW|PASSPHRASE|CREDENTIAL|(^|_)AUTH(_|$)|DSN|JWT|SESSION|COOKIE)`)

// droppedFamilies are dropped from every sandbox's environment even if a
// trusted layer lists them (docs/security.md, "What is enforced", "Environment
// floor").
var droppedFamilies = []string{"SSH_AUTH_SOCK", "GNUPGHOME", "DOCKER_HOST", "AWS_", "GOOGLE_", "GCLOUD_", "VAULT_", "AZURE_"}

// userinfoURL matches a URL carrying credentials (scheme://user:pass@host).
var userinfoURL = lazyRegexp(`(?i)[a-z][a-z0-9+.-]*://[^/\s@]*:[^/\s@]*@`)

// EnvFloor derives the environment of a spawned process from the server's
// environment: the known-safe names plus extra (from a trusted layer), minus
// anything secret-looking, with the overrides applied last. Mode off keeps
// the host environment but still drops secret-looking names.
func EnvFloor(host []string, extra []string, mode Mode, overrides map[string]string, writeRoots []string) []string {
	allowed := append(slices.Clone(safeEnvNames), extra...)
	var out []string
	seen := map[string]bool{}
	for i := len(host) - 1; i >= 0; i-- { // last occurrence wins, as in getenv
		k, v, ok := strings.Cut(host[i], "=")
		if !ok || k == "" || seen[k] {
			continue
		}
		seen[k] = true
		if mode != ModeOff && !slices.Contains(allowed, k) && !strings.HasPrefix(k, "LC_") {
			continue
		}
		if dropEnv(k, v) {
			continue
		}
		if k == "KUBECONFIG" && mode != ModeOff && !kubeconfigInside(v, writeRoots) {
			continue
		}
		if _, over := overrides[k]; over {
			continue
		}
		out = append(out, k+"="+v)
	}
	slices.Reverse(out)
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+overrides[k])
	}
	return out
}

func dropEnv(k, v string) bool {
	for _, f := range droppedFamilies {
		if k == f || (strings.HasSuffix(f, "_") && strings.HasPrefix(strings.ToUpper(k), f)) {
			return true
		}
	}
	if secretName().MatchString(k) {
		return true
	}
	return userinfoURL().MatchString(v) || strings.ContainsRune(v, 0)
}

func kubeconfigInside(v string, roots []string) bool {
	for _, p := range filepath.SplitList(v) {
		if !filepath.IsAbs(p) || !underAny(filepath.Clean(p), roots) {
			return false
		}
	}
	return v != ""
}

// CacheEnv returns the session-private cache redirects for strategy
// CachePrivate: every language cache variable points into the scratch.
// ambientGOPATH is kept after the scratch entry in workspace-write so
// GOPATH-mode builds still find what is already there.
func CacheEnv(scratch string, mode Mode, ambientGOPATH string) map[string]string {
	c := filepath.Join(scratch, "cache")
	gopath := filepath.Join(c, "gopath")
	if mode == ModeWorkspaceWrite && ambientGOPATH != "" {
		gopath += string(filepath.ListSeparator) + ambientGOPATH
	}
	return map[string]string{
		"GOCACHE":          filepath.Join(c, "go-build"),
		"GOMODCACHE":       filepath.Join(c, "gopath", "pkg", "mod"),
		"GOPATH":           gopath,
		"npm_config_cache": filepath.Join(c, "npm"),
		"CARGO_HOME":       filepath.Join(c, "cargo"),
	}
}

// lazyRegexp compiles expr at the first call of the function it returns.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
