#!/usr/bin/env bash
# Side-by-side startup cost: `evener-mcp exec --sandbox workspace-write
# --sandbox-net off -- true` against bare bubblewrap, alternated in one run,
# as root and (when run as root) as an unprivileged user. Prints the median
# of each and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
go test ./integration/ -run '^$' -bench 'ExecVsBwrap' -benchtime "${1:-300}x" -count 1
