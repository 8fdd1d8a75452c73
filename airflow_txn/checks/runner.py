"""Running checks against a transaction's own view and recording what they found.

    report = run_checks(txn, [ReferenceCheck("shop.orders", "customer_id", "shop.customers")])
    record(txn, report, "audit")        # appended to the transaction's check reports under "audit"
    if not report["passed"]:
        txn.rollback(reason=failure_reason(report))

Every check is checked against the catalog before any query runs (a missing table or column names the
check). An engine (Engine) turns the tables the checks read into views over the transaction's view
(its snapshot plus its staged parts) and runs each check's query: DuckDB over the transaction's
manifest (duckdb_engine.py, the default) or Spark (airflow_txn.spark.checks.SparkEngine).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from typing_extensions import TypedDict

from airflow_txn.checks.definitions import Check, check_list
from airflow_txn.errors import CheckError, SchemaMismatchError, TableNotFoundError, TxnError

if TYPE_CHECKING:
    from airflow_txn.core.transaction import Transaction


class CheckResult(TypedDict):
    """One check's outcome: the number it measured and the bounds it had to lie within."""

    name: str
    kind: str
    tables: list[str]
    value: int
    min: int | None
    max: int | None
    passed: bool


class CheckReport(TypedDict):
    """What run_checks found: every check's result, the engine, and the view checked."""

    passed: bool
    engine: str
    tid: str
    snapshot_csn: int
    checked_at: float
    checks: list[CheckResult]


class Engine(Protocol):
    """What evaluates checks: views of the transaction's tables, and a query returning one number."""

    name: str

    def quote(self, identifier: str) -> str:
        """An identifier (column or view name) quoted for this engine's SQL."""

    def views(self, txn: Transaction, views: Mapping[str, str]) -> AbstractContextManager[Callable[[str], object]]:
        """Inside: {table: view name} are views of `txn`'s view of each table; the function runs a
        query and returns its single value."""


def check_against_schemas(txn: Transaction, checks: Sequence[Check]) -> None:
    """Every table and column a check names exists (TableNotFoundError / SchemaMismatchError naming the check)."""
    schemas = {}
    for check in checks:
        for table, columns in check.columns_read().items():
            if table not in schemas:
                try:
                    schemas[table] = txn.schema(table)
                except TableNotFoundError as exc:
                    raise TableNotFoundError(f"check {check.label}: {exc}") from exc
            missing = [c for c in columns if c not in schemas[table].names]
            if missing:
                raise SchemaMismatchError(f"check {check.label}: {table} has no column {', '.join(missing)} "
                                          f"(its columns: {', '.join(schemas[table].names)})")


def view_names(checks: Sequence[Check]) -> dict[str, str]:
    """{table: view name} of every table the checks read (`shop.orders` -> `shop__orders`)."""
    tables = sorted({t for c in checks for t in c.tables})
    return {t: t.replace(".", "__") for t in tables}


def run_checks(txn: Transaction, checks: Sequence[Check], engine: Engine | None = None) -> CheckReport:
    """Evaluate `checks` against `txn`'s own view of their tables with `engine` (default: DuckDB over the
    transaction's manifest). Refuses bad checks before any query (InvalidArgumentError, TableNotFoundError,
    SchemaMismatchError, each naming the check); a query the engine cannot run raises CheckError naming the check."""
    checked = check_list(checks)
    check_against_schemas(txn, checked)
    if engine is None:
        from airflow_txn.checks.duckdb_engine import DuckDBEngine

        engine = DuckDBEngine()
    views = view_names(checked)
    results = []
    with engine.views(txn, views) as query:
        for check in checked:
            sql = check.sql(views, engine.quote)
            try:
                value = query(sql)
            except TxnError:
                raise
            except Exception as exc:  # the engine's own error (DuckDB's, Spark's): the check's SQL
                raise CheckError(f"check {check.label} could not run on {engine.name} ({sql}): {exc}") from exc
            number = int(value) if isinstance(value, int | float) else 0 if value is None else int(str(value))
            results.append(CheckResult(name=check.label, kind=check.kind, tables=list(check.tables), value=number,
                                       min=check.min, max=check.max, passed=check.holds(number)))
    return CheckReport(passed=all(r["passed"] for r in results), engine=engine.name, tid=txn.tid,
                       snapshot_csn=txn.snapshot_csn, checked_at=time.time(), checks=results)


def bounds_text(result: CheckResult) -> str:
    """The bounds as a report shows them: `0..0`, `1..`, `..10`."""
    low, high = result["min"], result["max"]
    return f"{'' if low is None else low}..{'' if high is None else high}"


def format_report(report: CheckReport) -> str:
    """One line per check: `passed|FAILED  name: value (bounds lo..hi)`."""
    lines = [f"{'passed' if r['passed'] else 'FAILED'}  {r['name']}: {r['value']} (bounds {bounds_text(r)})"
             for r in report["checks"]]
    return "\n".join(lines)


def failure_reason(report: CheckReport, who: str = "checks") -> str:
    """Why a transaction whose checks failed rolls back: the failed checks with value and bounds."""
    failed = [f"{r['name']} = {r['value']} (bounds {bounds_text(r)})" for r in report["checks"] if not r["passed"]]
    return f"{who} failed: " + "; ".join(failed)


def record(txn: Transaction, report: CheckReport, key: str) -> None:
    """Record `report` on the transaction under `key` (the check step): one row appended to the catalog, so
    check steps of one transaction recording at once each keep theirs. `Warehouse.check_reports(tid)` lists
    them in the order recorded; `transaction_info(tid)["metadata"]["checks"]` shows {key: newest report}
    (the Transactions page and `airflow-txn show` read it there)."""
    txn.record_check(key, dict(report))
