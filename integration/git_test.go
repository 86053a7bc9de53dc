//go:build linux

package integration

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const gitID = "-c user.name=Sandboxed -c user.email=s@example.test -c init.defaultBranch=main"

// hostGit runs git on the host (as the test, before the fixture is handed
// over), with no user configuration.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append(strings.Fields(gitID+" -c protocol.file.allow=always -c safe.directory=*"), args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

func initRepo(t *testing.T, dir string) {
	t.Helper()
	mustMkdir(t, dir)
	hostGit(t, dir, "init", "-q")
	writeFile(t, filepath.Join(dir, "file.txt"), "one\n")
	hostGit(t, dir, "add", ".")
	hostGit(t, dir, "commit", "-qm", "first")
}

func digest(t *testing.T, paths ...string) string {
	t.Helper()
	h := sha256.New()
	for _, p := range paths {
		filepath.Walk(p, func(path string, info os.FileInfo, err error) error {
			if err != nil {
				fmt.Fprintf(h, "%s:missing\n", path)
				return nil
			}
			fmt.Fprintf(h, "%s:%v:%d\n", path, info.Mode(), info.Size())
			if info.Mode().IsRegular() {
				b, _ := os.ReadFile(path)
				h.Write(b)
			}
			return nil
		})
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// attacks are the ways a command could leave code for the user's next git
// command to run; every one must fail and leave the surfaces as they were.
var gitAttacks = []string{
	`echo '[core]' >> .git/config`,
	`git config --local core.hooksPath /tmp`,
	`git config core.fsmonitor 'touch /tmp/pwned'`,
	`printf '#!/bin/sh\ntouch /tmp/pwned\n' > .git/hooks/pre-commit`,
	`mv .git/hooks .git/hooks-old`,
	`rm -rf .git/hooks`,
	`mv .git/config .git/config-old`,
	`mv .git .git-old`,
	`echo /elsewhere > .git/commondir`,
	`echo gitdir: /elsewhere > .git/gitdir`,
	`echo '[core]' > .git/config.worktree`,
}

// TestGitProtection: commits work, config and hooks cannot be touched, and
// .git cannot be renamed out of the way, in both writable modes.
func TestGitProtection(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range []string{"workspace-write", "restricted"} {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				initRepo(t, e.work)
				surfaces := []string{filepath.Join(e.work, ".git", "config"), filepath.Join(e.work, ".git", "hooks")}
				before := digest(t, surfaces...)
				var script strings.Builder
				script.WriteString("set -u\n")
				for i, a := range gitAttacks {
					fmt.Fprintf(&script, "if ( %s ) 2>/dev/null; then echo 'attack%d:succeeded'; fi\n", a, i)
				}
				fmt.Fprintf(&script, "echo two >> file.txt && git %s commit -qam second && echo COMMITTED\n", gitID)
				script.WriteString("git pack-refs --all && echo PACKED\n")
				script.WriteString("mkdir -p .git/rr-cache && echo RRCACHE\n")
				script.WriteString("git log --oneline | wc -l\n")
				r := e.sh(t, mode, script.String())
				for i, a := range gitAttacks {
					if strings.Contains(r.stdout, fmt.Sprintf("attack%d:succeeded", i)) {
						t.Errorf("attack succeeded: %s", a)
					}
				}
				for _, w := range []string{"COMMITTED", "PACKED", "RRCACHE"} {
					if !strings.Contains(r.stdout, w) {
						t.Errorf("%s missing: git's own writable state is not writable\n%s", w, r)
					}
				}
				if after := digest(t, surfaces...); after != before {
					t.Errorf("config or hooks changed on the host")
				}
				if log := hostGit(t, e.work, "log", "--oneline"); strings.Count(log, "\n") != 2 {
					t.Errorf("the sandboxed commit is not in the host repository:\n%s", log)
				}
				if b, err := os.ReadFile(filepath.Join(e.work, ".git", "commondir")); err != nil || string(b) != ".\n" {
					t.Errorf("absent commondir was not pre-created holding \".\": %q %v", b, err)
				}
				if _, err := os.Stat("/tmp/pwned"); err == nil {
					t.Errorf("a planted command ran")
				}
			})
		}
	})
}

// TestGitProbeCanFail shows the attacks do work without the sandbox, so the
// protection test cannot pass for the wrong reason.
func TestGitProbeCanFail(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	initRepo(t, e.work)
	r := e.sh(t, "off", fmt.Sprintf("if ( %s ) 2>/dev/null; then echo WORKS; fi", gitAttacks[0]))
	if !strings.Contains(r.stdout, "WORKS") {
		t.Fatalf("the config attack fails even unsandboxed: the probe is broken\n%s", r)
	}
}

// TestGitLinkedWorktree: the worktree is a linked worktree of a repository
// elsewhere. Commits work; the main repository's config, hooks, its other
// files and the worktree's admin directory cannot be redirected.
func TestGitLinkedWorktree(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		main := filepath.Join(e.root, "main")
		initRepo(t, main)
		if err := os.Remove(e.work + "/README"); err != nil {
			t.Fatal(err)
		}
		os.Remove(e.work)
		hostGit(t, main, "worktree", "add", "-q", "-b", "side", e.work)
		admin := filepath.Join(main, ".git", "worktrees", filepath.Base(e.work))
		before := digest(t, filepath.Join(main, ".git", "config"), filepath.Join(main, ".git", "hooks"), filepath.Join(admin, "commondir"), filepath.Join(admin, "gitdir"), filepath.Join(e.work, ".git"))
		attacks := []string{
			"echo '[core]' >> " + q(main, ".git", "config"),
			"touch " + q(main, ".git", "hooks", "post-checkout"),
			"echo /elsewhere > " + q(admin, "commondir"),
			"mv " + q(admin) + " " + q(admin+"-old"),
			"mv " + q(main, ".git", "worktrees") + " " + q(main, ".git", "wt-old"),
			"echo 'gitdir: /elsewhere' > .git",
			"echo changed > " + q(main, "file.txt"),
		}
		for _, mode := range []string{"workspace-write", "restricted"} {
			var script strings.Builder
			for i, a := range attacks {
				fmt.Fprintf(&script, "if ( %s ) 2>/dev/null; then echo 'attack%d:succeeded'; fi\n", a, i)
			}
			fmt.Fprintf(&script, "echo more >> file.txt && git %s commit -qam side-commit && echo COMMITTED\n", gitID)
			r := e.sh(t, mode, script.String())
			for i, a := range attacks {
				if strings.Contains(r.stdout, fmt.Sprintf("attack%d:succeeded", i)) {
					t.Errorf("%s: attack succeeded: %s", mode, a)
				}
			}
			if !strings.Contains(r.stdout, "COMMITTED") {
				t.Errorf("%s: commit in a linked worktree failed\n%s", mode, r)
			}
		}
		after := digest(t, filepath.Join(main, ".git", "config"), filepath.Join(main, ".git", "hooks"), filepath.Join(admin, "commondir"), filepath.Join(admin, "gitdir"), filepath.Join(e.work, ".git"))
		if before != after {
			t.Errorf("protected surfaces of the linked worktree changed on the host")
		}
	})
}

// TestGitSubmodule: a submodule's config and hooks under .git/modules are
// protected like the superproject's.
func TestGitSubmodule(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		lib := filepath.Join(e.root, "lib")
		initRepo(t, lib)
		initRepo(t, e.work)
		hostGit(t, e.work, "submodule", "add", "-q", lib, "lib")
		hostGit(t, e.work, "commit", "-qm", "add lib")
		mod := filepath.Join(e.work, ".git", "modules", "lib")
		before := digest(t, filepath.Join(mod, "config"), filepath.Join(mod, "hooks"))
		attacks := []string{
			"echo '[core]' >> .git/modules/lib/config",
			"touch .git/modules/lib/hooks/pre-commit",
			"mv .git/modules/lib .git/modules/lib-old",
			"mv .git/modules .git/modules-old",
			"cd lib && git config core.fsmonitor 'touch /tmp/pwned'",
		}
		var script strings.Builder
		for i, a := range attacks {
			fmt.Fprintf(&script, "if ( %s ) 2>/dev/null; then echo 'attack%d:succeeded'; fi\n", a, i)
		}
		fmt.Fprintf(&script, "cd lib && echo x >> file.txt && git %s commit -qam in-sub && echo COMMITTED\n", gitID)
		r := e.sh(t, "workspace-write", script.String())
		for i, a := range attacks {
			if strings.Contains(r.stdout, fmt.Sprintf("attack%d:succeeded", i)) {
				t.Errorf("attack succeeded: %s", a)
			}
		}
		if !strings.Contains(r.stdout, "COMMITTED") {
			t.Errorf("commit inside the submodule failed\n%s", r)
		}
		if digest(t, filepath.Join(mod, "config"), filepath.Join(mod, "hooks")) != before {
			t.Errorf("submodule config or hooks changed")
		}
	})
}

// TestGitNoRepository: with no repository at or above the worktree, a
// sandboxed `git init` cannot plant a .git (and hooks) for the user's own
// git to run later.
func TestGitNoRepository(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		r := e.sh(t, "workspace-write", "git init -q 2>&1; mkdir -p .git/hooks 2>&1; echo x > .git/HEAD 2>&1; echo DONE")
		if !strings.Contains(r.stdout, "DONE") {
			t.Fatal(r)
		}
		if _, err := os.Stat(filepath.Join(e.work, ".git", "HEAD")); err == nil {
			t.Errorf("a repository was planted in the worktree:\n%s", r)
		}
		ents, _ := os.ReadDir(filepath.Join(e.work, ".git"))
		if len(ents) != 0 {
			t.Errorf(".git holds %d entries after the run", len(ents))
		}
	})
}

// TestGitGlobalConfigRestricted: restricted mode reads the two global git
// config files (file-exact, read-only) and nothing else of HOME.
func TestGitGlobalConfigRestricted(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		initRepo(t, e.work)
		writeFile(t, filepath.Join(e.home, ".gitconfig"), "[user]\n\tname = From Home\n\temail = h@example.test\n")
		writeFile(t, filepath.Join(e.home, ".config", "git", "config"), "[alias]\n\tst = status\n")
		writeFile(t, filepath.Join(e.home, ".git-credentials"), "https://u:SECRET-cred@example.test\n")
		writeFile(t, filepath.Join(e.home, ".config", "git", "other"), "SECRET-neighbour\n")
		script := `git config --global user.name; git st >/dev/null && echo ALIAS_OK;
git config --global user.name Evil 2>/dev/null && echo WROTE_GLOBAL;
cat "$HOME/.git-credentials" "$HOME/.config/git/other" "$HOME/notes.txt" 2>/dev/null;
ls -a "$HOME" 2>/dev/null | grep -v -e '^\.$' -e '^\.\.$' -e '^\.gitconfig$' -e '^\.config$';
echo x >> file.txt && git commit -qam via-global && echo COMMITTED`
		r := e.sh(t, "restricted", script)
		if !strings.Contains(r.stdout, "From Home") || !strings.Contains(r.stdout, "ALIAS_OK") || !strings.Contains(r.stdout, "COMMITTED") {
			t.Errorf("global git config not honoured in restricted:\n%s", r)
		}
		for _, bad := range []string{"WROTE_GLOBAL", "SECRET-", "home file", "notes.txt"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("restricted exposed %q:\n%s", bad, r)
			}
		}
		// A directory where ~/.gitconfig should be grants nothing and
		// breaks nothing.
		os.Remove(filepath.Join(e.home, ".gitconfig"))
		writeFile(t, filepath.Join(e.home, ".gitconfig", "inner"), "SECRET-inner\n")
		r = e.sh(t, "restricted", `cat "$HOME/.gitconfig/inner" 2>/dev/null; git status >/dev/null && echo STATUS_OK`)
		if strings.Contains(r.stdout, "SECRET-inner") || !strings.Contains(r.stdout, "STATUS_OK") {
			t.Errorf("a .gitconfig directory: %s", r)
		}
	})
}

// TestPlantedSymlinksBetweenCalls: one call leaves symlinks where the next
// call's mount plan looks (git metadata directories it would bind or pin);
// the next call must refuse rather than bind through them, and nothing the
// links point at is exposed.
func TestPlantedSymlinksBetweenCalls(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, plant := range []string{".git/worktrees", ".git/modules", ".git/worktrees/evil"} {
			t.Run(strings.ReplaceAll(plant, "/", "_"), func(t *testing.T) {
				e := newEnv(t, id)
				initRepo(t, e.work)
				seedSecrets(t, e)
				first := e.sh(t, "workspace-write", fmt.Sprintf("mkdir -p %s && ln -s %s %s && echo PLANTED", q(e.work, filepath.Dir(plant)), q(e.home, ".ssh"), q(e.work, plant)))
				if !strings.Contains(first.stdout, "PLANTED") {
					t.Fatalf("could not plant the link (the case would pass for the wrong reason):\n%s", first)
				}
				second := e.sh(t, "workspace-write", "cat "+q(e.home, ".ssh", "id_rsa")+" "+q(e.work, plant, "id_rsa")+" 2>&1; echo DONE")
				if strings.Contains(second.stdout, secretOf(".ssh/id_rsa")) {
					t.Fatalf("the planted link exposed a secret:\n%s", second)
				}
				if second.code != 125 || !strings.Contains(second.stderr, "symlink") {
					t.Errorf("the next call must refuse, naming the symlink:\n%s", second)
				}
				if _, err := os.Stat(filepath.Join(e.home, ".ssh", "id_rsa")); err != nil {
					t.Errorf("the secret was touched: %v", err)
				}
			})
		}
	})
}
