"""Check-report rows (txn_check_reports): the reports write-audit-publish check steps recorded on a
transaction, one insert each, read back in the order recorded; vacuum drops those of transactions whose row
it purged. What a report holds and who may record one is core/check_reports.py's business."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, delete, exists, insert, select

from airflow_txn.catalog import schema

_cr = schema.check_reports.c
_BATCH = 500
_t = schema.transactions.c


@dataclass(frozen=True, slots=True)
class ReportRow:
    key: str
    recorded_at: float
    report: dict[str, object]


def add(conn: Connection, tid: str, key: str, recorded_at: float, report_json: str) -> None:
    """Append one report (never reads or rewrites another: steps recording at once keep theirs)."""
    conn.execute(insert(schema.check_reports).values(tid=tid, key=key, recorded_at=recorded_at,
                                                     report_json=report_json))


def of_transaction(conn: Connection, tid: str) -> list[ReportRow]:
    """The reports recorded on `tid`, oldest first."""
    return of_transactions(conn, [tid]).get(tid, [])


def of_transactions(conn: Connection, tids: Sequence[str]) -> dict[str, list[ReportRow]]:
    """{tid: its reports, oldest first} of those of `tids` with any (a listing's transactions)."""
    found: dict[str, list[ReportRow]] = {}
    wanted = sorted(set(tids))
    for start in range(0, len(wanted), _BATCH):
        stmt = (select(_cr.tid, _cr.key, _cr.recorded_at, _cr.report_json)
                .where(_cr.tid.in_(wanted[start:start + _BATCH])).order_by(_cr.id))
        for r in conn.execute(stmt):
            found.setdefault(str(r.tid), []).append(
                ReportRow(key=str(r.key), recorded_at=float(r.recorded_at), report=dict(json.loads(r.report_json))))
    return found


# -- history vacuum may purge (core/vacuum.py) ----------------------------------------------------------
def of_purged_transactions() -> Select[Any]:
    """Transactions with reports whose own row is gone (vacuum purged it: nothing can show them now)."""
    return select(_cr.tid).where(~exists(select(_t.tid).where(_t.tid == _cr.tid))).distinct()


def forget(conn: Connection, tids: list[str]) -> int:
    """Drop the reports of these transactions if their rows are gone (vacuum); returns the rows deleted."""
    gone = ~exists(select(_t.tid).where(_t.tid == _cr.tid))
    return int(conn.execute(delete(schema.check_reports).where(_cr.tid.in_(tids), gone)).rowcount)
