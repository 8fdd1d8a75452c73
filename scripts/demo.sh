#!/usr/bin/env bash
# Quick start, command 1: set everything up and run the demo on the embedded default: the example
# DAGs (dags/) on real Airflow (SQLite metadata database, dag.test()), real Spark (local) and the
# embedded warehouse (SQLite catalog, local files, SQL oracle): a backfill that commits three tables
# at one CSN after a retried task, a backfill that fails and leaves every table unchanged, a backfill
# whose integrity check fails before the commit (write-audit-publish) and leaves every table unchanged,
# the reader DAG at the committed snapshot, and a summary. Safe to run again; each run starts a fresh demo home.
#   bash scripts/demo.sh --core    the core-only demo (plain Python and pyarrow: no Airflow, no Spark)
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
export AIRFLOW_TXN_HOME="${AIRFLOW_TXN_HOME:-$REPO/.airflow_txn_demo}"
if [ "${1:-}" = "--core" ]; then
    shift
    ensure_venv "postgres"
    rm -rf "$AIRFLOW_TXN_HOME"
    log "running the core demo in $AIRFLOW_TXN_HOME"
    exec "$VENV/bin/python" -m airflow_txn.demo "$@"
fi
ensure_venv "postgres,spark,airflow"
ensure_java
rm -rf "$AIRFLOW_TXN_HOME"
log "running the Airflow demo in $AIRFLOW_TXN_HOME (about a minute or two)"
cd "$REPO"  # the demo is the checkout's `demo` package (python -m demo.airflow_demo), not part of the installed package
exec "$VENV/bin/python" -m demo.airflow_demo --home "$AIRFLOW_TXN_HOME" --dags "$REPO/dags" "$@"
