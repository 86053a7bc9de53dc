#!/usr/bin/env bash
# Quick start, command two: the whole test suite. Unit tests, the seccomp
# filter against the real kernel, and integration/ (the built binary driven
# against real bubblewrap, as root and as an unprivileged user it creates
# when run as root); run as root, the unit packages then run again as that
# user. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
go vet ./...
GOOS=darwin go build ./... # the packages build for macOS (Seatbelt backend; its live suite needs a Mac)
GOOS=darwin go vet ./...
# The unit packages first, then integration/ on its own: on a 2-CPU
# machine the two side by side starve integration's load tests, and a unit
# test's spawns would meet the host sockets integration's clients (Claude
# Code's) create and remove (retried once: docs/residuals.md).
go test -count=1 -timeout 20m $(go list ./... | grep -v '/integration$')
go test -count=1 -timeout 40m ./integration/

# Run as root (CI), the unit packages run a second time as an unprivileged
# user: what a boundary test sees depends on who runs it (bwrap masks only
# what its user could reach, RLIMIT_NPROC binds only non-root). The test
# binaries are built here (the module cache may be unreadable to that user)
# and run from a copy of the tree the user can read.
if [ "$(id -u)" -eq 0 ]; then
  user=evener-test
  id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
  tree=$(mktemp -d /var/tmp/evener-user-XXXXXX)
  trap 'rm -rf "$tree"' EXIT
  chmod 755 "$tree"
  git ls-files -z | xargs -0 cp --parents -t "$tree"
  for pkg in config confine egress session memory hooks server terminal metrics tools tools/internal/search tools/internal/textedit tools/internal/termsafe; do
    bin="$tree/$(echo "$pkg" | tr / _).test"
    go test -c -o "$bin" "./$pkg"
    chmod 755 "$bin"
    echo "== $pkg as $user"
    (cd "$tree/$pkg" && runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$(getent passwd "$user" | cut -d: -f6)" TMPDIR=/var/tmp LANG=C.UTF-8 "$bin" -test.count=1 -test.timeout=10m)
  done
fi
