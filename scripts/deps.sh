#!/usr/bin/env bash
# Installs what evener-mcp and its tests need on Debian/Ubuntu: bubblewrap
# (the sandbox), and the tools the integration tests drive (git, perl,
# util-linux's unshare, setpriv and nsenter, python3 for the terminal tests' REPL and servers,
# OpenSSH's client and server for the SSH agent's tests, node and npm for the TypeScript client). Go itself must already be installed.
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v git >/dev/null 2>&1 || need+=(git)
command -v perl >/dev/null 2>&1 || need+=(perl)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v ipcmk >/dev/null 2>&1 || need+=(util-linux)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
[ -x /usr/bin/python3 ] || need+=(python3)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v wget >/dev/null 2>&1 || need+=(wget)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ssh-agent >/dev/null 2>&1 || need+=(openssh-client)
# The brokered SSH agent's tests (integration/sshagent_test.go) start their
# own sshd on loopback; nothing is started at install.
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
# The integration tests drive the server with the official MCP TypeScript
# SDK client (integration/tsclient), installed with npm by the tests.
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${need[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
