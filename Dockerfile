# evener-mcp `serve` in a container (docs/deploy.md says how to run it: the
# sandbox needs user namespaces, so the runtime's default seccomp and
# AppArmor profiles must let bubblewrap create them).
#
#   docker build -t evener-mcp .
#
# Build stage: static binaries (CGO_ENABLED=0: the final image needs no C
# library of the build's).
ARG GO_IMAGE=golang:1.26-bookworm
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${GO_IMAGE} AS build
# A module proxy of the builder's own, when it has one.
ARG GOPROXY
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/ ./cmd/evener-mcp ./cmd/evener-mcp-server ./cmd/evener-mcp-inside

# Final stage: bubblewrap, a non-root user, the three binaries side by side
# (the server starts `evener-mcp-inside` inside each sandbox as the egress
# relay and the session sandbox's slots). /run/user exists so that the sandbox can mask it over a
# read-only root filesystem (bubblewrap cannot create a mount point there).
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
 && useradd --uid 10001 --user-group --create-home --home-dir /home/evener --shell /bin/bash evener \
 && mkdir -p /workspace/project /run/user \
 && chown evener:evener /workspace/project
COPY --from=build /out/evener-mcp /out/evener-mcp-server /out/evener-mcp-inside /usr/local/bin/
USER 10001:10001
ENV HOME=/home/evener
# The worktree the agent works in: mount the project here (two components
# deep at least: the server refuses a worktree such as /workspace that sits
# directly under /).
WORKDIR /workspace/project
# 8787: MCP at /mcp and /healthz; 9090: Prometheus metrics at /metrics.
EXPOSE 8787 9090
# Off loopback serve requires a bearer token: set EVENER_MCP_TOKEN or pass
# --token-file (a mounted secret). SIGTERM drains (--drain-timeout): give
# the container a stop timeout above it (docker stop -t 30).
# --sandbox workspace-write: where the runtime's flags do not let bubblewrap
# work, the server refuses to start instead of running commands unconfined.
STOPSIGNAL SIGTERM
ENTRYPOINT ["evener-mcp-server", "serve"]
CMD ["--listen", "0.0.0.0:8787", "--metrics-listen", "0.0.0.0:9090", "--metrics-allow-remote", "--drain-timeout", "20s", "--sandbox", "workspace-write"]
