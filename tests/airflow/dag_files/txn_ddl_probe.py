"""txn_ddl_probe: a transaction group that changes two tables and reloads days under the new schema, committed
together (docs/AIRFLOW.md, "Changing tables in a run"; the same DAG as its example, on probe tables and a param).

    days ─► ddl.begin ─► ddl.add_discount ─► ddl.reload_day[0..n] ─► ddl.commit ─► ...

`add_discount` adds the nullable column `discount` to probe.orders and probe.order_items (@task.txn: DDL is a
statement like any other, keyed by the task and its try number); each `reload_day` overwrites one day of both tables
with rows that fill it. Params: `days` (the days reloaded), `fail_tries` (how many tries of add_discount raise AFTER
changing the tables: 1 shows the retry replacing the failed try's DDL, 2 exhausts the retries and rolls back).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from airflow.sdk import DAG, Param, task

from airflow_txn.airflow import transaction_group

ORDERS, ITEMS = "probe.orders", "probe.order_items"
DISCOUNT = pa.field("discount", pa.float64())


class InjectedFailure(RuntimeError):
    """The failure the probe raises on purpose."""


@task
def days(params: dict[str, Any]) -> list[str]:
    return list(params["days"])


@task.txn(retries=1, retry_delay=dt.timedelta(seconds=0))
def add_discount(txn: Any, ti: Any, params: dict[str, Any]) -> None:
    for table in (ORDERS, ITEMS):
        txn.add_column(table, DISCOUNT)
    if ti.try_number <= int(params["fail_tries"]):
        raise InjectedFailure(f"injected failure of add_discount, try {ti.try_number}, after changing both tables")


@task.txn(map_index_template="{{ task.op_kwargs['day'] }}")
def reload_day(txn: Any, day: str) -> int:
    orders = pa.table({"order_id": pa.array([1, 2], pa.int64()), "day": [day] * 2, "amount": [10.0, 20.0],
                       "discount": [0.5, 1.0]})
    items = pa.table({"order_id": pa.array([1, 1, 2], pa.int64()), "item": pa.array([1, 2, 1], pa.int64()),
                      "day": [day] * 3, "discount": [0.25, 0.25, 1.0]})
    txn.overwrite(ORDERS, orders, partitions=[{"day": day}])
    txn.overwrite(ITEMS, items, partitions=[{"day": day}])
    return orders.num_rows + items.num_rows


with DAG("txn_ddl_probe", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False,
         params={"days": Param(["2024-01-02", "2024-01-03"], type="array"), "fail_tries": Param(0, type="integer")}):
    planned = days()
    with transaction_group("ddl"):
        add_discount() >> reload_day.expand(day=planned)
