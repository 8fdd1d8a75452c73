"""The benchmark framework: interleaved repetitions, medians and p95, ratios, result rows.

Every row module (benchmarks/b<N>_*.py) exposes `run(quick: bool) -> list[dict]` returning result
rows built by `result()` / `not_run()`; benchmarks/run.py runs them and writes docs/BENCHMARKS.md.

Machines are noisy, so contenders are never timed one after the other in blocks: `interleave` runs
repetition r of every contender before repetition r+1 of any (rotating who goes first), so a burst
of background load hits all of them alike. Each contender's callable times only what it measures
(set-up stays outside the clock) and returns seconds.
"""

from __future__ import annotations

import gc
import importlib.util
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

OURS = "airflow_txn"
FLOOR = "floor (by hand)"
DELTA = "delta-rs"
ICEBERG = "pyiceberg"


REPO = Path(__file__).resolve().parent.parent
WORKDIR_ENV = "AIRFLOW_TXN_BENCH_DIR"


PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
"""The PostgreSQL server the benchmarks' rows use by default: its admin database (they make their own)."""


def pg_admin(explicit: str | None = None) -> str:
    """The PostgreSQL server's admin URL: `explicit` (a --pg option), else $AIRFLOW_TXN_BENCH_PG, else PG_ADMIN.
    An empty value counts as not given."""
    return explicit or os.environ.get("AIRFLOW_TXN_BENCH_PG") or PG_ADMIN


def pg_url(admin: str, database: str) -> str:
    """The URL of `database` on the server of the admin URL `admin`."""
    return admin.rsplit("/", 1)[0] + "/" + database


def pg_execute(admin: str, *statements: str) -> list[object]:
    """Run `statements` one after the other in autocommit on the server's admin database (CREATE DATABASE and
    VACUUM run in no transaction); each one's first value (None where it returns no row). No statement: no
    connection."""
    from sqlalchemy import create_engine, text

    if not statements:
        return []
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            found: list[object] = []
            for stmt in statements:
                result = conn.execute(text(stmt))
                found.append(result.scalar() if result.returns_rows else None)
            return found
    finally:
        engine.dispose()


def pg_unreachable(admin: str) -> str | None:
    """Why the server of `admin` cannot be used (a row says it instead of its figures), or None."""
    try:
        pg_execute(admin, "SELECT 1")
    except Exception as exc:  # any failure to connect: the row says why it did not run
        return f"PostgreSQL at {admin} unreachable: {type(exc).__name__}"
    return None


@contextmanager
def pg_databases(admin: str, *names: str) -> Iterator[list[str]]:
    """Throw-away databases `names` on the server of `admin` (made empty, a leftover of a killed run dropped
    first), their URLs; dropped afterwards, connections still open to them closed by the server (FORCE). No name:
    nothing made, no connection."""
    pg_execute(admin, *(stmt for name in names for stmt in (f"DROP DATABASE IF EXISTS {name} WITH (FORCE)",
                                                             f"CREATE DATABASE {name}")))
    try:
        yield [pg_url(admin, name) for name in names]
    finally:
        pg_execute(admin, *(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)" for name in names))


def workdir() -> Path:
    """Where contenders keep their files: $AIRFLOW_TXN_BENCH_DIR (run.py --workdir), else <repo>/.bench-tmp:
    on the disk a warehouse would use, not in a system temp dir that may be a RAM disk (tmpfs) on one
    machine and a disk on the next."""
    return Path(os.environ.get(WORKDIR_ENV) or REPO / ".bench-tmp")


def workers_import_this_checkout() -> None:
    """Put this checkout first on PYTHONPATH for the processes a benchmark starts from now on (Spark's Python
    workers, a Spark Connect server's, a child interpreter). run.py puts the checkout first on this process's
    sys.path only; a worker process finds airflow_txn through the virtualenv, whose editable install may point
    at ANOTHER checkout when the virtualenv is shared between git worktrees: the data source's code on the
    Spark side would then not be the code measured on the driver (and may not even understand its catalog)."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(REPO)]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *paths])


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A fresh directory under workdir(), deleted afterwards."""
    base = workdir()
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=base) as tmp:
        yield Path(tmp)


class Timer:
    """`with timer: ...` adds the elapsed seconds of the block to `timer.seconds`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._start


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of fn takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleave(contenders: Mapping[str, Callable[[], float]], reps: int, warmup: int = 2) -> dict[str, list[float]]:
    """Run every contender `warmup` times (discarded), then `reps` interleaved repetitions.

    Each callable returns the seconds it measured. Returns {name: [seconds, ...]} in run order."""
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        gc.collect()
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(contenders[name]())
    return samples


def median_ms(seconds: Sequence[float]) -> float:
    return statistics.median(seconds) * 1000


def p95_ms(seconds: Sequence[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(seconds)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] * 1000


def result(row_id: str, measure: str, contender: str, seconds: Sequence[float] | None, *,
           ratio: float | None = None, ratio_of: str | None = None, target: float | None = None,
           target_on: str = "ratio", note: str | None = None, gate: float | None = None) -> dict[str, Any]:
    """One result row. `target` bounds `ratio` (target_on="ratio") or the median in ms ("median_ms");
    `met` is None when there is no target. `gate`: the ratio past which --quick fails (default twice
    the target; a row whose target is out of reach for a stated physical reason gates at twice what
    it reaches instead, so CI still catches a regression)."""
    median = median_ms(seconds) if seconds else None
    value = ratio if target_on == "ratio" else median
    met = None if target is None or value is None else value <= target
    return {
        "id": row_id, "measure": measure, "contender": contender,
        "median_ms": None if median is None else round(median, 3),
        "p95_ms": None if not seconds else round(p95_ms(seconds), 3),
        "n": len(seconds) if seconds else 0,
        "ratio": None if ratio is None else round(ratio, 3), "ratio_of": ratio_of,
        "target": target, "target_on": target_on if target is not None else None, "met": met,
        "gate": gate if gate is not None else (2 * target if target is not None and target_on == "ratio" else None),
        "status": "ok", "note": note,
    }


def not_run(row_id: str, measure: str, contender: str, reason: str, *, target: float | None = None,
            target_on: str = "ratio") -> dict[str, Any]:
    """A row that could not be measured: shown as `not run (reason)`, never silently left out."""
    return {
        "id": row_id, "measure": measure, "contender": contender, "median_ms": None, "p95_ms": None, "n": 0,
        "ratio": None, "ratio_of": None, "target": target, "target_on": target_on if target is not None else None,
        "met": None, "gate": None, "status": f"not run ({reason})", "note": None,
    }


def missing(module: str, extra: str = "bench") -> str | None:
    """Why a peer cannot run (None when `module` imports)."""
    if importlib.util.find_spec(module) is None:
        return f"{module} not installed: pip install -e '.[{extra}]'"
    return None


def ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """Ratio of medians."""
    return statistics.median(numerator) / statistics.median(denominator)


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect once, then keep the cyclic collector out of a timed loop."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
