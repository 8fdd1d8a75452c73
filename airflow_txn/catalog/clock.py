"""The catalog's clock: the database's time (epoch seconds), by which every lease is set and judged.

A lease deadline is written and compared inside the catalog's own statements (`catalog_now()` is a SQL
expression, so it costs no round trip), never with the clock of the machine that happens to act: a
worker whose clock runs ahead cannot roll back a live transaction or delete its files, and one whose
clock runs behind cannot keep an expired one alive. PostgreSQL: `clock_timestamp()` of the server (all
clients share it). SQLite: the time of the machine that holds the database file (every client runs
there), read by SQLite itself, so a process that patches or skews its own `time.time()` changes nothing.

The catalog also RECORDS times with its rows (a commit record's `committed_at`, a transaction's `created_at`
and `ended_at`, a merge's `committed_at`) and compares them with the time now to find the snapshot current
`retention_seconds` ago, the history rows older than the window and the merge sources still protected
(core/retention.py, core/vacuum.py). Those times come from `wall_time()`: this machine's clock, unless a
simulation or a test injects another one (`use_wall_clock`, `FastForward`: benchmarks/b16_year.py runs a
simulated year in minutes that way). The injected clock moves recorded times only: lease deadlines stay the
database's (above), and file ages stay storage's (their mtimes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Float, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class CatalogNow(FunctionElement[float]):
    """The database's current time in epoch seconds, as a SQL expression (a float)."""

    type = Float()
    inherit_cache = True
    name = "catalog_now"


def catalog_now() -> CatalogNow:
    """The catalog's time, to use inside a statement (compiled for the catalog's dialect)."""
    return CatalogNow()


@compiles(CatalogNow)
def _standard(_element: CatalogNow, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM CURRENT_TIMESTAMP) AS DOUBLE PRECISION)"


@compiles(CatalogNow, "postgresql")
def _postgresql(_element: CatalogNow, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"


@compiles(CatalogNow, "sqlite")
def _sqlite(_element: CatalogNow, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "((julianday('now') - 2440587.5) * 86400.0)"  # the Julian day of 1970-01-01 is 2440587.5


_NOW = select(catalog_now())


def now(conn: Connection) -> float:
    """The catalog's time now (one statement; inside other statements use `catalog_now()`)."""
    return float(conn.execute(_NOW).scalar_one())


# -- the time recorded with catalog rows ------------------------------------------------------------------
WallClock = Callable[[], float]
"""A clock: epoch seconds now."""

_wall: WallClock | None = None
"""The injected clock (None: this machine's, `time.time()` looked up at each call)."""


def wall_time() -> float:
    """Epoch seconds now, as recorded with catalog rows and compared with them (module doc): `time.time()`
    unless `use_wall_clock` injected another clock."""
    return time.time() if _wall is None else _wall()


@contextmanager
def use_wall_clock(clock: WallClock) -> Iterator[WallClock]:
    """Within the block, `wall_time()` is `clock()` in this process (every thread): for simulations and tests
    that fast-forward time (`FastForward`). Blocks do not nest across threads; the previous clock comes back
    at the end."""
    global _wall
    previous = _wall
    _wall = clock
    try:
        yield clock
    finally:
        _wall = previous


class FastForward:
    """A clock that runs with this machine's but `offset` seconds ahead; `advance(seconds)` jumps it forward
    (never back: recorded times stay in order, as they do on a real clock)."""

    def __init__(self, offset: float = 0.0) -> None:
        if not offset >= 0:
            raise ValueError(f"a fast-forward offset is >= 0 seconds, got {offset!r}")
        self._offset = float(offset)
        self._lock = threading.Lock()

    @property
    def offset(self) -> float:
        return self._offset

    def advance(self, seconds: float) -> float:
        """Jump `seconds` (>= 0) ahead; returns the new time."""
        if not seconds >= 0:
            raise ValueError(f"a clock only moves forward, by >= 0 seconds, got {seconds!r}")
        with self._lock:
            self._offset += float(seconds)
        return self()

    def __call__(self) -> float:
        return time.time() + self._offset
