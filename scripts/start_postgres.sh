#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 and that the test database exists.
# Idempotent: starts the Debian cluster only when it is down, creates the database only once.
set -euo pipefail
PGHOST="${PGHOST:-127.0.0.1}"; PGPORT="${PGPORT:-5432}"; PGUSER="${PGUSER:-postgres}"
DB="${AIRFLOW_TXN_TEST_DB:-airflow_txn_test}"
export PGHOST PGPORT PGUSER

ready() { pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null; }

if ! command -v pg_isready >/dev/null 2>&1; then
    echo "==> installing PostgreSQL (Debian package)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
if ! ready; then
    echo "==> starting PostgreSQL"
    for version in $(ls /etc/postgresql 2>/dev/null); do
        pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null \
            || pg_ctlcluster "$version" main start || true
    done
    for _ in $(seq 1 60); do ready && break; sleep 0.5; done
fi
ready || { echo "PostgreSQL does not answer on $PGHOST:$PGPORT" >&2; exit 1; }
if ! psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" | grep -q 1; then
    echo "==> creating database $DB"
    psql -d postgres -qc "CREATE DATABASE \"$DB\"" || psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" | grep -q 1
fi
# A throw-away test database: commits need not wait for the WAL to reach the disk (no test crashes the
# server; a crashed server would lose at most the last commits of a test run). Each commit waited for an
# fsync before: about a third of the PostgreSQL phase's time went there under load.
psql -d postgres -qc "ALTER DATABASE \"$DB\" SET synchronous_commit = off"
echo "postgresql+psycopg://$PGUSER@$PGHOST:$PGPORT/$DB"
