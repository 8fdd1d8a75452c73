#!/usr/bin/env bash
# Make sure a standalone ZooKeeper answers on 127.0.0.1 and print its oracle spec (the last line).
# Installs Debian's `zookeeper` package if it is missing (apt-get update once, then install), runs the
# server from DIR (config, data, logs, pid file) and reuses it when it is already up. Loopback only.
#   bash scripts/start_zookeeper.sh [DIR]          -> zookeeper://127.0.0.1:PORT/airflow_txn
#   bash scripts/start_zookeeper.sh --stop [DIR]   stops it (by its pid)
# The test suite does not need this: its fixtures start and stop their own servers.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${AIRFLOW_TXN_VENV:-$REPO/.venv}/bin/python"
[ -x "$PY" ] || PY="$(command -v python3)"
command -v java >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }
action=start
if [ "${1:-}" = "--stop" ]; then action=stop; shift; fi
DIR="${1:-${AIRFLOW_TXN_HOME:-$HOME/.airflow_txn}/zookeeper}"
cd "$REPO" && PYTHONPATH="$REPO" "$PY" -m tests.harness.zookeeper "$action" "$DIR"
