"""Write-audit-publish checks (airflow_txn.checks) against a transaction's own view: its snapshot plus its
staged writes and removals, never a commit made after its snapshot; the DuckDB engine reads the files of
Transaction.manifest (through the core into Arrow on an object-store root); bad checks are refused when
built, or before any query when the catalog lacks what they name."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn import Transaction, Warehouse
from airflow_txn.checks import (
    Check,
    NullCheck,
    PredicateCheck,
    ReferenceCheck,
    RowCountCheck,
    UniqueCheck,
    check_list,
    failure_reason,
    record,
    run_checks,
)
from airflow_txn.errors import CheckError, InvalidArgumentError, InvalidNameError, SchemaMismatchError, TxnError
from tests.helpers import EVENTS, accounts, events, make_tables

CHECKS = [
    RowCountCheck("sales.events", min=1, max=5),
    RowCountCheck("sales.accounts", min=2),
    NullCheck("sales.events", "value"),
    UniqueCheck("sales.events", "id"),
    PredicateCheck("sales.events", "value >= 0", max=3),
    PredicateCheck("sales.events", "day <> '2024-01-09'", name="no event on the 9th"),
    ReferenceCheck("sales.events", "id", "sales.accounts"),
]
EXPECTED = [  # (name, value, passed): what the transaction's own view holds
    ("row_count(sales.events)", 5, True),       # 2 committed + 3 staged
    ("row_count(sales.accounts)", 1, False),    # id 2 deleted in the transaction, id 3 committed after its snapshot
    ("nulls(sales.events.value)", 1, False),
    ("unique(sales.events: id)", 1, False),     # id 3 staged twice
    ("predicate(sales.events: value >= 0)", 2, True),
    ("no event on the 9th", 1, False),          # a partition column, restored from the catalog
    ("references(sales.events: id -> sales.accounts)", 4, False),  # ids 2, 3, 3 and 9 have no account
]


def audited(wh: Warehouse) -> Transaction:
    """A transaction whose view differs from every committed snapshot (EXPECTED says what it holds)."""
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.accounts", accounts({1: 10, 2: 20}))
        t.append("sales.events", events([1, 2]))
    txn = wh.begin()
    with wh.begin() as later:  # committed after txn's snapshot: txn must not see it
        later.append("sales.accounts", accounts({3: 30}))
    staged = pa.table({"id": [3, 3, 9], "day": ["2024-01-02", "2024-01-09", "2024-01-02"],
                       "value": [-1.0, None, -2.0]}, schema=EVENTS)
    txn.append("sales.events", staged)
    txn.delete("sales.accounts", pc.field("id") == 2)
    return txn


def results(report: dict[str, object]) -> list[tuple[object, object, object]]:
    return [(r["name"], r["value"], r["passed"]) for r in report["checks"]]  # type: ignore[attr-defined]


def test_checks_see_the_transactions_own_view_and_are_recorded_on_it(wh: Warehouse) -> None:
    txn = audited(wh)
    report = run_checks(txn, CHECKS)
    assert results(report) == EXPECTED  # type: ignore[arg-type]
    assert not report["passed"] and report["engine"] == "duckdb"
    assert (report["tid"], report["snapshot_csn"]) == (txn.tid, txn.snapshot_csn)
    assert failure_reason(report).startswith("checks failed: row_count(sales.accounts) = 1 (bounds 2..); ")
    record(txn, report, "audit")
    record(txn, run_checks(txn, CHECKS[:1]), "second")  # a second check step keeps the first one's
    assert set(wh.transaction_info(txn.tid)["metadata"]["checks"]) == {"audit", "second"}
    assert wh.transaction_info(txn.tid)["metadata"]["checks"]["audit"] == report
    assert wh.read("sales.events").num_rows == 2  # nothing of it is visible outside the transaction


def test_the_manifest_of_a_transactions_view_lists_its_staged_files(wh: Warehouse) -> None:
    txn = audited(wh)
    view = txn.manifest(["sales.events", "sales.accounts"])
    assert sorted(view) == ["sales.accounts", "sales.events"]
    events_view = view["sales.events"]
    assert (events_view["tid"], events_view["csn"], events_view["row_count"]) == (txn.tid, txn.snapshot_csn, 5)
    assert sorted(p["creation_tid"] == txn.tid for p in events_view["parts"]) == [False, True, True]
    assert view["sales.accounts"]["row_count"] == 1  # the delete rewrote its part: the rewrite is listed
    assert sorted(txn.manifest()) == sorted(wh.tables())
    with pytest.raises(InvalidNameError, match="list of table names"):
        txn.manifest("sales.events")  # type: ignore[arg-type]
    txn.rollback()
    with pytest.raises(TxnError):
        txn.manifest(["sales.events"])


BAD: list[tuple[Callable[[], object], type[Exception], str]] = [
    (lambda: RowCountCheck("sales.events"), InvalidArgumentError, r"row_count\(sales.events\): give min or max"),
    (lambda: RowCountCheck("events", min=1), InvalidNameError, r"check row_count\(events\): invalid table name"),
    (lambda: RowCountCheck("sales.events", min=3, max=2), InvalidArgumentError, "min 3 is above max 2"),
    (lambda: NullCheck("sales.events", "value", max=-1), InvalidArgumentError, "max must be a non-negative"),
    (lambda: UniqueCheck("sales.events", [], name="ids"), InvalidArgumentError, "check ids: columns must be"),
    (lambda: PredicateCheck("sales.events", "1=1; DROP TABLE x"), InvalidArgumentError, "without ';'"),
    (lambda: ReferenceCheck("sales.events", ["id", "day"], "sales.accounts", "id"), InvalidArgumentError,
     "differ in length"),
    (lambda: check_list([{"table": "sales.events"}]), InvalidArgumentError, r"checks\[0\] is .* not a check"),
    (lambda: check_list([Check("sales.events")]), InvalidArgumentError, r"checks\[0\] is Check\(.* not a check"),
    (lambda: check_list([NullCheck("sales.events", "id"), NullCheck("sales.events", "id")]), InvalidArgumentError,
     r"two checks are named 'nulls\(sales.events.id\)'"),
]


@pytest.mark.parametrize(("build", "error", "message"), BAD)
def test_a_bad_check_is_refused_when_built(build: Callable[[], object], error: type[Exception],
                                           message: str) -> None:
    with pytest.raises(error, match=message):
        build()


@pytest.mark.parametrize(("check", "error", "message"), [
    (NullCheck("sales.events", "nope"), SchemaMismatchError, r"check nulls\(sales.events.nope\): .* no column nope"),
    (RowCountCheck("sales.nope", min=1), TxnError, r"check row_count\(sales.nope\): table sales.nope does not"),
    (PredicateCheck("sales.events", "nope > 1", name="p"), CheckError, "check p could not run on duckdb"),
])
def test_a_check_the_catalog_cannot_answer_is_refused(wh: Warehouse, check: Check, error: type[Exception],
                                                      message: str) -> None:
    make_tables(wh)
    txn = wh.begin()
    with pytest.raises(error, match=message):
        run_checks(txn, [RowCountCheck("sales.events", min=0), check])
    assert txn.state == "active"  # a refused check changes nothing


def test_checks_read_parts_written_under_an_older_schema_by_column_id(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2], value=5.0))
    txn = wh.begin()
    txn.rename_column("sales.events", "value", "amount")
    txn.add_column("sales.events", pa.field("qty", pa.int64()), default=3)
    report = run_checks(txn, [NullCheck("sales.events", "amount"), PredicateCheck("sales.events", "qty = 3"),
                              PredicateCheck("sales.events", "amount = 5")])
    assert report["passed"], report
    txn.rollback()
