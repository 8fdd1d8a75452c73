#!/usr/bin/env bash
# Quick start, command 3 (after scripts/demo.sh): Airflow's UI and API server on the demo's home, with
# the airflow_txn transactions page. Open http://127.0.0.1:8080, sign in as admin / admin, click
# "Transactions" in the nav, or open a run of multi_table_backfill and its "Transaction" tab.
# Ctrl+C stops it. Extra arguments go to the server command, e.g. --port 8081 or
# --user viewer:viewer:secret (NAME:ROLE:PASSWORD; roles viewer, user, op, admin).
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
export AIRFLOW_TXN_HOME="${AIRFLOW_TXN_HOME:-$REPO/.airflow_txn_demo}"
ensure_venv "postgres,spark,airflow"
[ -d "$AIRFLOW_TXN_HOME" ] || log "no demo in $AIRFLOW_TXN_HOME yet: run scripts/demo.sh first (the page will be empty)"
log "starting the Airflow API server on the demo home $AIRFLOW_TXN_HOME"
cd "$REPO"  # the checkout's `demo` package
exec "$VENV/bin/python" -m demo.ui_server --home "$AIRFLOW_TXN_HOME" --dags "$REPO/dags" "$@"
