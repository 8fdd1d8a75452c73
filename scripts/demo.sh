#!/usr/bin/env bash
# Quick start, command 1: set everything up and run the demo on the embedded default
# (SQLite catalog, local warehouse, SQL oracle). Safe to run again; each run starts a fresh demo home.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ensure_venv "postgres"
export AIRFLOW_TXN_HOME="${AIRFLOW_TXN_HOME:-$REPO/.airflow_txn_demo}"
rm -rf "$AIRFLOW_TXN_HOME"
log "running the demo in $AIRFLOW_TXN_HOME"
exec "$VENV/bin/python" -m airflow_txn.demo "$@"
