"""What the Iceberg and the Delta publishing tests share: the orders table, its rows, and one history of commits
that exercises every kind of change a published snapshot or version must carry."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn import Warehouse
from airflow_txn.core.transaction import Transaction
from tests.helpers import EVENTS, accounts, events, make_tables

ORDERS = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("shop", pa.int32()), ("amount", pa.float64()),
                    ("note", pa.string()), ("at", pa.timestamp("us", tz="UTC"))])
D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)


def orders(ids: Sequence[int], day: dt.date = D1, shop: int | None = 1, amount: float = 1.0) -> pa.Table:
    at = dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)
    return pa.table({"id": list(ids), "day": [day] * len(ids), "shop": [shop] * len(ids),
                     "amount": [amount] * len(ids), "note": [None if i % 2 else f"n{i}" for i in ids],
                     "at": [at + dt.timedelta(seconds=i) for i in ids]}, schema=ORDERS)


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=repr)


def committed_csns(wh: Warehouse) -> list[int]:
    return sorted(entry["csn"] for entry in wh.commit_log(limit=10_000))


def commit_every_kind_of_change(wh: Warehouse) -> None:
    """Six commits over three written tables (sales.events partitioned by a string day, sales.accounts
    unpartitioned, shop.orders by a date and a nullable int; shop.empty never written): appends, a partition
    overwrite, a copy-on-write delete and update, a whole-table overwrite, a delete emptying a partition, and a
    rolled-back transaction between them."""
    make_tables(wh)
    wh.create_table("shop.orders", ORDERS, partition_by=["day", "shop"])
    wh.create_table("shop.empty", ORDERS)  # never written: never in published()
    with wh.begin() as t:
        t.append("sales.events", pa.concat_tables([events([1, 2]), events([3], day="2024-01-02")]))
        t.append("sales.accounts", accounts({1: 10, 2: 20}))
        t.append("shop.orders", pa.concat_tables([orders([1, 2]), orders([3], day=D2, shop=None)]))
    with wh.begin() as t:  # appends to one table
        t.append("shop.orders", orders([4, 5], day=D3, shop=2))
    with wh.begin() as t:  # a partition overwrite
        t.overwrite("sales.events", events([7], day="2024-01-01", value=2.0), partitions=[{"day": "2024-01-01"}])
    with wh.begin() as t:  # copy-on-write: delete and update rewrite only the parts holding matches
        t.delete("shop.orders", pc.field("id") == 1)
        t.update("sales.accounts", pc.field("id") == 2, {"balance": 25})
    rolled = wh.begin()
    rolled.append("shop.orders", orders([99]))
    rolled.delete("sales.accounts", pc.field("id") == 1)
    rolled.rollback()
    with wh.begin() as t:  # a whole-table overwrite
        t.overwrite("sales.accounts", accounts({3: 30}))
    with wh.begin() as t:  # a delete that empties a partition
        t.delete("shop.orders", pc.field("shop").is_null())


ITEMS = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("qty", pa.int32()), ("price", pa.float32()),
                   ("note", pa.string()), ("size", pa.decimal128(5, 2))])


def items(wh: Warehouse, ids: Sequence[int], day: dt.date = D1, **values: Any) -> pa.Table:
    """Rows of shop.items under its schema now: `values` {column: value of row i} for the columns other than id and
    day (those not given are null)."""
    schema = wh.schema("shop.items").remove_metadata()
    columns = {"id": list(ids), "day": [day] * len(ids)}
    columns.update({name: [values[name](i) if name in values else None for i in ids]
                    for name in schema.names if name not in columns})
    return pa.table({name: columns[name] for name in schema.names},
                    schema=pa.schema([f.remove_metadata() for f in schema]))


def commit_every_kind_of_schema_change(wh: Warehouse) -> None:
    """Schema changes between writes on shop.items (partitioned by day), each in its own commit: added columns
    (one then written, one never), a rename, a dropped column, a name reused by another
    column after a rename (`note -> memo`, then `qty -> note`), widenings Iceberg allows (int32 -> int64, float32 ->
    float64, decimal precision up), a delete rewriting a part written under an older schema, and the table dropped
    and created again under the same name with other columns (its ids continuing, 9-11) and another partitioning."""
    wh.create_table("shop.items", ITEMS, partition_by=["day"])
    base = {"qty": lambda i: i, "price": lambda i: i / 2, "note": lambda i: f"n{i}", "size": lambda i: None}
    with wh.begin() as t:
        t.append("shop.items", items(wh, [1, 2], **base))
    with wh.begin() as t:  # an added column and rows carrying it, in one commit
        t.add_column("shop.items", pa.field("color", pa.string()))
    with wh.begin() as t:
        t.append("shop.items", items(wh, [3], day=D2, **base, color=lambda i: "red"))
    with wh.begin() as t:  # a change and no rows
        t.add_column("shop.items", pa.field("weight", pa.float64()))
    with wh.begin() as t:
        t.rename_column("shop.items", "note", "memo")
    with wh.begin() as t:
        t.append("shop.items", items(wh, [4], day=D2, **base, memo=lambda i: f"n{i}", color=lambda i: "blue",
                                     weight=float))
    with wh.begin() as t:  # a dropped column, its name then given to another one
        t.drop_column("shop.items", "color")
    with wh.begin() as t:
        t.rename_column("shop.items", "qty", "note")
    with wh.begin() as t:  # widenings Iceberg promotes
        t.alter_column("shop.items", "note", pa.int64())
        t.alter_column("shop.items", "price", pa.float64())
        t.alter_column("shop.items", "size", pa.decimal128(9, 2))
    with wh.begin() as t:
        t.append("shop.items", items(wh, [5], day=D3, note=lambda i: i * 10, price=lambda i: i / 4,
                                     memo=lambda i: f"m{i}", weight=lambda i: 1.5))
        t.delete("shop.items", pc.field("id") == 1)  # rewrites a part written under the first schema
    with wh.begin() as t:
        t.drop_table("shop.items")
    with wh.begin() as t:  # the name again: other columns, ids continuing (9-11), other partitioning
        t.create_table("shop.items", pa.schema([("label", pa.string()), ("id", pa.int32()), ("n", pa.int64())]),
                       partition_by=["n"])
        t.append("shop.items", pa.table({"label": ["a", "b"], "id": [7, 8], "n": [1, 2]},
                                        schema=pa.schema([("label", pa.string()), ("id", pa.int32()),
                                                          ("n", pa.int64())])))
    with wh.begin() as t:
        t.append("shop.items", pa.table({"label": ["c"], "id": [9], "n": [1]},
                                        schema=pa.schema([("label", pa.string()), ("id", pa.int32()),
                                                          ("n", pa.int64())])))


def open_create_and_rename(wh: Warehouse) -> Transaction:
    """sales.events with one commit, then an open transaction that creates sales.staged and renames sales.events to
    sales.renamed (returned, not committed): what publishing every table must leave out until it commits."""
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    t = wh.begin()
    t.append("sales.events", events([1, 2]))
    t.commit()
    open_txn = wh.begin()
    open_txn.create_table("sales.staged", events([9]).schema)
    open_txn.rename_table("sales.events", "sales.renamed")
    return open_txn
