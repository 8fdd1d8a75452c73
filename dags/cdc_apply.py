"""cdc_apply: apply one day of change-data-capture (CDC) records to a dimension and its fact table with MERGE,
both in ONE transaction: a reader sees the day's customer changes and order changes together, or neither.

    create_tables ─► apply[ begin ─► merge_customers ─┐
                                 ─► merge_orders    ─┴─► check ─► commit ─► rollback ─► outcome ]
                  ─► wait_for_commit ─► summary

A change record is `(op, seq, <the row>)`: `op` is "insert", "update" or "delete", `seq` the source's sequence
number (its log position). A day's batch may change one key several times (a customer created, then moved; an
order placed, then paid): each merge task first keeps only the LAST change of every key (highest `seq`), since
a MERGE refuses a source holding a key twice (which row would win?). Then:

- `merge_customers` (`sales.customers`, the dimension, keyed by `customer_id`): the inserted and updated keys in
  one MERGE whose `when_matched` is an expression, so a change older than what the row already holds (its
  `last_seq`) never overwrites it: re-applying a day changes nothing; the deleted keys in a second MERGE with
  `when_matched="delete"`, `when_not_matched="ignore"`.
- `merge_orders` (`sales.orders`, the fact, partitioned by `day`, keyed by `day` + `order_id`): the day's new
  orders, late orders and corrections of earlier days (they land in those days' partitions) upserted, cancelled
  orders deleted. The key covers the partition column, so only the partitions the batch names are rewritten.

Both merge in the group's transaction (`@task.txn`, pyarrow, no Spark), each under its task's staging key: a
retried task replaces its failed try's merge instead of merging twice. Write-audit-publish: the group's `check`
task checks the transaction's own view before the commit (every order's customer exists, keys unique, amounts
non-negative); a failure rolls BOTH tables back. The commit makes both tables' changes visible at ONE CSN and
emits one Asset event per table; `wait_for_commit` (CommitCSNSensor) waits for that CSN and `summary` reads
both tables at exactly that snapshot.

The batch is generated (`customer_changes`, `order_changes`: deterministic, a few rows per day); read your
own from the CDC tool's landing files the same way (`pyarrow.parquet.read_table`), or from Spark with
`airflow_txn.spark.merge(df, txn, table, on=...)`.

Params: `day` (the day of changes to apply), `bad_batch` ("orphan_order": an order of a customer that does not
exist, caught by the check; "duplicate_change": two changes of one customer with the same `seq`, refused by the
MERGE), `fail_task` ("merge_customers" or "merge_orders": it raises after merging, on its first `fail_tries`
tries, to show a retry and a rollback).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from airflow.sdk import DAG, Param, task

from airflow_txn.airflow import TxnHook, transaction_group
from airflow_txn.checks import PredicateCheck, ReferenceCheck, UniqueCheck
from airflow_txn.sensors import CommitCSNSensor

CONN_ID = "airflow_txn_default"
CUSTOMERS_TABLE, ORDERS_TABLE = "sales.customers", "sales.orders"
TABLES = [CUSTOMERS_TABLE, ORDERS_TABLE]
CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("city", pa.string()),
                       ("last_seq", pa.int64())])
ORDERS = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("amount", pa.float64()),
                    ("status", pa.string()), ("day", pa.date32())])
CUSTOMER_CHANGES = pa.schema([("op", pa.string()), ("seq", pa.int64()), ("customer_id", pa.int64()),
                              ("name", pa.string()), ("city", pa.string())])
ORDER_CHANGES = pa.schema([("op", pa.string()), ("seq", pa.int64()), ("order_id", pa.int64()),
                           ("customer_id", pa.int64()), ("amount", pa.float64()), ("status", pa.string()),
                           ("day", pa.date32())])
OPS = ("insert", "update", "delete")
CHECKS = [
    ReferenceCheck(ORDERS_TABLE, "customer_id", CUSTOMERS_TABLE, name="every order has its customer"),
    UniqueCheck(CUSTOMERS_TABLE, "customer_id"),
    UniqueCheck(ORDERS_TABLE, "order_id"),
    PredicateCheck(ORDERS_TABLE, "amount >= 0", name="no negative amount"),
]
BAD_BATCHES = ("orphan_order", "duplicate_change")
CITIES = ("Lyon", "Porto", "Turin", "Ghent", "Graz")
EPOCH = dt.date(2020, 1, 1)


class InjectedFailure(RuntimeError):
    """Raised on purpose by the `fail_task` param."""


class BadBatchError(ValueError):
    """A CDC batch that cannot be applied (an unknown op)."""


# -- the day's change batch (generated: deterministic, a few rows) -------------------------------------------------

def customer_changes(day: str, bad_batch: str = "") -> pa.Table:
    """The day's customer changes. Day n creates customers n*100+0..4 and, within the same day, moves customer
    +0 and deletes customer +4 again; it renames the previous day's customer +0 and deletes its customer +3 (who
    has no orders)."""
    d = dt.date.fromisoformat(day)
    base, prev = (d - EPOCH).days * 100, (d - EPOCH).days * 100 - 100
    rows: list[tuple[str, int, str | None, str | None]] = [
        *(("insert", base + k, f"customer-{base + k}", CITIES[k]) for k in range(5)),
        ("update", base, f"customer-{base}", "Oslo"),  # moved the same day: only this change is applied
        ("update", prev, f"customer-{prev} ({day})", CITIES[0]),  # a change to an earlier customer
        ("delete", base + 4, None, None),  # created and deleted the same day: never appears
        ("delete", prev + 3, None, None),
    ]
    if bad_batch == "duplicate_change":  # a second change of customer +1 at the same seq: which one is last?
        rows.append(("update", base + 1, f"customer-{base + 1}", "Nowhere"))
    seq0 = (d - EPOCH).days * 1000
    seqs = [seq0 + i for i in range(len(rows))]
    if bad_batch == "duplicate_change":
        seqs[-1] = seqs[1]
    return pa.table({"op": [r[0] for r in rows], "seq": seqs, "customer_id": [r[1] for r in rows],
                     "name": [r[2] for r in rows], "city": [r[3] for r in rows]}, schema=CUSTOMER_CHANGES)


def order_changes(day: str, bad_batch: str = "") -> pa.Table:
    """The day's order changes: two orders of each of the day's customers +0..+2 (order id = customer * 10 + j),
    order +0/0 paid later that day; for the previous day, a corrected amount, a late order and a cancellation."""
    d = dt.date.fromisoformat(day)
    base, prev, yesterday = (d - EPOCH).days * 100, (d - EPOCH).days * 100 - 100, d - dt.timedelta(days=1)
    rows: list[tuple[str, int, int, float, str, dt.date]] = [
        *(("insert", (base + k) * 10 + j, base + k, 10.0 * (k + 1) + j, "placed", d)
          for k in range(3) for j in range(2)),
        ("update", base * 10, base, 12.5, "paid", d),  # the same order, later that day
        ("update", prev * 10, prev, 9.5, "corrected", yesterday),  # a correction of yesterday's order
        ("insert", prev * 10 + 5, prev, 7.0, "placed", yesterday),  # a late order of yesterday
        ("delete", (prev + 1) * 10 + 1, prev + 1, 0.0, "cancelled", yesterday),
    ]
    if bad_batch == "orphan_order":
        rows.append(("insert", 10**12 + base, -1, 1.0, "placed", d))  # customer -1 does not exist
    seq0 = (d - EPOCH).days * 1000
    return pa.table({"op": [r[0] for r in rows], "seq": [seq0 + i for i in range(len(rows))],
                     "order_id": [r[1] for r in rows], "customer_id": [r[2] for r in rows],
                     "amount": [r[3] for r in rows], "status": [r[4] for r in rows], "day": [r[5] for r in rows]},
                    schema=ORDER_CHANGES)


# -- applying a batch ----------------------------------------------------------------------------------------------

def last_changes(changes: pa.Table, key: list[str]) -> pa.Table:
    """Every key's last change (highest `seq`), ordered by `seq`. Two changes of one key at the same `seq` both
    stay: the MERGE then refuses the key (nothing says which is last)."""
    unknown = sorted(set(changes.column("op").to_pylist()) - set(OPS))
    if unknown:
        raise BadBatchError(f"unknown op(s) {unknown} in the CDC batch (expected one of {list(OPS)})")
    latest = changes.group_by(key).aggregate([("seq", "max")])
    joined = changes.join(latest, keys=key, join_type="inner")
    last = joined.filter(pc.equal(joined["seq"], joined["seq_max"])).drop_columns(["seq_max"])
    return last.sort_by("seq").select(changes.column_names)


def split(changes: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(the upserts: inserts and updates, the deletes) of a reduced batch."""
    deleted = pc.equal(changes["op"], "delete")
    return changes.filter(pc.invert(deleted)), changes.filter(deleted)


def newer_wins(columns: list[str]) -> dict[str, pc.Expression]:
    """`when_matched` of the customer upserts: each column from the change only when the change is newer than
    what the row holds (`source.seq > last_seq`, or the row has no `last_seq`); else the row keeps its value."""
    newer = pc.or_kleene(pc.is_null(pc.field("last_seq")),
                         pc.greater(pc.field("source", "last_seq"), pc.field("last_seq")))
    return {c: pc.if_else(newer, pc.field("source", c), pc.field(c)) for c in columns}


def apply_customers(txn: Any, changes: pa.Table) -> dict[str, int]:
    upserts, deletes = split(last_changes(changes, ["customer_id"]))
    rows = upserts.rename_columns({"seq": "last_seq"}).select(CUSTOMERS.names).cast(CUSTOMERS)
    upserted = txn.merge(CUSTOMERS_TABLE, rows, on=["customer_id"],
                         when_matched=newer_wins(["name", "city", "last_seq"]), when_not_matched="insert")
    removed = txn.merge(CUSTOMERS_TABLE, deletes.select(["customer_id"]), on=["customer_id"],
                        when_matched="delete", when_not_matched="ignore")
    return {"changes": changes.num_rows, "inserted": upserted["inserted"], "updated": upserted["updated"],
            "deleted": removed["deleted"]}


def apply_orders(txn: Any, changes: pa.Table) -> dict[str, int]:
    upserts, deletes = split(last_changes(changes, ["order_id"]))
    upserted = txn.merge(ORDERS_TABLE, upserts.select(ORDERS.names), on=["day", "order_id"])
    removed = txn.merge(ORDERS_TABLE, deletes.select(["day", "order_id"]), on=["day", "order_id"],
                        when_matched="delete", when_not_matched="ignore")
    return {"changes": changes.num_rows, "inserted": upserted["inserted"], "updated": upserted["updated"],
            "deleted": removed["deleted"]}


def _applied(result: dict[str, int], ti: Any, params: dict[str, Any]) -> dict[str, int]:
    """The task's result; first raises the `fail_task` param's injected failure, after the merges staged."""
    short = ti.task_id.rsplit(".", 1)[-1]
    if params.get("fail_task") == short and ti.try_number <= int(params["fail_tries"]):
        raise InjectedFailure(f"injected failure of {short}, try {ti.try_number}, after merging {result}")
    return result


def _refused(what: str, exc: Exception) -> Exception:
    """A batch the MERGE refused fails the task for good: a retry would merge the same batch again."""
    from airflow_txn.airflow.version_compat import AirflowFailException

    return AirflowFailException(f"the CDC batch of {what} cannot be applied: {exc}")


@task
def create_tables() -> list[str]:
    with TxnHook(conn_id=CONN_ID).warehouse() as wh:
        wh.create_table(CUSTOMERS_TABLE, CUSTOMERS, exist_ok=True)
        wh.create_table(ORDERS_TABLE, ORDERS, partition_by=["day"], exist_ok=True)
        return wh.tables()


@task.txn(conn_id=CONN_ID)
def merge_customers(txn: Any, ti: Any, params: dict[str, Any]) -> dict[str, int]:
    """The day's customer changes, reduced to each key's last, merged into sales.customers."""
    from airflow_txn.errors import SchemaMismatchError

    try:
        result = apply_customers(txn, customer_changes(str(params["day"]), str(params["bad_batch"] or "")))
    except (SchemaMismatchError, BadBatchError) as exc:
        raise _refused(CUSTOMERS_TABLE, exc) from exc
    return _applied(result, ti, params)


@task.txn(conn_id=CONN_ID)
def merge_orders(txn: Any, ti: Any, params: dict[str, Any]) -> dict[str, int]:
    """The day's order changes (new, late, corrected, cancelled), reduced to each key's last, merged into
    sales.orders."""
    from airflow_txn.errors import SchemaMismatchError

    try:
        result = apply_orders(txn, order_changes(str(params["day"]), str(params["bad_batch"] or "")))
    except (SchemaMismatchError, BadBatchError) as exc:
        raise _refused(ORDERS_TABLE, exc) from exc
    return _applied(result, ti, params)


@task.txn_read(tables=TABLES, frames="arrow")
def summary(customers: pa.Table, orders: pa.Table, csn: int) -> dict[str, Any]:
    """Both tables at the commit's CSN: one consistent state of the dimension and its facts."""
    days = orders.group_by("day").aggregate([("order_id", "count")]).sort_by("day")
    result = {"csn": csn, "customers": customers.num_rows, "orders": orders.num_rows,
              "orders_per_day": {str(d): n for d, n in zip(days["day"].to_pylist(),
                                                           days["order_id_count"].to_pylist(), strict=True)}}
    print(f"after CSN {csn}: {result}")
    return result


with DAG(
    dag_id="cdc_apply",
    description="Apply a day of CDC to a dimension and its fact table with MERGE, as ONE transaction",
    schedule=None,
    start_date=dt.datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["airflow_txn", "example"],
    params={
        "day": Param("2024-01-01", type="string", format="date"),
        "bad_batch": Param("", type="string", enum=["", *BAD_BATCHES]),
        "fail_task": Param("", type="string", enum=["", "merge_customers", "merge_orders"]),
        "fail_tries": Param(99, type="integer", minimum=1),
    },
    default_args={"retries": 1, "retry_delay": dt.timedelta(seconds=2)},
    doc_md=__doc__,
) as dag:
    with transaction_group("apply", conn_id=CONN_ID, tables=TABLES, checks=CHECKS) as apply:
        merge_customers()
        merge_orders()
    wait = CommitCSNSensor(task_id="wait_for_commit", csn=apply.csn, tables=TABLES, conn_id=CONN_ID,
                           poke_interval=1, timeout=600)
    create_tables() >> apply >> wait >> summary(csn=wait.output)
