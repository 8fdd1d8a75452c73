#!/usr/bin/env bash
# Quick start, command 2: set up and run the whole check: ruff, mypy --strict, then the test suite
# (fast unit tests first, then the tests against real PostgreSQL, multi-process and crash tests).
# Starts the services it needs itself. Safe to run twice. Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
ensure_venv "dev"
cd "$REPO"

log "PostgreSQL"
AIRFLOW_TXN_TEST_PG="$(bash "$REPO/scripts/start_postgres.sh" | tail -n 1)"
export AIRFLOW_TXN_TEST_PG

log "ruff"
"$VENV/bin/ruff" check airflow_txn tests
log "mypy --strict"
"$VENV/bin/mypy"

run_pytest() {  # pytest's exit 5 (nothing selected, e.g. with a -k filter) is not a failure here
    local rc=0
    "$VENV/bin/pytest" -q -p no:cacheprovider "$@" || rc=$?
    [ "$rc" -eq 5 ] && rc=0
    return "$rc"
}
log "unit tests (no services)"
run_pytest -m "not postgres and not slow" "$@"
log "tests against PostgreSQL, multi-process and crash tests"
run_pytest -m "postgres or slow" "$@"
