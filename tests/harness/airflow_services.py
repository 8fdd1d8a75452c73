"""A real Airflow deployment for tests: the package installed from its wheel into a virtual environment of its own,
and Airflow's four services (api-server, scheduler with the LocalExecutor, dag-processor, triggerer) as separate
processes on a PostgreSQL metadata database, driven through the REST API as a user drives them. Never a mock.

    with deployment(workdir, pg_server_url, dag_files, connections) as af:
        run_id = af.trigger("multi_table_backfill", {"days": 1})
        assert af.wait_run("multi_table_backfill", run_id) == "success"
        assert af.alive("scheduler")

The environment: `python -m venv --without-pip` plus a `.pth` line that puts the project venv's site-packages
(Airflow, pyspark, pyarrow, ...) BEHIND the new venv's own, into which `pip install --no-deps` puts the wheel
built from this checkout: `import airflow_txn` and the entry points (provider, plugin, console script) come from
the wheel, as for a pip user, and nothing is downloaded but the wheel's build backend. Each service runs in a
session of its own (`setsid`) and is stopped by its process group. The metadata database is a fresh PostgreSQL
database on the test server, dropped afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, make_url, text

from tests import helpers
from tests.harness.ports import free_port

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
USER, PASSWORD = "admin", "admin"
START_TIMEOUT = 240.0
"""How long `airflow db migrate` plus the API server's start may take on a loaded 2-core machine."""
FINISHED = ("success", "failed")


class AirflowUnavailable(RuntimeError):
    """A service did not start, or died; the message carries the end of its log."""


def build_wheel(out: Path) -> Path:
    """The wheel of this checkout (pip's isolated build: setuptools from the package index), built into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=600, check=False)
    wheels = sorted(out.glob("airflow_txn-*.whl"))
    if done.returncode != 0 or not wheels:
        raise AirflowUnavailable(f"building the wheel failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return wheels[-1]


def wheel_venv(where: Path, wheel: Path) -> Path:
    """A venv holding the wheel, with this interpreter's site-packages behind its own; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip())
    (own / "zz_airflow_txn_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise AirflowUnavailable(f"installing the wheel failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return python


@contextlib.contextmanager
def fresh_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new, empty database on the PostgreSQL server of `server_url` (any database of it); its URL, dropped after."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    admin = create_engine(make_url(server_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.5,
               on_timeout: Callable[[], str] = lambda: "") -> Any:
    """tests.helpers.wait_until, polling every half second by default (each look asks a server)."""
    return helpers.wait_until(condition, timeout, what, interval, on_timeout)


@dataclass
class Deployment:
    """A running Airflow: its home, its services' processes, and a REST client signed in as admin."""

    home: Path
    python: Path
    env: dict[str, str]
    url: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    client: httpx.Client | None = None

    # --- processes ---------------------------------------------------------------------------------------------
    def log_file(self, service: str) -> Path:
        return self.home / "logs" / f"{service}.log"

    def log(self, service: str, tail: int = 6000) -> str:
        path = self.log_file(service)
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def alive(self, service: str) -> bool:
        return self.processes[service].poll() is None

    def start(self, service: str) -> None:
        with self.log_file(service).open("ab") as out:  # the child keeps its own descriptor
            self.processes[service] = subprocess.Popen(
                [str(self.python), "-m", "airflow", *service.split()], env=self.env, cwd=self.home, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def stop(self, service: str, timeout: float = 30.0) -> None:
        proc = self.processes.get(service)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def airflow(self, *args: str, timeout: float = START_TIMEOUT) -> str:
        """`airflow ARGS` in this deployment's environment (a command, not a service); its output."""
        done = subprocess.run([str(self.python), "-m", "airflow", *args], env=self.env, cwd=self.home,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise AirflowUnavailable(f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        return done.stdout

    def problems(self) -> str:
        """What each dead service said last (for an assertion message)."""
        return "".join(f"\n--- {name} (exit {p.poll()}) ---\n{self.log(name)}"
                       for name, p in self.processes.items() if p.poll() is not None)

    # --- REST API ----------------------------------------------------------------------------------------------
    def api(self, method: str, path: str, body: Mapping[str, Any] | None = None, ok: Sequence[int] = (200,)) -> Any:
        assert self.client is not None
        response = self.client.request(method, path, json=body)
        assert response.status_code in ok, f"{method} {path}: {response.status_code} {response.text[:2000]}"
        return response.json() if response.content and "json" in response.headers.get("content-type", "") else \
            response.text

    def sign_in(self) -> None:
        response = httpx.post(f"{self.url}/auth/token", json={"username": USER, "password": PASSWORD}, timeout=30)
        response.raise_for_status()
        token = response.json()["access_token"]
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def wait_dag(self, dag_id: str, timeout: float = 180.0) -> None:
        """Until the dag-processor has parsed `dag_id` (and it is not paused)."""
        assert self.client is not None

        def parsed() -> bool:
            response = self.client.get(f"/api/v2/dags/{dag_id}")  # type: ignore[union-attr]
            return response.status_code == 200 and not response.json().get("is_paused")

        wait_until(parsed, timeout, f"DAG {dag_id} to be parsed", on_timeout=lambda: self.import_errors())

    def import_errors(self) -> str:
        errors = self.api("GET", "/api/v2/importErrors").get("import_errors", [])
        return f"\nimport errors: {errors}" if errors else ""

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        run = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": dict(conf or {})})
        return str(run["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"])

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 300.0, states: Sequence[str] = FINISHED) -> str:
        """Until the run is in one of `states` (a service dying ends the wait at once, with its log)."""
        def finished() -> str | None:
            if not self.alive("scheduler"):
                raise AssertionError(f"the scheduler died while {dag_id}/{run_id} ran:{self.problems()}")
            state = self.run_state(dag_id, run_id)
            return state if state in states else None

        return str(wait_until(finished, timeout, f"run {dag_id}/{run_id} to reach {list(states)}",
                              on_timeout=lambda: f"; task states {self.task_states(dag_id, run_id)}"))

    def task_states(self, dag_id: str, run_id: str) -> dict[str, tuple[str | None, int]]:
        """`task_id[map_index]` (or `task_id`) -> (state, try_number)."""
        tis = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=1000")["task_instances"]
        return {(t["task_id"] if t["map_index"] < 0 else f"{t['task_id']}[{t['map_index']}]"):
                (t["state"], t["try_number"]) for t in tis}

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        entry = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/"
                                f"return_value?deserialize=true&map_index={map_index}")
        return entry["value"]


def _environment(home: Path, port: int, metadata_url: str, dags: Path, extra: Mapping[str, str]) -> dict[str, str]:
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({USER: PASSWORD}))
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("AIRFLOW", "PYTEST", "PYTHONPATH")) and k != "COLUMNS"}
    return {
        **base,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{HOST}:{port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
        "AIRFLOW__API__HOST": HOST,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": f"http://{HOST}:{port}",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__OPENLINEAGE__DISABLED": "True",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "SPARK_LOCAL_IP": HOST,
        **extra,
    }


@contextlib.contextmanager
def deployment(workdir: Path, pg_server_url: str, dag_files: Sequence[Path],
               env: Mapping[str, str] | None = None) -> Iterator[Deployment]:
    """Airflow's four services running the DAG files `dag_files` with this checkout's wheel; stopped after."""
    workdir.mkdir(parents=True, exist_ok=True)
    python = wheel_venv(workdir / "venv", build_wheel(workdir / "wheel"))
    home, dags = workdir / "home", workdir / "dags"
    (home / "logs").mkdir(parents=True)
    dags.mkdir()
    for source in dag_files:
        shutil.copy(source, dags / source.name)
    port = free_port()
    metadata = make_url(pg_server_url).set(drivername="postgresql+psycopg2")
    with fresh_database(metadata.render_as_string(hide_password=False), "airflow_meta") as metadata_url:
        af = Deployment(home, python, _environment(home, port, metadata_url, dags, env or {}), f"http://{HOST}:{port}")
        try:
            af.airflow("db", "migrate")
            for service in SERVICES:
                af.start(service)
            wait_until(lambda: _healthy(af), START_TIMEOUT, "the API server to answer",
                       on_timeout=lambda: af.problems() or af.log("api-server"))
            af.sign_in()
            yield af
        finally:
            if af.client is not None:
                af.client.close()
            for service in reversed(SERVICES):
                af.stop(service)


def _healthy(af: Deployment) -> bool:
    if not af.alive("api-server"):
        raise AirflowUnavailable(f"the API server died:{af.problems()}")
    try:
        return httpx.get(f"{af.url}/api/v2/monitor/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
