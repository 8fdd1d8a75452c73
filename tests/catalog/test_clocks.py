"""Leases are set and judged by the catalog's clock, not by the clock of the machine that acts (issue 16, case 14).

"A host whose clock runs ahead (or behind)" is simulated by patching time.time while that host's calls run;
the catalog is the real one, and its clock (the database's) is not patched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import table_registry
from airflow_txn.errors import LeaseExpiredError
from tests.helpers import events, ids, make_tables, outlive_lease, stored_exists, wait_past

DAY = "2024-01-01"
HOUR = 3600.0


@contextmanager
def clock_off_by(monkeypatch: pytest.MonkeyPatch, seconds: float) -> Iterator[None]:
    """This process's clock runs `seconds` ahead (negative: behind) inside the block."""
    real = time.time
    with monkeypatch.context() as patch:
        patch.setattr(time, "time", lambda: real() + seconds)
        yield


def test_a_host_whose_clock_runs_ahead_rolls_back_nothing_alive(
        wh: Warehouse, open_wh: Callable[[], Warehouse], root: Path | str, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16, case 14: recovery and vacuum on a host whose clock runs an hour ahead neither roll back a
    transaction whose owner is alive (lease 60 s, just renewed) nor delete the files it is writing."""
    make_tables(wh)
    t = wh.begin(lease_seconds=60)
    t.append("sales.events", events([1], day=DAY))
    with wh.runtime.catalog.read() as conn:
        directory = table_registry.get(conn, "sales.events").directory
    in_progress = wh.runtime.storage.write_part(directory, {"day": DAY}, events([2], day=DAY),
                                                {"tid": t.tid, "table": "sales.events", "key": None})
    staged = [f"{directory}/{p['path']}" for p in wh.transaction_info(t.tid)["parts"]]
    maintenance = open_wh()
    with clock_off_by(monkeypatch, HOUR):
        recovered = maintenance.recover()
        vacuumed = maintenance.vacuum(retention_seconds=0)
        backlog = maintenance.recovery_backlog()
    assert recovered["rolled_back"] == []
    assert backlog["expired_transactions"] == 0
    assert vacuumed["orphan_dirs_removed"] == 0 and vacuumed["parts_removed"] == 0
    assert stored_exists(root, f"{directory}/{in_progress.path}")
    assert all(stored_exists(root, p) for p in staged)
    assert t.state == "active"
    t.append("sales.events", events([3], day=DAY))
    t.commit()
    assert ids(wh.read("sales.events")) == [1, 3]


def test_an_owner_whose_clock_runs_ahead_cannot_stretch_its_lease(
        wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16, case 14: a worker whose clock runs an hour ahead begins (and renews) a transaction with a 1 s
    lease; the deadline is the catalog's now + 1 s, so once its owner is gone, recovery on a host with a
    right clock rolls it back a second later, not an hour later."""
    make_tables(wh)
    with clock_off_by(monkeypatch, HOUR):
        t = wh.begin(lease_seconds=1)
        t.append("sales.events", events([1], day=DAY))
        assert t.heartbeat()
        deadline = wh.transaction_info(t.tid)["lease_deadline"]
    assert deadline < time.time() + 30
    wait_past(wh, deadline)  # the catalog's clock: the lease ran out
    assert wh.recover()["rolled_back"] == [t.tid]
    assert t.state == "rolled_back"


def test_an_owner_whose_clock_runs_behind_cannot_use_an_expired_lease(
        wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16, case 14: a worker whose clock runs an hour behind finds its lease expired when the catalog's
    clock says so (LeaseExpiredError), not an hour later."""
    make_tables(wh)
    t = wh.begin(lease_seconds=0.5)
    outlive_lease(wh, t.tid)
    with clock_off_by(monkeypatch, -HOUR), pytest.raises(LeaseExpiredError):
        t.append("sales.events", events([1], day=DAY))
    assert ids(wh.read("sales.events")) == []
