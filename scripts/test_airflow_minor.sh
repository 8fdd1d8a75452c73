#!/usr/bin/env bash
# The Airflow test phase of scripts/test.sh on another Airflow 3.x minor release: a manual check (not in
# scripts/test.sh: CI's time budget), run before a minor is declared in the `airflow` extra (docs/DESIGN.md, D13).
#
#   bash scripts/test_airflow_minor.sh 3.1              # the latest 3.1.x release
#   bash scripts/test_airflow_minor.sh 3.2 -k backfill  # extra arguments go to pytest
#
# It creates its own virtual environment, build/airflow-MINOR/venv (ignored by git; kept between runs and
# refreshed when pyproject.toml changes), installs the minor's latest release from the package index with this
# package (editable) and the extras the Airflow tests need, but NOT the `airflow` extra (which names the
# declared range, and would refuse a minor outside it); then starts the services as scripts/test.sh does and runs
# its two Airflow phases: `pytest -m airflow tests/airflow` on two workers (dag.test()), then `pytest -m real_airflow
# tests/real_airflow` (Airflow's four services as processes, on this venv's Airflow). Airflow's constraint files are
# not used (they are not on the package index): what a minor needs pinned is in PINS below. The pytest output is
# kept in build/airflow-MINOR/pytest.log and pytest-real.log; the last lines say which releases ran and the result.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
MINOR="${1:-}"
if ! [[ "$MINOR" =~ ^3\.[0-9]+$ ]]; then
    echo "usage: $0 MINOR [pytest arguments]   (MINOR: an Airflow 3.x minor release, e.g. 3.1 or 3.2)" >&2
    exit 2
fi
shift
OUT="$REPO/build/airflow-$MINOR"
VENV="$OUT/venv"
# What a minor needs on top of the plain resolution: PINS (requirements, one per word) and WARNINGS (pytest -W
# filters for warnings that Airflow's own packages raise on that minor: the suite turns every warning into an error).
# Airflow's constraint files pin these for its releases (they are not on the package index). The releases
# before 3.3 predate SQLAlchemy 2.1 (3.2 still uses its deprecated `noload`) and svcs 26 (with it, 3.2's
# in-process execution API finds no `svcs_registry`: every dag.test() task fails), and 3.2 sets no upper bound
# on fastapi, whose releases after 0.136 fail to build 3.2's execution API (its TITerminalStatePayload model);
# 3.3 caps fastapi below 0.137.
PINS=(); WARNINGS=()
case "$MINOR" in
    3.1)  # and 3.1's fastapi cap keeps a starlette that imports anyio's deprecated BlockingPortal alias (anyio 4.15);
          # the newest common-compat provider imports BaseBranchOperator through 3.1's deprecated path; that anyio's
          # pytest plugin imports pytest 9.2's deprecated CallSpec2 alias (no test uses the plugin: not loaded); 3.1's
          # execution API names starlette's HTTP_422_UNPROCESSABLE_ENTITY, deprecated since starlette 0.48; 3.1's
          # get_fernet sets an attribute on cryptography's MultiFernet, a Rust class since cryptography 51: storing a
          # connection with a Fernet key (the real-Airflow phase's POST /api/v2/connections) fails with AttributeError
        PINS=("sqlalchemy<2.1" "svcs<26" "anyio<4.15" "cryptography<51")
        WARNINGS=(-p no:anyio
                  -W "ignore:The \`airflow.operators.branch.BaseBranchOperator\` attribute is deprecated:FutureWarning"
                  -W "ignore:'HTTP_422_UNPROCESSABLE_ENTITY' is deprecated:DeprecationWarning") ;;
    3.2) PINS=("sqlalchemy<2.1" "svcs<26" "fastapi<0.137") ;;
esac
# The `airflow` extra minus Apache Airflow itself (pyproject.toml), and the extras the Airflow phase uses (as
# scripts/test.sh installs them; `amazon`: the aws_conn_id tests of tests/airflow/test_connections.py).
REQUIREMENTS=("apache-airflow~=$MINOR.0" "jinja2>=3.1" "duckdb>=1.0" ${PINS[@]+"${PINS[@]}"})
EXTRAS="dev,spark,spark-connect,zookeeper,openlineage,amazon,checks"

mkdir -p "$OUT"
if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtual environment $VENV"
    "$PYTHON_BIN" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip >/dev/null 2>&1 || true
fi
stamp="$VENV/.airflow_txn-$MINOR.stamp"
if [ ! -f "$stamp" ] || [ "$REPO/pyproject.toml" -nt "$stamp" ] || [ "${BASH_SOURCE[0]}" -nt "$stamp" ]; then
    log "installing Apache Airflow $MINOR.x and airflow-txn[$EXTRAS] into $VENV (first run: several minutes)"
    if ! "$VENV/bin/pip" install --upgrade --upgrade-strategy eager -e "$REPO[$EXTRAS]" "${REQUIREMENTS[@]}" >"$OUT/pip-install.log" 2>&1; then
        tail -n 40 "$OUT/pip-install.log" >&2
        echo "pip install failed (the whole log: $OUT/pip-install.log)" >&2
        exit 1
    fi
    touch "$stamp"
fi
versions() {
    "$VENV/bin/python" - <<'EOF'
import importlib.metadata as m
import platform
names = ["apache-airflow", "apache-airflow-core", "apache-airflow-task-sdk",
         "apache-airflow-providers-openlineage", "pyspark", "sqlalchemy", "pyarrow"]
print(f"Python {platform.python_version()}; " + ", ".join(f"{n} {m.version(n)}" for n in names))
EOF
}
log "installed: $(versions)"
cd "$REPO"

log "Java (for Spark)"
ensure_java
log "PostgreSQL"
AIRFLOW_TXN_TEST_PG="$(bash "$REPO/scripts/start_postgres.sh" | tail -n 1)"
export AIRFLOW_TXN_TEST_PG
log "ZooKeeper, SeaweedFS, Chromium (Debian packages / the dev extra; servers are started by the fixtures)"
"$VENV/bin/python" -c "from tests.harness.zookeeper import ensure_installed; ensure_installed()"
export AIRFLOW_TXN_TEST_ZK=1
"$VENV/bin/python" -c "from tests.harness.seaweedfs import ensure_installed; ensure_installed()"
export AIRFLOW_TXN_TEST_S3=1
"$VENV/bin/python" -c "from tests.harness.chromium import ensure_installed; ensure_installed()"

log "Airflow tests on Apache Airflow $MINOR (dag.test() of the example DAGs with Spark; two workers) -> $OUT/pytest.log"
rc=0  # pipefail: the pipeline's status is pytest's
"$VENV/bin/pytest" -q -p no:cacheprovider -n 2 -m "airflow and not real_airflow" ${WARNINGS[@]+"${WARNINGS[@]}"} tests/airflow "$@" 2>&1 | tee "$OUT/pytest.log" || rc=$?
[ "$rc" -eq 5 ] && rc=0  # nothing selected (a -k filter) is not a failure
log "real Airflow on Apache Airflow $MINOR (the wheel in its own venv on this one's packages; api-server, scheduler, dag-processor, triggerer as processes on PostgreSQL) -> $OUT/pytest-real.log"
real=0
"$VENV/bin/pytest" -q -p no:cacheprovider -n 0 -m real_airflow ${WARNINGS[@]+"${WARNINGS[@]}"} tests/real_airflow "$@" 2>&1 | tee "$OUT/pytest-real.log" || real=$?
[ "$real" -eq 5 ] && real=0
[ "$rc" -eq 0 ] && rc=$real
if [ "$rc" -eq 0 ]; then
    log "PASSED on $(versions)"
else
    log "FAILED (pytest exit $rc) on $(versions); the output: $OUT/pytest.log"
fi
exit "$rc"
