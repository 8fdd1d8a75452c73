"""Every error path of the public API: a clear error, and a rejected write changes nothing (invariant 9)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import select

from airflow_txn import Warehouse
from airflow_txn.catalog import schema
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import (
    InvalidNameError,
    LeaseExpiredError,
    SchemaMismatchError,
    SerializationError,
    TableExistsError,
    TableNotFoundError,
    TransactionClosedError,
    TransactionNotFoundError,
    TxnError,
)
from airflow_txn.model.csn import ROLLBACK_CSN
from tests.helpers import (
    ACCOUNTS,
    EVENTS,
    accounts,
    catalog_time,
    events,
    ids,
    make_tables,
    outlive_lease,
    stored_stats,
    wait_past,
)

STRICT = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
YEARLY = pa.schema([("year", pa.int64()), ("amount", pa.float64())])
UNKNOWN_TID = "5-1-0123456789abcdef"

# -- invariant 9: the whole observable state, before and after ---------------------------------------


def catalog_rows(wh: Warehouse, skip: tuple[str, ...] = ()) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every catalog table, in primary-key order (one read transaction)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with wh.runtime.catalog.read() as conn:
        for table in schema.metadata.sorted_tables:
            if table.name not in skip:
                rows = conn.execute(select(table).order_by(*table.primary_key.columns))
                out[table.name] = [tuple(r) for r in rows]
    return out


def files_state(root: Path | str) -> dict[str, tuple[int, int]]:
    """Every file below the root (local or s3://) with its size and modification time (so a rewrite shows too)."""
    return stored_stats(root)


def state(wh: Warehouse, root: Path | str, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a rejected write must leave alone: every catalog row and every file (name, size, mtime).

    Together they determine every read at every snapshot (visibility is a function of the part
    rows, contents a function of the files), so table contents need not be read on every call;
    `table_contents` checks them around whole tests.
    """
    return {"catalog": catalog_rows(wh, skip), "files": files_state(root)}


def table_contents(wh: Warehouse) -> dict[str, list[dict[str, Any]]]:
    return {name: wh.read(name).to_pylist() for name in wh.tables()}


def rejected(wh: Warehouse, root: Path | str, error: type[BaseException], call: Callable[[], object],
             match: str | None = None, skip: tuple[str, ...] = ()) -> BaseException:
    """Run `call`, expect `error` (message matching), and check the warehouse is exactly as before."""
    return rejected_all(wh, root, error, [call], match, skip)[0]


def rejected_all(wh: Warehouse, root: Path | str, error: type[BaseException], calls: list[Callable[[], object]],
                 match: str | None = None, skip: tuple[str, ...] = ()) -> list[BaseException]:
    """`rejected` for several calls, comparing the state once around all of them (cheaper)."""
    before = state(wh, root, skip)
    errors = []
    for call in calls:
        with pytest.raises(error, match=match) as info:
            call()
        errors.append(info.value)
    assert state(wh, root, skip) == before, f"a rejected call ({error.__name__}) changed the warehouse"
    return errors


def bind(fn: Callable[..., object], *args: Any, **kwargs: Any) -> Callable[[], object]:
    """`fn(*args, **kwargs)` as a no-argument call; the loops below pass ill-typed input on purpose."""
    return lambda: fn(*args, **kwargs)


def still_usable(wh: Warehouse, t: Transaction) -> None:
    """The transaction can still write and commit after a rejected statement."""
    assert t.state == "active"
    t.append("sales.accounts", accounts({99: 9}))
    csn = t.commit()
    assert wh.readable_csn() == csn
    assert 99 in ids(wh.read("sales.accounts"))


@pytest.fixture
def base(wh: Warehouse) -> Warehouse:
    """sales.events (partitioned by day) and sales.accounts, with committed rows in both."""
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", pa.concat_tables([events([1, 2]), events([3], day="2024-01-02")]))
        t.append("sales.accounts", accounts({1: 10, 2: 20}))
    return wh


@pytest.fixture
def more(base: Warehouse) -> Warehouse:
    """`base` plus sales.strict (a non-nullable column) and sales.yearly (an int partition column)."""
    base.create_table("sales.strict", STRICT)
    base.create_table("sales.yearly", YEARLY, partition_by=["year"])
    with base.begin() as t:
        t.append("sales.strict", pa.table({"id": [1], "name": ["a"]}, schema=STRICT))
        t.append("sales.yearly", pa.table({"year": [2023, 2024], "amount": [1.0, 2.0]}, schema=YEARLY))
    return base


# -- TableNotFoundError --------------------------------------------------------------------------------


def test_unknown_table(base: Warehouse, root: Path) -> None:
    contents = table_contents(base)
    t = base.begin()
    calls: list[Callable[[], object]] = [
        lambda: t.append("sales.nope", accounts({5: 5})),
        lambda: t.overwrite("sales.nope", accounts({5: 5})),
        lambda: t.overwrite("sales.nope", accounts({5: 5}), partitions=[{"id": 5}]),
        lambda: t.delete("sales.nope", pc.field("id") == 1),
        lambda: t.update("sales.nope", pc.field("id") == 1, {"balance": 0}),
        lambda: t.read("sales.nope"),
        lambda: base.read("sales.nope"),
        lambda: base.schema("sales.nope"),
        lambda: base.last_commit_csn("sales.nope"),
    ]
    for call in calls:
        err = rejected(base, root, TableNotFoundError, call, match=r"table sales\.nope does not exist")
        assert "create_table" in str(err)
    rejected(base, root, TableNotFoundError, lambda: base.read("other.accounts"), match=r"other\.accounts")
    assert table_contents(base) == contents
    still_usable(base, t)


# -- TableExistsError and exist_ok -----------------------------------------------------------------------


def test_create_existing_table(base: Warehouse, root: Path) -> None:
    contents = table_contents(base)
    rejected(base, root, TableExistsError, lambda: base.create_table("sales.accounts", ACCOUNTS),
             match=r"sales\.accounts exists already")
    # The same name with another schema or partitioning is refused too, exist_ok or not.
    other = pa.schema([("id", pa.int32())])
    calls: list[Callable[[], object]] = [
        lambda: base.create_table("sales.accounts", other),
        lambda: base.create_table("sales.accounts", other, exist_ok=True),
        lambda: base.create_table("sales.events", EVENTS, partition_by=[], exist_ok=True),
        lambda: base.create_table("sales.accounts", ACCOUNTS, partition_by=["id"], exist_ok=True),
    ]
    for call in calls:
        rejected(base, root, TableExistsError, call, match=r"sales\.\w+ exists")
    assert base.schema("sales.accounts").equals(ACCOUNTS)
    assert base.partition_by("sales.events") == ("day",)
    # exist_ok with an identical table (metadata aside) is a no-op
    before = state(base, root)
    base.create_table("sales.accounts", ACCOUNTS, exist_ok=True)
    base.create_table("sales.events", EVENTS, partition_by=["day"], exist_ok=True)
    base.create_table("sales.events", EVENTS.with_metadata({"k": "v"}), partition_by=("day",), exist_ok=True)
    assert state(base, root) == before
    assert base.tables() == ["sales.accounts", "sales.events"]
    assert table_contents(base) == contents


def test_bad_create_table_arguments(base: Warehouse, root: Path) -> None:
    contents = table_contents(base)
    cases: list[tuple[type[TxnError], Callable[[], object], str]] = [
        (SchemaMismatchError, bind(base.create_table, "sales.x", {"id": "int"}), "must be a pyarrow.Schema"),
        (SchemaMismatchError, lambda: base.create_table("sales.x", pa.schema([])), "no columns"),
        (InvalidNameError, lambda: base.create_table("sales.x", ACCOUNTS, partition_by=["nope"]),
         "partition column 'nope' is not a column"),
        (InvalidNameError, lambda: base.create_table("sales.x", ACCOUNTS, partition_by="id"),
         "partition_by must be a list"),
        (InvalidNameError, lambda: base.create_table("sales.x", ACCOUNTS, partition_by=["id", "id"]), "distinct"),
        (SchemaMismatchError, lambda: base.create_table("sales.x", YEARLY, partition_by=["amount"]),
         "partition column 'amount' has type double"),
        (SchemaMismatchError, lambda: base.create_table("sales.x", ACCOUNTS, partition_by=["id", "balance"]),
         "not a partition column"),
        (InvalidNameError, lambda: base.create_table("sales.x", pa.schema([("a/b", pa.int64())])),
         "invalid column name 'a/b'"),
        (SchemaMismatchError, lambda: base.create_table("sales.x", pa.schema([("a", pa.int64()), ("a", pa.int8())])),
         "duplicate column names"),
    ]
    for error, call, match in cases:
        rejected(base, root, error, call, match=re.escape(match))
    assert "sales.x" not in base.tables()
    assert table_contents(base) == contents


# -- SchemaMismatchError ---------------------------------------------------------------------------------

BAD_DATA: dict[str, tuple[str, object, str]] = {
    "missing column": ("sales.events", pa.table({"id": [7], "day": ["2024-01-01"]}), r"missing column.*'value'"),
    "extra column": ("sales.events", events([7]).append_column("extra", pa.array([1])), r"unknown column.*'extra'"),
    "wrong type": ("sales.accounts", pa.table({"id": pa.array([7], pa.int32()), "balance": [1]}),
                   r"'id' is int32, the table has int64"),
    "wrong order": ("sales.accounts", pa.table({"balance": [1], "id": [7]}), r"order \['balance', 'id'\]"),
    "nulls in non-nullable": ("sales.strict", pa.table({"id": pa.array([None, 3], pa.int64()), "name": ["x", "y"]}),
                              r"'id' is not nullable but holds 1 null"),
    "not a table": ("sales.accounts", {"id": [7], "balance": [1]}, "must be a pyarrow.Table, got dict"),
    "duplicate columns": ("sales.accounts", pa.table([pa.array([7]), pa.array([1]), pa.array([2])],
                                                     names=["id", "balance", "balance"]), "duplicate column names"),
    "duplicate non-nullable": ("sales.strict", pa.table([pa.array([7]), pa.array([8]), pa.array(["x"])],
                                                        names=["id", "id", "name"]), "duplicate column names"),
}


def test_data_not_matching_the_schema(more: Warehouse, root: Path) -> None:
    base = more
    contents = table_contents(base)
    t = base.begin()
    for method in (t.append, t.overwrite):
        for case, (table, data, match) in BAD_DATA.items():
            err = rejected(base, root, SchemaMismatchError, bind(method, table, data), match=match)
            assert f"schema of {table}" in str(err) or table in str(err), case
    assert table_contents(base) == contents
    still_usable(base, t)


def test_bad_partitions(more: Warehouse, root: Path) -> None:
    base = more
    contents = table_contents(base)
    t = base.begin()
    rows = pa.table({"year": [2024], "amount": [5.0]}, schema=YEARLY)
    cases: list[tuple[type[TxnError], Callable[[], object], str]] = [
        (SchemaMismatchError, lambda: t.overwrite("sales.yearly", rows, partitions=[{"year": "abc"}]),
         "partition value 'abc' of column 'year' is not a int64"),
        (SchemaMismatchError, lambda: t.overwrite("sales.yearly", rows, partitions=[{"year": 2023}]),
         "also holds rows of {'year': '2024'}"),
        (InvalidNameError, lambda: t.overwrite("sales.yearly", rows, partitions=[{"yr": 2024}]),
         "must name exactly the partition columns ['year']"),
        (InvalidNameError, lambda: t.overwrite("sales.yearly", rows, partitions=[{"year": 2024, "x": 1}]),
         "must name exactly the partition columns"),
        (InvalidNameError, lambda: t.overwrite("sales.yearly", rows, partitions={"year": 2024}),  # type: ignore[arg-type]
         "must be a list of dicts"),
        (InvalidNameError, lambda: t.overwrite("sales.accounts", accounts({1: 1}), partitions=[{"id": 1}]),
         "not partitioned"),
        (SchemaMismatchError, lambda: t.read("sales.yearly", partitions=[{"year": "x"}]), "is not a int64"),
    ]
    for error, call, match in cases:
        rejected(base, root, error, call, match=re.escape(match))
    assert table_contents(base) == contents
    still_usable(base, t)


BAD_PREDICATES: dict[str, tuple[pc.Expression, str]] = {
    "unknown column": (pc.field("nope") == 1, "nope"),
    "not boolean": (pc.field("id"), "int64"),
    "type mismatch": (pc.field("day") == 5, "equal"),
}


def test_bad_where_and_filter_expressions(base: Warehouse, root: Path) -> None:
    contents = table_contents(base)
    t = base.begin()
    for expr, match in BAD_PREDICATES.values():
        calls: list[Callable[[], object]] = [
            bind(t.delete, "sales.events", expr),
            bind(t.update, "sales.events", expr, {"value": 0.0}),
            bind(t.read, "sales.events", filter=expr),
            bind(base.read, "sales.events", filter=expr),
        ]
        for call in calls:
            err = rejected(base, root, SchemaMismatchError, call, match=match)
            assert "sales.events" in str(err)
    not_expressions: list[Callable[[], object]] = [
        bind(t.delete, "sales.events", "id = 1"),
        bind(t.update, "sales.events", "id = 1", {"value": 0.0}),
        bind(t.read, "sales.events", filter="id = 1"),
        bind(base.read, "sales.events", filter="id = 1"),
    ]
    for call in not_expressions:
        rejected(base, root, TxnError, call, match=r"must be a pyarrow\.compute\.Expression, got str")
    assert table_contents(base) == contents
    still_usable(base, t)


def test_bad_update_assignments(more: Warehouse, root: Path) -> None:
    base = more
    contents = table_contents(base)
    t = base.begin()
    t.append("sales.strict", pa.table({"id": [2], "name": ["b"]}, schema=STRICT), key="k")
    where = pc.field("id") == 1
    null_id = pc.scalar(pa.scalar(None, pa.int64()))
    cases: list[tuple[type[TxnError], Callable[[], object], str]] = [
        (SchemaMismatchError, lambda: t.update("sales.accounts", where, {"nope": 1}), "unknown column 'nope'"),
        (SchemaMismatchError, lambda: t.update("sales.accounts", where, {"balance": "abc"}), "cannot set 'balance'"),
        (SchemaMismatchError, lambda: t.update("sales.accounts", where, {"balance": pc.field("nope")}), "nope"),
        (TxnError, lambda: t.update("sales.accounts", where, {}), "non-empty dict"),
        (TxnError, lambda: t.update("sales.accounts", where, [("balance", 1)]),  # type: ignore[arg-type]
         "non-empty dict"),
        # a NULL in a non-nullable column, as a value (also under the key of an earlier write, which
        # must survive the rejected statement) and as an expression only the rows can reveal
        (SchemaMismatchError, lambda: t.update("sales.strict", where, {"id": None}), "not nullable"),
        (SchemaMismatchError, lambda: t.update("sales.strict", where, {"id": None}, key="k"), "not nullable"),
        (SchemaMismatchError, lambda: t.update("sales.strict", where, {"id": null_id}), "not nullable"),
    ]
    for error, call, match in cases:
        rejected(base, root, error, call, match=re.escape(match))
    assert ids(t.read("sales.strict")) == [1, 2]
    assert table_contents(base) == contents
    still_usable(base, t)
    assert ids(base.read("sales.strict")) == [1, 2]


# -- TransactionClosedError ------------------------------------------------------------------------------

CLOSED_OPS: dict[str, Callable[[Transaction], object]] = {
    "append": lambda t: t.append("sales.accounts", accounts({5: 5})),
    "overwrite": lambda t: t.overwrite("sales.events", events([5])),
    "delete": lambda t: t.delete("sales.accounts", pc.field("id") == 1),
    "update": lambda t: t.update("sales.accounts", pc.field("id") == 1, {"balance": 0}),
    "read": lambda t: t.read("sales.accounts"),
    "commit": lambda t: t.commit(),
}


def closed_calls(t: Transaction) -> list[Callable[[], object]]:
    return [bind(op, t) for op in CLOSED_OPS.values()]


def test_use_after_commit(base: Warehouse, root: Path) -> None:
    t = base.begin()
    t.append("sales.accounts", accounts({3: 30}))
    csn = t.commit()
    again = base.attach(t.tid)
    pattern = f"transaction {re.escape(t.tid)} is committed"
    rejected_all(base, root, TransactionClosedError, closed_calls(t) + closed_calls(again), match=pattern)
    rejected(base, root, TransactionClosedError, t.rollback, match=f"{pattern} .*cannot roll back")
    assert t.state == "committed"
    assert base.transaction_info(t.tid)["commit_csn"] == csn
    assert ids(base.read("sales.accounts")) == [1, 2, 3]


def test_use_after_rollback(base: Warehouse, root: Path) -> None:
    t = base.begin()
    t.append("sales.accounts", accounts({3: 30}))
    t.rollback()
    rejected_all(base, root, TransactionClosedError, closed_calls(t) + closed_calls(base.attach(t.tid)),
                 match=f"transaction {re.escape(t.tid)} is rolled_back: start a new transaction")
    before = state(base, root)
    t.rollback()  # rolling back twice is harmless
    assert state(base, root) == before
    assert t.state == "rolled_back"
    assert ids(base.read("sales.accounts")) == [1, 2]


def test_use_after_with_block(base: Warehouse, root: Path) -> None:
    with base.begin() as t:
        t.append("sales.accounts", accounts({3: 30}))
    rejected(base, root, TransactionClosedError, lambda: t.append("sales.accounts", accounts({4: 4})),
             match="committed")
    with pytest.raises(RuntimeError, match="task failed"), base.begin() as t2:
        t2.append("sales.accounts", accounts({4: 40}))
        raise RuntimeError("task failed")
    assert t2.state == "rolled_back"
    rejected(base, root, TransactionClosedError, lambda: t2.append("sales.accounts", accounts({4: 4})),
             match="rolled_back")
    assert ids(base.read("sales.accounts")) == [1, 2, 3]


# -- SerializationError, and the failed transaction afterwards -------------------------------------------


def test_write_write_conflict(base: Warehouse, root: Path) -> None:
    t1 = base.begin(label="winner")
    t1.delete("sales.accounts", pc.field("id") == 1)
    second: dict[str, Callable[[Transaction], object]] = {
        "delete": lambda t: t.delete("sales.accounts", pc.field("id") == 2),
        "update": lambda t: t.update("sales.accounts", pc.field("id") == 1, {"balance": 0}),
        "overwrite": lambda t: t.overwrite("sales.accounts", accounts({7: 7})),
    }
    for op, call in second.items():
        t2 = base.begin(label=op)
        t2.append("sales.events", events([50]))
        # The catalog and storage are untouched; only t2's own row records that it failed.
        err = rejected(base, root, SerializationError, bind(call, t2),
                       match="conflicts and can only roll back", skip=("txn_transactions",))
        assert t2.tid in str(err) and t1.tid in str(err), op
        info = base.transaction_info(t2.tid)
        assert info["state"] == "active" and "SerializationError" in info["failed_reason"], op
        assert [p["role"] for p in info["parts"]] == ["created"], op  # only the append before the conflict
        # t2 can only roll back now; every other use is refused with a clear message.
        rejected_all(base, root, TransactionClosedError, closed_calls(t2),
                     match=r"failed a statement \(.*SerializationError.*\): only rollback\(\) is allowed")
        t2.rollback()
        assert t2.state == "rolled_back", op
    t1.commit()  # the winner is unaffected
    assert ids(base.read("sales.accounts")) == [2]
    assert ids(base.read("sales.events")) == [1, 2, 3]


def test_conflict_with_an_already_committed_removal(base: Warehouse, root: Path) -> None:
    t1, t2 = base.begin(), base.begin()
    t1.delete("sales.accounts", pc.field("id") == 1)
    t1.commit()
    rejected(base, root, SerializationError, lambda: t2.update("sales.accounts", pc.field("id") == 2, {"balance": 0}),
             match=re.escape(t1.tid), skip=("txn_transactions",))
    rejected(base, root, TransactionClosedError, t2.commit, match="failed a statement")
    t2.rollback()
    assert ids(base.read("sales.accounts")) == [2]


# -- TransactionNotFoundError, InvalidNameError -------------------------------------------------------------


MALFORMED_TIDS: list[object] = [
    "", "abc", "1-2", "1-2-xyz", "1-2-0123456789ABCDEF", "1-2-0123456789abcde", "-1-2-0123456789abcdef",
    "1-2-0123456789abcdef; DROP TABLE txn_parts", "' OR '1'='1", "../1-2-0123456789abcdef",
    "1-2-0123456789abcdef\x00", "1" * 20 + "-2-0123456789abcdef", None, 12,
]


def test_unknown_and_malformed_tids(base: Warehouse, root: Path) -> None:
    contents = table_contents(base)
    rejected(base, root, TransactionNotFoundError, lambda: base.attach(UNKNOWN_TID), match=UNKNOWN_TID)
    rejected(base, root, TransactionNotFoundError, lambda: base.transaction_info(UNKNOWN_TID), match=UNKNOWN_TID)
    calls: list[Callable[[], object]] = []
    for tid in MALFORMED_TIDS:
        calls += [bind(base.attach, tid), bind(base.transaction_info, tid)]
    for err in rejected_all(base, root, InvalidNameError, calls, match="tid"):
        assert "expected '<start_csn>-<local_tid>-<16 hex digits>'" in str(err) or "a tid is a string" in str(err)
    assert table_contents(base) == contents


BAD_TABLE_NAMES: list[object] = ["", "nodot", "a.b.c", "Sales.events", "sales/events", "../sales.events",
                                 "sales.events; DROP TABLE txn_parts", "sales.évents", "sales.ev\x00", "1a.b", 7]


def test_bad_table_names_everywhere(base: Warehouse, root: Path) -> None:
    contents = table_contents(base)
    t = base.begin()
    calls: list[Callable[[], object]] = []
    for name in BAD_TABLE_NAMES:
        calls += [
            bind(base.create_table, name, ACCOUNTS),
            bind(base.read, name),
            bind(base.schema, name),
            bind(t.append, name, accounts({5: 5})),
            bind(t.overwrite, name, accounts({5: 5})),
            bind(t.delete, name, pc.field("id") == 1),
            bind(t.update, name, pc.field("id") == 1, {"balance": 1}),
            bind(t.read, name),
        ]
    rejected_all(base, root, InvalidNameError, calls, match="table name")
    assert table_contents(base) == contents
    still_usable(base, t)


BAD_KEYS: list[object] = ["", "k\x00", "x" * 513, 5, b"key"]


def test_bad_staging_keys(base: Warehouse, root: Path) -> None:
    contents = table_contents(base)
    t = base.begin()
    t.append("sales.accounts", accounts({3: 3}), key="good")
    calls: list[Callable[[], object]] = []
    for key in BAD_KEYS:
        calls += [
            bind(t.append, "sales.accounts", accounts({5: 5}), key=key),
            bind(t.overwrite, "sales.accounts", accounts({5: 5}), key=key),
            bind(t.delete, "sales.accounts", pc.field("id") == 1, key=key),
            bind(t.update, "sales.accounts", pc.field("id") == 1, {"balance": 0}, key=key),
        ]
    rejected_all(base, root, InvalidNameError, calls, match="invalid staging key")
    assert table_contents(base) == contents
    still_usable(base, t)
    assert ids(base.read("sales.accounts")) == [1, 2, 3, 99]


def test_bad_begin_arguments_create_no_transaction(base: Warehouse, root: Path) -> None:
    contents = table_contents(base)
    rejected_all(base, root, InvalidNameError, [lambda: base.begin(label="a\x00b"),
                                                lambda: base.begin(label="x" * 1001)], match="invalid label")
    rejected(base, root, TxnError, lambda: base.begin(isolation="chaos"), match="isolation must be one of")
    rejected_all(base, root, TxnError, [lambda: base.begin(lease_seconds=0), lambda: base.begin(lease_seconds=-1.0)],
                 match="lease_seconds must be a positive number")
    assert table_contents(base) == contents


# -- LeaseExpiredError --------------------------------------------------------------------------------------


def test_write_after_lease_expired(base: Warehouse, root: Path) -> None:
    t = base.begin(lease_seconds=0.2)
    outlive_lease(base, t.tid)
    # The write is refused and the transaction rolled back; nothing else changes.
    rejected(base, root, LeaseExpiredError, lambda: t.append("sales.accounts", accounts({5: 5})),
             match=f"lease of transaction {re.escape(t.tid)} expired", skip=("txn_transactions",))
    assert t.state == "rolled_back"
    rejected_all(base, root, TransactionClosedError, closed_calls(t), match="rolled_back")
    assert ids(base.read("sales.accounts")) == [1, 2]


def test_commit_after_lease_expired_rolls_back_staged_parts(base: Warehouse, root: Path) -> None:
    t = base.begin(lease_seconds=0.5)
    t.append("sales.accounts", accounts({5: 5}))
    t.delete("sales.accounts", pc.field("id") == 1)
    outlive_lease(base, t.tid)
    files = files_state(root)
    with pytest.raises(LeaseExpiredError, match="lease"):
        t.commit()
    assert files_state(root) == files  # rollback is metadata-only; vacuum deletes later
    info = base.transaction_info(t.tid)
    assert info["state"] == "rolled_back" and info["commit_csn"] is None
    created = [p for p in info["parts"] if p["role"] == "created"]
    assert len(created) == 2 and all(p["creation_csn"] == ROLLBACK_CSN for p in created)
    assert not [p for p in info["parts"] if p["role"] == "removed"]  # removal locks released
    assert ids(base.read("sales.accounts")) == [1, 2]
    with base.begin() as t2:  # the part t had locked for removal is free again
        t2.delete("sales.accounts", pc.field("id") == 1)
    assert ids(base.read("sales.accounts")) == [2]


def test_heartbeat_keeps_a_short_lease_alive(base: Warehouse) -> None:
    t = base.begin(lease_seconds=1.0)
    first = float(base.transaction_info(t.tid)["lease_deadline"])
    for _ in range(3):  # each renewal half a lease after the last: the lease outlives its first deadline
        wait_past(base, float(base.transaction_info(t.tid)["lease_deadline"]) - 0.5)
        assert t.heartbeat()
    assert catalog_time(base) > first
    t.append("sales.accounts", accounts({5: 5}))
    t.commit()
    assert ids(base.read("sales.accounts")) == [1, 2, 5]
