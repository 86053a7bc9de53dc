#!/usr/bin/env bash
# Runs the image built from the repository's Dockerfile the way
# docs/deploy.md says, and checks it for real: `probe` reports bubblewrap
# enforcing, and a `shell` call over MCP runs in the sandbox (reads the
# mounted project, writes it, cannot write /etc or the home, has no
# direct network, does not see the bearer token), a denylisted read is refused, /metrics counts the calls,
# and SIGTERM drains and exits 0.
#
#   deploy/container-check.sh IMAGE [RUNTIME]      (RUNTIME: podman or docker)
#
# Extra runtime flags (a host's ulimits, say) go in EVENER_RUN_EXTRA; mount options
# for the project volume (":U" under --userns=auto) in VOLUME_OPTS.
set -euo pipefail
image=${1:?usage: container-check.sh IMAGE [podman|docker]}
rt=${2:-podman}
name=evener-check-$$
work=$(mktemp -d /var/tmp/evener-check-XXXXXX)
trap '$rt rm -f $name >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir "$work/proj"
echo "hello from the project" >"$work/proj/README"
chown -R 10001:10001 "$work/proj"
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
mcp_port=${MCP_PORT:-18787}
metrics_port=${METRICS_PORT:-19090}

# The flags docs/deploy.md documents.
flags=(--security-opt seccomp=unconfined --cap-drop ALL --security-opt no-new-privileges
	--read-only --tmpfs /tmp)
if [ "$rt" = podman ]; then
	flags+=(--security-opt unmask=/proc/* --tmpfs /home/evener:rw,U,mode=0700)
else
	flags+=(--security-opt systempaths=unconfined --security-opt apparmor=unconfined
		--tmpfs /home/evener:rw,uid=10001,gid=10001,mode=0700)
fi
# shellcheck disable=SC2206
extra=(${EVENER_RUN_EXTRA:-})

echo "== probe"
$rt run --rm "${extra[@]}" "${flags[@]}" --entrypoint evener-mcp "$image" probe 2>&1 | tee "$work/probe"
grep -q '^sandbox: bwrap enforcing workspace-write' "$work/probe"

echo "== serve"
$rt run -d --name $name "${extra[@]}" "${flags[@]}" -e EVENER_MCP_TOKEN="$token" \
	-p 127.0.0.1:$mcp_port:8787 -p 127.0.0.1:$metrics_port:9090 \
	-v "$work/proj":/workspace/project${VOLUME_OPTS:-} "$image" >/dev/null
for _ in $(seq 50); do
	curl -sf -m 2 http://127.0.0.1:$mcp_port/healthz >/dev/null && break
	sleep 0.2
done
curl -sf -m 2 http://127.0.0.1:$mcp_port/healthz
url=http://127.0.0.1:$mcp_port/mcp
hdr=(-H "Authorization: Bearer $token" -H "Content-Type: application/json" -H "Accept: application/json, text/event-stream")
curl -sf -m 10 -D "$work/h" "${hdr[@]}" $url -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"check","version":"1"}}}' >/dev/null
sid=$(grep -i '^mcp-session-id:' "$work/h" | awk '{print $2}' | tr -d '\r')
hdr+=(-H "Mcp-Session-Id: $sid" -H "Mcp-Protocol-Version: 2025-06-18")
curl -sf -m 10 "${hdr[@]}" $url -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
call() { curl -sf -m 60 "${hdr[@]}" $url -d "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":$2}"; }

echo "== shell"
call 2 '{"name":"shell","arguments":{"command":"cat README; echo uid=$(id -u); echo host=$(hostname); echo pid1=$(cat /proc/1/comm); touch made-in-sandbox && echo wrote-project; touch /etc/x 2>/dev/null || echo etc-refused; touch /home/evener/x 2>/dev/null || echo home-not-writable; (exec 3<>/dev/tcp/1.1.1.1/80) 2>/dev/null || echo no-direct-network; test -z \"$EVENER_MCP_TOKEN\" && echo token-not-visible"}}' >"$work/shell"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"]["structuredContent"]["output"], end="")' "$work/shell" | tee "$work/out"
for want in "hello from the project" "host=evener-sandbox" wrote-project etc-refused home-not-writable no-direct-network token-not-visible; do
	grep -q "$want" "$work/out" || { echo "MISSING: $want"; exit 1; }
done
test -e "$work/proj/made-in-sandbox"

echo "== denied read"
call 3 '{"name":"read_file","arguments":{"path":"/home/evener/.ssh/id_rsa"}}' | grep -o '"rule":"[a-z-]*"'

echo "== metrics"
curl -sf -m 5 http://127.0.0.1:$metrics_port/metrics | grep -E '^evener_mcp_(tool_calls_total\{outcome="(ok|denied)",tool="(shell|read_file)"\}|sandbox_start_seconds_(count|sum)|sessions_live)'

echo "== SIGTERM drain"
call 4 '{"name":"shell","arguments":{"command":"sleep 2; echo survived"}}' >"$work/slow" &
sleep 1
start=$(date +%s)
$rt kill --signal TERM $name >/dev/null
wait
grep -q survived "$work/slow" && echo "the call in flight finished"
code=$($rt wait $name)
echo "exited $code after $(( $(date +%s) - start )) s"
test "$code" = 0
echo "ALL CHECKS PASSED"
