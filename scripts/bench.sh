#!/usr/bin/env bash
# Every speed target, measured side by side in one run (never in timed unit
# tests: these machines are noisy). Installs what the comparisons need:
# ripgrep (apt) and the reference filesystem MCP server (npm, into
# ${XDG_CACHE_HOME:-~/.cache}/evener-mcp-bench). Pass a count to change the
# repetitions of the exec/shell comparisons (default 300).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
n="${1:-300}"
if ! command -v rg >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get install -y -qq ripgrep >/dev/null
fi
ref_dir="${XDG_CACHE_HOME:-$HOME/.cache}/evener-mcp-bench"
ref="$ref_dir/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
if [ ! -f "$ref" ] && command -v npm >/dev/null 2>&1; then
  mkdir -p "$ref_dir"
  (cd "$ref_dir" && npm install --silent --no-audit --no-fund @modelcontextprotocol/server-filesystem >/dev/null)
fi
[ -f "$ref" ] && export EVENER_BENCH_REFERENCE="$ref"
go test ./integration/ -run '^$' -count 1 -bench 'ExecVsBwrap|ShellVsBwrap|ShellSessionVsBwrap' -benchtime "${n}x"
go test ./integration/ -run '^$' -count 1 -bench 'ReadFileVsReference' -benchtime 3x
go test ./integration/ -run '^$' -count 1 -bench 'GrepVsRipgrep' -benchtime 10x
go test ./integration/ -run '^$' -count 1 -bench 'GatewayVsDirect' -benchtime 3x
go test ./egress/ -run '^$' -count 1 -bench 'ConnectThroughput' -benchtime 4x
# Streamable HTTP: 100 concurrent sessions x 40 calls (throughput, leak
# counts) and the server's memory per idle session.
go test ./integration/ -run 'TestHTTPLoad' -count 1 -v 2>/dev/null | grep -E 'calls/s|per idle session|^(ok|FAIL|---)' || true
