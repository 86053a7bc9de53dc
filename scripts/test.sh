#!/usr/bin/env bash
# Quick start, command two: the whole test suite. Unit tests, the seccomp
# filter against the real kernel, and integration/ (the built binary driven
# against real bubblewrap, as root and as an unprivileged user it creates
# when run as root). .ci/run calls exactly this.
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
go test -count=1 -timeout 20m ./...
