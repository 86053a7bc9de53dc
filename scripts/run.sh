#!/usr/bin/env bash
# Quick start, command one: install bubblewrap if missing, build
# bin/evener-mcp, and run it (default: `probe`, which prints what this host
# enforces). Any arguments are passed to evener-mcp instead, e.g.
#   scripts/run.sh exec --sandbox workspace-write -- make test
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
mkdir -p bin
CGO_ENABLED=0 go build -buildvcs=auto -trimpath -o bin/ ./cmd/evener-mcp ./cmd/evener-mcp-server ./cmd/evener-mcp-inside
[ $# -gt 0 ] || set -- probe
exec bin/evener-mcp "$@"
