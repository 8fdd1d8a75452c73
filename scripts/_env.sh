# Shared by scripts/demo.sh and scripts/test.sh: a project virtual environment, created once and
# refreshed when pyproject.toml changes. Sourced, not run.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${AIRFLOW_TXN_VENV:-$REPO/.venv}"
PYTHON_BIN="${PYTHON:-python3.11}"
command -v "$PYTHON_BIN" >/dev/null 2>&1 || PYTHON_BIN=python3

# Each step's line says how long the script has run so far (bash's SECONDS), so a slow phase shows in CI logs.
log() { printf '\033[1m==> [%dm%02ds] %s\033[0m\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

ensure_venv() {  # ensure_venv EXTRAS  (e.g. "dev")
    local extras="$1" stamp
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating virtual environment $VENV"
        "$PYTHON_BIN" -m venv "$VENV"
        "$VENV/bin/pip" install -q --upgrade pip >/dev/null 2>&1 || true
    fi
    stamp="$VENV/.airflow_txn-$(echo "$extras" | tr ',' '-').stamp"
    if [ ! -f "$stamp" ] || [ "$REPO/pyproject.toml" -nt "$stamp" ]; then
        log "installing airflow-txn[$extras] into $VENV (first run takes a minute or two)"
        if ! "$VENV/bin/pip" install -q -e "$REPO[$extras]" >"$VENV/pip-install.log" 2>&1; then
            cat "$VENV/pip-install.log" >&2
            echo "pip install failed (log above, kept in $VENV/pip-install.log)" >&2
            exit 1
        fi
        touch "$stamp"
    fi
}

ensure_java() {  # Spark needs a JVM: install a headless JRE (Debian package) when there is none
    if ! command -v java >/dev/null 2>&1; then
        local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
        log "installing Java for Spark (openjdk-17-jre-headless)"
        $sudo apt-get update -qq && $sudo apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    fi
    export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
}
