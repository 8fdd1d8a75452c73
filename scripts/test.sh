#!/usr/bin/env bash
# Quick start, command 2: set up and run the whole check: the docs site (mkdocs build --strict), ruff, mypy --strict,
# then the test suite (fast unit tests first, then the tests against real PostgreSQL, multi-process and crash tests,
# then the core suite in the production pairing (PostgreSQL, ZooKeeper, an S3-compatible server: SeaweedFS) with
# the object-storage and ZooKeeper oracle tests against real servers, then the Spark tests on a local SparkSession,
# then the Airflow tests: real dag.test() runs of the example DAGs with Spark, on SQLite and PostgreSQL,
# then Airflow as its four real processes driven through its REST API).
# Starts the services it needs itself. Safe to run twice. Extra arguments go to pytest.
# Leaves `git status` as it found it: reports go under build/ (ignored by git), and the last step checks.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
git_status() { git -C "$REPO" status --porcelain 2>/dev/null || true; }
STATUS_BEFORE="$(git_status)"
# Compiled bytecode (and pytest's rewritten test modules) is kept under build/pycache/ (ignored by git) even where
# the environment says PYTHONDONTWRITEBYTECODE: otherwise every pytest worker of every phase rewrites and compiles
# all ~300 test modules again (collection 18 s -> 7 s here) and every worker process compiles airflow_txn anew.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$REPO/build/pycache"
ensure_venv "dev,docs,spark,spark-connect,zookeeper,airflow,openlineage,amazon,checks,bench,iceberg,delta"
cd "$REPO"

# mypy runs on one core while the steps below mostly wait (downloads, servers starting): it starts now and is
# waited for after ruff, its report printed there (about 30 s off the run on a 2-core machine).
mkdir -p "$REPO/build"
MYPY_LOG="$REPO/build/mypy.log"
"$VENV/bin/mypy" > "$MYPY_LOG" 2>&1 &
MYPY_PID=$!

log "docs site: mkdocs build --strict -> build/site/ (needs no services; a broken link, anchor or docstring fails)"
NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --quiet

log "Java (for Spark)"
ensure_java
java -version 2>&1 | head -n 1

log "PostgreSQL"
AIRFLOW_TXN_TEST_PG="$(bash "$REPO/scripts/start_postgres.sh" | tail -n 1)"
export AIRFLOW_TXN_TEST_PG

log "ZooKeeper (Debian package, for the ZooKeeper oracle tests; servers are started by the fixtures)"
"$VENV/bin/python" -c "from tests.harness.zookeeper import ensure_installed; ensure_installed()"
export AIRFLOW_TXN_TEST_ZK=1

log "SeaweedFS (S3-compatible server for the object-storage tests; servers are started by the fixtures)"
"$VENV/bin/python" -c "from tests.harness.seaweedfs import ensure_installed; ensure_installed()"
export AIRFLOW_TXN_TEST_S3=1

log "Docker Compose v2 (validates docker/docker-compose.yml; no Docker engine needed)"
bash "$REPO/scripts/ensure_compose.sh" >/dev/null
export AIRFLOW_TXN_TEST_COMPOSE=1

log "Chromium (Debian package, for the Airflow plugin page test)"
"$VENV/bin/python" -c "from tests.harness.chromium import ensure_installed; ensure_installed()"

log "ruff"
"$VENV/bin/ruff" check airflow_txn demo tests benchmarks scripts dags plugins
log "mypy --strict (started with the setup)"
MYPY_RC=0
wait "$MYPY_PID" || MYPY_RC=$?
cat "$MYPY_LOG"
[ "$MYPY_RC" -eq 0 ] || exit "$MYPY_RC"

run_pytest() {  # pytest's exit 5 (nothing selected, e.g. with a -k filter) is not a failure here
    local rc=0
    "$VENV/bin/pytest" -q -p no:cacheprovider "$@" || rc=$?
    [ "$rc" -eq 5 ] && rc=0
    return "$rc"
}
# The reliability suites (crash matrix, service faults, randomized histories, fuzzing, ZooKeeper faults) run
# once, in the last phase, through scripts/reliability.py, which writes build/reliability/RELIABILITY.md (the
# tracked docs/RELIABILITY.md only changes with --write-docs). With extra pytest arguments (e.g. -k vacuum)
# they run in the ordinary phases instead and no report is written.
RELIABILITY=()
if [ $# -eq 0 ]; then
    RELIABILITY=(--ignore=tests/core/test_crash_points.py --ignore=tests/faults --ignore=tests/history
                 --ignore=tests/core/test_fuzz_bad_input.py --ignore=tests/zookeeper/test_processes.py)
fi
# Every pytest phase runs on two pytest-xdist workers: their tests wait on servers (PostgreSQL,
# SeaweedFS, ZooKeeper, Spark's JVM) and child processes about half the time, so two workers finish in about
# half the time on a 2-core machine (each worker starts the session's servers of its own).
XDIST=(-n 2)
log "unit tests (no services; two workers)"
run_pytest "${XDIST[@]}" -m "not postgres and not slow and not spark and not zookeeper and not airflow and not s3" "${RELIABILITY[@]}" "$@"
log "tests against PostgreSQL, multi-process and crash tests (two workers)"
run_pytest "${XDIST[@]}" -m "(postgres or slow) and not spark and not zookeeper and not airflow and not s3" "${RELIABILITY[@]}" "$@"
log "production pairing: the core suite on PostgreSQL + ZooKeeper + S3, object-store and ZooKeeper oracle tests (a SeaweedFS and a ZooKeeper server per worker; two workers)"
run_pytest "${XDIST[@]}" -m "(s3 or zookeeper) and not spark and not airflow" "${RELIABILITY[@]}" "$@"
log "Spark tests (two workers, a local SparkSession and a Spark Connect server each)"
run_pytest "${XDIST[@]}" -m "spark and not airflow" "$@"
log "Airflow tests (dag.test() of the example DAGs with Spark; a throw-away Airflow home per worker; two workers)"
run_pytest "${XDIST[@]}" -m "airflow and not real_airflow" "$@"
log "real Airflow (the wheel in its own venv; api-server, scheduler, dag-processor, triggerer as processes on PostgreSQL)"
run_pytest -n 0 -m real_airflow "$@"
if [ $# -eq 0 ]; then
    log "benchmarks, quick mode (fails only if a ratio passes its gate, twice its target) -> build/benchmarks/"
    "$VENV/bin/python" benchmarks/run.py --quick
    log "reliability suites (crash matrix, service faults, random histories, fuzzing) -> build/reliability/"
    "$VENV/bin/python" scripts/reliability.py --quick
fi
log "git status unchanged by the run"
if [ "$(git_status)" != "$STATUS_BEFORE" ]; then
    echo "the test command changed the checkout (tests and reports must write under build/ or a temp dir):" >&2
    diff <(printf '%s\n' "$STATUS_BEFORE") <(git_status) >&2 || true
    exit 1
fi
