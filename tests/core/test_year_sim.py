"""The year simulator (benchmarks/b16_year.py, issue 34) at a tiny scale: two simulated days, then the stop-day
report and measurements on a third. It drives the engine's own code with the catalog's clock fast-forwarded
(catalog/clock.py): the report has its shape, the catalog stays bounded, every retained snapshot reads back
what was committed up to it, and a read below the horizon refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_txn.catalog import clock
from benchmarks import b16_year

TINY = b16_year.Workload(runs_per_day=6, tables=3, partitions=2, days=2, retention_days=1.0, rollback_rate=0.2,
                         retry_rate=0.3, crash_rate=0.1, seed=7)


def test_two_simulated_days_then_the_stop_day_report(tmp_path: Path) -> None:
    sim = b16_year.simulate(tmp_path / "sim", TINY)
    try:
        assert [n.day for n in sim.nights] == [1, 2]
        assert sim.clock() - clock.wall_time() >= 23 * 3600  # fast-forwarded through a day at least
        report, rows = b16_year.full_report(sim, reps=1, under_load=1)
    finally:
        sim.close()
    partitions = TINY.tables * TINY.partitions
    assert report["days"] == 2 and len(report["nights"]) == 3
    assert report["parts_per_day"] == TINY.runs_per_day * partitions
    for night in report["nights"]:
        assert night["compacted_live_parts"] == partitions  # every partition merged to one part each night
    nights = report["nights"]
    assert sum(n["recovered"] for n in nights) <= sum(n["crashes"] for n in nights)  # dead runs: rolled back
    families = report["families"]
    assert set(families["bytes"]) == {"parts", "history", "other", "total"}
    assert families["parts"]["live"] == partitions and families["parts"]["staged"] == 0
    assert families["history_rows"] > 0 and families["tables"]["txn_parts"]["rows"] == sum(families["parts"].values())
    bounds = report["bounds"]
    assert bounds["live_parts_ok"] and bounds["history_rows_ok"], bounds
    verified = report["verified"]
    assert verified["snapshots_read"] >= TINY.tables
    assert verified["below_horizon_refused"] is True  # three days past a one-day retention: the horizon moved
    measures = {r["measure"] for r in rows}
    assert {"vacuum of one simulated day", "commit while vacuum runs", "visible-part lookup of one table",
            "read of one table"} <= measures
    assert any(m.startswith("commit of a 3-table transaction") for m in measures)
    assert all(r["status"] == "ok" and r["n"] >= 1 for r in rows)


@pytest.mark.postgres
def test_the_simulation_on_a_postgresql_catalog(tmp_path: Path, pg_url: str) -> None:
    """`b16_year.py --pg`: the simulation's catalog and the fresh one it is compared with are databases of their own
    (dropped afterwards), and where the server's autovacuum is off a VACUUM stands in for it each night."""
    with b16_year._catalogs(pg_url) as (catalog, fresh, upkeep):
        assert catalog is not None and fresh is not None and catalog != fresh
        sim = b16_year.simulate(tmp_path / "sim", TINY, catalog=catalog, maintenance=upkeep)
        try:
            report, rows = b16_year.full_report(sim, reps=1, under_load=1, fresh_catalog=fresh)
        finally:
            sim.close()
    assert report["catalog"] == "PostgreSQL" and report["upkeep"] == (b16_year.UPKEEP if upkeep else None)
    assert report["bounds"]["live_parts_ok"] and report["bounds"]["history_rows_ok"], report["bounds"]
    assert report["verified"]["below_horizon_refused"] is True
    assert all(r["status"] == "ok" and r["n"] >= 1 for r in rows)
    assert all(n["catalog_bytes"]["total"] for n in report["nights"])  # PostgreSQL's relation sizes


def test_a_vacuum_child_that_dies_without_a_result_fails_the_run_at_once() -> None:
    """A child that ends without putting anything (one that died starting: a renamed target it could not unpickle
    left the year's last night waiting 10 minutes on its queue) is reported when it is gone, not at the timeout."""
    import multiprocessing
    import os

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=os._exit, args=(3,))
    child.start()
    with pytest.raises(RuntimeError, match="exit code 3"):
        b16_year.child_result(child, results, timeout=600)
