"""The clock the catalog records times by (catalog/clock.py, `wall_time`) can be injected: a fast-forwarded one
makes retention, vacuum's history purge and the protection of merge sources judge time as if it had passed,
which is how benchmarks/b16_year.py simulates a year (issue 34). Lease deadlines stay the database's."""

from __future__ import annotations

import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import clock
from airflow_txn.core.vacuum import HISTORY_SECONDS
from airflow_txn.model.csn import PREHISTORIC_CSN
from tests.helpers import events, ids, make_tables

DAY = 24 * 3600.0


def test_fast_forward_only_moves_forward() -> None:
    ahead = clock.FastForward(10.0)
    assert ahead.offset == 10.0
    with pytest.raises(ValueError, match=">= 0"):
        ahead.advance(-1)
    with pytest.raises(ValueError, match=">= 0"):
        clock.FastForward(-5)
    first = ahead()
    assert ahead.advance(DAY) >= first + DAY
    assert ahead.offset == 10.0 + DAY


def test_an_injected_clock_is_used_only_inside_its_block() -> None:
    with clock.use_wall_clock(lambda: 42.0):
        assert clock.wall_time() == 42.0
        with clock.use_wall_clock(lambda: 43.0):
            assert clock.wall_time() == 43.0
        assert clock.wall_time() == 42.0
    assert clock.wall_time() != 42.0


def test_commits_record_the_injected_time(wh: Warehouse) -> None:
    make_tables(wh)
    ahead = clock.FastForward(30 * DAY)
    with clock.use_wall_clock(ahead):
        with wh.begin() as t:
            t.append("sales.events", events([1]))
        recorded = wh.commit_log(limit=1)[0]["committed_at"]
        assert recorded >= ahead() - DAY  # 30 days ahead of this machine's clock, give or take the test's run


def test_retention_and_history_follow_a_fast_forwarded_clock(wh: Warehouse) -> None:
    """Two commits and a rollback; a vacuum with a one-day window keeps both versions readable while the
    clock has not moved, and, a week later by the injected clock, raises the horizon to the latest commit
    and purges the history rows older than the window (and HISTORY_SECONDS): the older commit record, the
    rolled-back transaction's row."""
    make_tables(wh)
    ahead = clock.FastForward()
    with clock.use_wall_clock(ahead):
        with wh.begin() as t:
            t.append("sales.events", events([1]))
        with wh.begin() as t:
            t.append("sales.events", events([2]))
        t = wh.begin()
        t.append("sales.events", events([3]))
        t.rollback()
        first, latest = sorted(c["csn"] for c in wh.commit_log())[-2:]
        now = wh.vacuum(retention_seconds=DAY)
        assert now["horizon"] <= first
        assert now["rows_purged"]["commit_log"] == now["rows_purged"]["transactions"] == 0
        assert ids(wh.read("sales.events", csn=first)) == [1]
        ahead.advance(7 * DAY)
        assert max(DAY, HISTORY_SECONDS) < 7 * DAY
        later = wh.vacuum(retention_seconds=DAY)
    assert later["horizon"] == latest > PREHISTORIC_CSN
    assert later["rows_purged"]["transactions"] == 1
    # with ZooKeeper, records stay while its log holds them (its compaction finds what to drop through them)
    assert later["rows_purged"]["commit_log"] == (0 if wh.runtime.oracle.external_log else 1)
    assert ids(wh.read("sales.events")) == [1, 2]


def test_leases_stay_on_the_catalogs_clock(wh: Warehouse) -> None:
    """A fast-forwarded clock expires no lease: leases are set and judged by the database (module doc)."""
    make_tables(wh)
    t = wh.begin(lease_seconds=3600)
    t.append("sales.events", events([5]))
    with clock.use_wall_clock(clock.FastForward(30 * DAY)):
        assert wh.recover()["rolled_back"] == []
        wh.vacuum(retention_seconds=0)
    t.commit()
    assert ids(wh.read("sales.events")) == [5]
