package confine

import (
	"path/filepath"
	"slices"
)

// cacheDefaults are the language cache locations as the tools themselves
// resolve them from the server's environment: variable -> directory.
func cacheDefaults(env []string, home string) map[string]string {
	get := func(k string) string { return envLookup(env, k) }
	xdgCache := get("XDG_CACHE_HOME")
	if !filepath.IsAbs(xdgCache) {
		xdgCache = filepath.Join(home, ".cache")
	}
	gopath := filepath.SplitList(get("GOPATH"))
	gp := filepath.Join(home, "go")
	if len(gopath) > 0 && filepath.IsAbs(gopath[0]) {
		gp = gopath[0]
	}
	d := map[string]string{
		"GOCACHE":          filepath.Join(xdgCache, "go-build"),
		"GOMODCACHE":       filepath.Join(gp, "pkg", "mod"),
		"npm_config_cache": filepath.Join(home, ".npm"),
		"CARGO_HOME":       filepath.Join(home, ".cargo"),
	}
	for k := range d {
		if v := get(k); filepath.IsAbs(v) {
			d[k] = filepath.Clean(v)
		}
	}
	return d
}

// overlayCacheRoots are the host cache roots workspace-write serves as
// read-real, write-private overlays (docs/security.md, "What is enforced", "Caches"):
// each must exist as a real directory, pass the shared-tree guard, and
// neither hold nor lie inside a persistent write root or the scratch, since
// the discarded upper layer would swallow writes meant to persist.
func overlayCacheRoots(p *Policy, scratch string) []string {
	home := p.Home()
	cands := []string{filepath.Join(home, ".cache")}
	if x := envLookup(p.env, "XDG_CACHE_HOME"); filepath.IsAbs(x) {
		cands = append(cands, filepath.Clean(x))
	}
	for _, k := range []string{"npm_config_cache", "CARGO_HOME", "GOMODCACHE", "GOCACHE"} {
		cands = append(cands, cacheDefaults(p.env, home)[k])
	}
	cands = append(cands, filepath.Join(home, "go", "pkg"))
	if gp := filepath.SplitList(envLookup(p.env, "GOPATH")); len(gp) > 0 && filepath.IsAbs(gp[0]) {
		cands = append(cands, filepath.Join(gp[0], "pkg"))
	}
	persistent := append(p.WriteRoots(), scratch)
	var roots []string
	for _, c := range cands {
		c = filepath.Clean(c)
		if k, _ := lstatKind(c); k != PathDir {
			continue
		}
		if sharedTreeGuard(c, home, p.Workdir(), tempRoots(p.env)) != nil {
			continue
		}
		if underAny(c, persistent) || slices.ContainsFunc(persistent, func(w string) bool { return Within(w, c) }) {
			continue
		}
		if underAny(c, roots) {
			continue // served by an outer overlay already
		}
		roots = slices.DeleteFunc(roots, func(r string) bool { return Within(r, c) })
		roots = append(roots, c)
	}
	slices.Sort(roots)
	return roots
}

// overlayCacheEnv redirects into the scratch every cache variable whose
// directory no overlay serves, so no cache write reaches a persistent
// location and none fails for want of a writable directory.
func overlayCacheEnv(p *Policy, scratch string, served []string) map[string]string {
	private := CacheEnv(scratch, p.Mode(), envLookup(p.env, "GOPATH"))
	out := map[string]string{}
	for k, dir := range cacheDefaults(p.env, p.Home()) {
		if !underAny(dir, served) {
			out[k] = private[k]
		}
	}
	if _, redirected := out["GOMODCACHE"]; redirected {
		out["GOPATH"] = private["GOPATH"]
	}
	return out
}
