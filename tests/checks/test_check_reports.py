"""Check reports are records of their own (issue 30, item 3, catalog schema version 6): each `record(...)` is one
insert into txn_check_reports, so check tasks of one transaction recording at once all keep their reports;
they read back in the order recorded (in `transaction_info()["metadata"]["checks"]`, as before, and
`Warehouse.check_reports`), reports an older airflow_txn kept in the transaction's metadata stay readable,
and vacuum purges a transaction's reports with its row."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import func, select

from airflow_txn import Transaction, Warehouse
from airflow_txn.catalog import Catalog, migrate, schema, txn_records
from airflow_txn.checks import RowCountCheck, record, run_checks
from airflow_txn.errors import InvalidArgumentError, TransactionClosedError
from tests.catalog.test_clocks import clock_off_by
from tests.core.test_vacuum_history import LATER
from tests.helpers import events, make_tables

RECORDERS = 6
TID = "1-1-0123456789abcdef"


def _report(txn: Transaction, rows: int) -> Any:
    return run_checks(txn, [RowCountCheck("sales.events", min=rows)])


def test_check_tasks_recording_at_once_all_keep_their_reports(wh: Warehouse, open_wh: Callable[[], Warehouse],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Each recorder has its own warehouse handle (as a task process has). The window an older read-modify-write
    of metadata["checks"] had between its read and its write is held open until every recorder has read:
    with appended records there is no such window, and every report is kept."""
    make_tables(wh)
    txn = wh.begin()
    txn.append("sales.events", events([1, 2]))
    report = _report(txn, 1)
    everyone_read = threading.Barrier(RECORDERS)
    annotate = Transaction.annotate

    def widened(self: Transaction, metadata: Any) -> Any:
        merged = annotate(self, metadata)
        if not metadata:  # a read of the metadata as it stands: wait for the other recorders' reads
            with contextlib.suppress(threading.BrokenBarrierError):
                everyone_read.wait(timeout=10)
        return merged

    monkeypatch.setattr(Transaction, "annotate", widened)
    handles = [open_wh() for _ in range(RECORDERS)]

    def recorder(index: int) -> None:
        record(handles[index].attach(txn.tid), report, f"check_{index}")

    with ThreadPoolExecutor(RECORDERS) as pool:
        list(pool.map(recorder, range(RECORDERS)))
    kept = wh.transaction_info(txn.tid)["metadata"]["checks"]
    assert sorted(kept) == [f"check_{i}" for i in range(RECORDERS)]
    assert all(r == report for r in kept.values())
    assert len(wh.check_reports(txn.tid)) == RECORDERS


def test_reports_read_back_in_the_order_recorded_beside_older_ones_in_metadata(wh: Warehouse) -> None:
    make_tables(wh)
    txn = wh.begin()
    txn.append("sales.events", events([1]))
    older = dict(_report(txn, 5))
    txn.annotate({"checks": {"legacy": older}, "who": "me"})  # as an older airflow_txn recorded them
    first, second = _report(txn, 1), _report(txn, 2)
    record(txn, first, "zeta")
    record(txn, second, "alpha")
    record(txn, second, "zeta")  # a retried check task: its newest report is the one shown
    info = wh.transaction_info(txn.tid)
    assert list(info["metadata"]["checks"]) == ["legacy", "zeta", "alpha"]
    assert info["metadata"]["checks"] == {"legacy": older, "zeta": second, "alpha": second}
    assert info["metadata"]["who"] == "me"
    shown = wh.check_reports(txn.tid)
    assert [(r["key"], r["report"]) for r in shown] == [("legacy", older), ("zeta", first), ("alpha", second),
                                                         ("zeta", second)]
    assert shown[0]["recorded_at"] is None and all(r["recorded_at"] is not None for r in shown[1:])
    assert txn.annotate({})["checks"] == {"legacy": older}  # the metadata itself is left as it was
    [listed] = [t for t in wh.transactions() if t["tid"] == txn.tid]  # every reader of the metadata shows them
    assert listed["metadata"] == info["metadata"]
    csn = txn.commit()
    [logged] = [c for c in wh.commits_after(csn - 1) if c["tid"] == txn.tid]
    assert logged["metadata"] == info["metadata"]


def test_bad_reports_are_refused_and_an_ended_transaction_takes_none(wh: Warehouse) -> None:
    make_tables(wh)
    txn = wh.begin()
    report = _report(txn, 0)
    for key in ("", 7, "x" * 1001):
        with pytest.raises(InvalidArgumentError, match="key"):
            record(txn, report, key)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        record(txn, {"value": float("nan")}, "nan")  # type: ignore[arg-type]
    assert wh.check_reports(txn.tid) == []
    txn.commit()
    with pytest.raises(TransactionClosedError):
        record(txn, report, "late")
    assert wh.check_reports(txn.tid) == []


def _report_rows(wh: Warehouse) -> int:
    with wh.runtime.catalog.read() as conn:
        return int(conn.execute(select(func.count()).select_from(schema.check_reports)).scalar_one())


def test_vacuum_purges_a_transactions_reports_with_its_row(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tables(wh)
    txn = wh.begin()
    record(txn, _report(txn, 0), "audit")
    record(txn, _report(txn, 0), "again")
    txn.rollback(reason="checks failed")
    kept = wh.begin()
    record(kept, _report(kept, 0), "audit")  # an open transaction: kept
    assert wh.vacuum(retention_seconds=0)["rows_purged"]["check_reports"] == 0  # inside the history window
    with clock_off_by(monkeypatch, LATER):
        purged = wh.vacuum(retention_seconds=0)["rows_purged"]
    assert (purged["transactions"], purged["check_reports"]) == (1, 2)
    assert _report_rows(wh) == 1 and [r["key"] for r in wh.check_reports(kept.tid)] == ["audit"]


def test_a_schema_version_5_catalog_keeps_the_reports_its_metadata_holds(catalog_url: str, tmp_path: Path) -> None:
    """A catalog Alembic left at schema_v5 with a transaction whose metadata holds a report (as airflow_txn
    kept them then): opening it with upgrade=True runs schema_v6; the older report stays readable, first, beside
    new ones."""
    from alembic import command

    older = {"passed": True, "checks": []}
    catalog = Catalog(catalog_url)
    with catalog.engine.begin() as conn:
        command.upgrade(migrate.config(conn), "schema_v5")
        assert not sa.inspect(conn).has_table("txn_check_reports")
        txn_records.insert_row(conn, TID, None, "snapshot", 1, 3600.0,
                               json.dumps({"checks": {"audit": older}, "who": "me"}))
    catalog.dispose()
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"), upgrade=True) as wh:
        with wh.runtime.catalog.read() as conn:
            assert migrate.read_versions(conn).revision == migrate.HEAD == "indexes_v3"
        txn = wh.attach(TID)
        record(txn, {"passed": False, "checks": []}, "recheck")  # type: ignore[typeddict-item]
        assert wh.transaction_info(TID)["metadata"] == {
            "checks": {"audit": older, "recheck": {"passed": False, "checks": []}}, "who": "me"}
        assert [r["key"] for r in wh.check_reports(TID)] == ["audit", "recheck"]
