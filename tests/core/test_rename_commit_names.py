"""Names a commit records after a rename (docs/DESIGN.md D27): each touched table is named by its version visible to
the committing transaction (its own staged rename included), never by a per-process cache of names. On SQLite and
PostgreSQL (and ZooKeeper with AIRFLOW_TXN_TEST_ZK=1)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from airflow_txn import Warehouse

TABLE = "shop.orders"
NEW = "shop.sales"
SCHEMA = pa.schema([("id", pa.int32()), ("day", pa.string())])


def orders(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int32()), "day": ["d1"] * len(ids)})


def test_commit_records_name_a_renamed_table_by_its_new_name(wh: Warehouse,
                                                             open_wh: Callable[[], Warehouse]) -> None:
    wh.create_table(TABLE, SCHEMA, ["day"])
    with wh.begin() as t:
        t.append(TABLE, orders([1]))
    with wh.begin() as t:
        t.rename_table(TABLE, NEW)
    with wh.begin() as t:
        t.append(NEW, orders([2]))
    expected = [[NEW], [NEW], [TABLE]]
    assert [e["tables"] for e in wh.commit_log()] == expected
    assert [e["tables"] for e in open_wh().commit_log()] == expected


def test_a_rename_and_an_append_in_one_transaction_record_the_new_name(wh: Warehouse) -> None:
    wh.create_table(TABLE, SCHEMA, ["day"])
    with wh.begin() as t:
        t.append(TABLE, orders([1]))
    with wh.begin() as t:
        t.rename_table(TABLE, NEW)
        t.append(NEW, orders([2]))
    assert [e["tables"] for e in wh.commit_log()] == [[NEW], [TABLE]]
