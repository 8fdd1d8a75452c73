"""Issue 16, cases 9-12: input that used to pass validation and then fail raw (or be silently changed).

Each call must raise a typed error before anything is staged, leave catalog and storage exactly as
they were (`tests.core.test_errors.state`), and leave the transaction active and usable: a later valid
write and commit succeed. Values that are valid (a uint64 above 2**63, a whole-microsecond
timestamp[ns]) must round-trip instead.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from airflow_txn import Warehouse
from airflow_txn.catalog import schema
from airflow_txn.cli import exit_codes, main
from airflow_txn.core.config import MAX_LEASE_SECONDS
from airflow_txn.errors import (
    CatalogUnavailableError,
    InvalidArgumentError,
    InvalidNameError,
    SchemaMismatchError,
    TxnError,
)
from tests.core.test_errors import bind, rejected, rejected_all, state, still_usable, table_contents
from tests.helpers import accounts, ids, make_tables

INT64_MAX = 2**63 - 1
NUMBERS = pa.schema([("id", pa.int64()), ("balance", pa.int64()), ("small", pa.int8()), ("big", pa.uint64()),
                     ("at", pa.timestamp("s"))])
UNSIGNED = pa.schema([("id", pa.int64()), ("p", pa.uint64())])
NANOS = pa.schema([("id", pa.int64()), ("p", pa.timestamp("ns"))])
SECONDS = pa.schema([("id", pa.int64()), ("p", pa.timestamp("s"))])
WIDE_COLUMNS = [f"c{i}" for i in range(45)]
WIDE = pa.schema([("id", pa.int64()), *((c, pa.string()) for c in WIDE_COLUMNS)])


@pytest.fixture
def tables(wh: Warehouse) -> Warehouse:
    """sales.accounts / sales.events (tests.helpers) plus the tables of these cases, with a row each."""
    make_tables(wh)
    wh.create_table("sales.numbers", NUMBERS)
    wh.create_table("sales.unsigned", UNSIGNED, partition_by=["p"])
    wh.create_table("sales.nanos", NANOS, partition_by=["p"])
    wh.create_table("sales.seconds", SECONDS, partition_by=["p"])
    wh.create_table("sales.wide", WIDE, partition_by=WIDE_COLUMNS)
    with wh.begin() as t:
        t.append("sales.accounts", accounts({1: 10, 2: 20}))
        t.append("sales.numbers", pa.table({"id": [1], "balance": [5], "small": [1], "big": [1],
                                            "at": [dt.datetime(2024, 1, 1)]}, schema=NUMBERS))
        t.append("sales.unsigned", pa.table({"id": [1], "p": [7]}, schema=UNSIGNED))
        t.append("sales.nanos", pa.table({"id": [1], "p": pa.array([1_000], pa.timestamp("ns"))}, schema=NANOS))
    return wh


# -- case 9: update values are converted exactly, or refused --------------------------------------------


def test_update_refuses_a_value_it_would_truncate(tables: Warehouse, root: Path) -> None:
    """issue 16, case 9: update(set={int_col: 1.7}) or Decimal('2.9') silently truncated to 1 / 2; an
    append refuses a float column, so the update refuses a value the column cannot hold exactly."""
    wh = tables
    before = table_contents(wh)
    t = wh.begin()
    where = pc.field("id") == 1
    lossy: list[tuple[str, object]] = [
        ("balance", 1.7), ("balance", Decimal("2.9")), ("balance", -0.5), ("small", 2.5),
        ("big", 1.25), ("at", dt.datetime(2024, 1, 1, 0, 0, 0, 1)), ("at", 1.5),
        ("balance", pc.field("balance") * 1.5),  # an expression only the rows reveal (7.5)
    ]
    for column, value in lossy:
        err = rejected(wh, root, SchemaMismatchError,
                       bind(t.update, "sales.numbers", where, {column: value}))
        assert f"{column!r}" in str(err) and "sales.numbers" in str(err), (column, value)
    assert table_contents(wh) == before
    # exact conversions still work: an int, a whole float, a whole Decimal
    t.update("sales.numbers", where, {"balance": 7, "small": 2.0, "big": Decimal("3")})
    assert t.read("sales.numbers").select(["balance", "small", "big"]).to_pylist() == [
        {"balance": 7, "small": 2, "big": 3}]
    still_usable(wh, t)


# -- case 10: out-of-range values, unrepresentable partitions, attempts, long paths ----------------------


def test_update_out_of_range_integer_is_refused(tables: Warehouse, root: Path) -> None:
    """issue 16, case 10: update with 2**64 into int64 raised a raw OverflowError and failed the transaction."""
    wh = tables
    t = wh.begin()
    where = pc.field("id") == 1
    cases: list[tuple[str, object]] = [("balance", 2**64), ("balance", 2**63), ("balance", -(2**63) - 1),
                                       ("small", 128), ("big", -1), ("big", 2**64)]
    cases += [("balance", pc.field("balance") * 2**62), ("balance", pc.divide(pc.field("balance"), 0))]  # rows
    for column, value in cases:
        rejected(wh, root, SchemaMismatchError, bind(t.update, "sales.numbers", where, {column: value}),
                 match=f"cannot set '{column}' of sales.numbers")
    t.update("sales.numbers", where, {"balance": INT64_MAX, "big": 2**64 - 1})
    assert t.read("sales.numbers").select(["balance", "big"]).to_pylist() == [
        {"balance": INT64_MAX, "big": 2**64 - 1}]
    still_usable(wh, t)


def test_uint64_partition_values_above_int64(tables: Warehouse, root: Path) -> None:
    """issue 16, case 10: uint64 partition values >= 2**63 in overwrite / read(partitions=) raised a raw
    OverflowError. They are valid uint64 values: they round-trip; values outside uint64 are refused."""
    wh = tables
    t = wh.begin()
    data = pa.table({"id": [9], "p": [1]}, schema=UNSIGNED)
    for value in (2**64, -1, 2**70):
        rejected_all(wh, root, SchemaMismatchError, [
            bind(t.overwrite, "sales.unsigned", data, partitions=[{"p": value}]),
            bind(t.read, "sales.unsigned", partitions=[{"p": value}]),
        ], match=f"partition value {value} of column 'p' is not a uint64")
    assert t.state == "active"
    big = 2**63
    t.overwrite("sales.unsigned", pa.table({"id": [2], "p": [big]}, schema=UNSIGNED), partitions=[{"p": big}])
    assert t.read("sales.unsigned", partitions=[{"p": big}]).to_pylist() == [{"id": 2, "p": big}]
    assert t.read("sales.unsigned", partitions=[{"p": str(big)}]).to_pylist() == [{"id": 2, "p": big}]
    t.commit()
    assert sorted(wh.read("sales.unsigned").to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "p": 7}, {"id": 2, "p": big}]


def test_nanosecond_partition_values(tables: Warehouse, root: Path) -> None:
    """issue 16, case 10: timestamp[ns] partition values with a sub-microsecond part raised a raw
    ValueError (and failed the transaction on a write). A partition value's text is whole microseconds:
    such values are refused, in data and in partitions=; whole-microsecond values round-trip."""
    wh = tables
    before = table_contents(wh)
    t = wh.begin()
    sub_micro = pa.table({"id": [5, 6], "p": pa.array([2_000, 1_000_000_001], pa.timestamp("ns"))}, schema=NANOS)
    listed = [{"p": "1970-01-01T00:00:01.000000001"}]
    err = rejected_all(wh, root, SchemaMismatchError, [
        lambda: t.append("sales.nanos", sub_micro),
        lambda: t.overwrite("sales.nanos", sub_micro),
        lambda: t.overwrite("sales.nanos", sub_micro.slice(1), partitions=listed),
        lambda: t.read("sales.nanos", partitions=listed),
        lambda: t.update("sales.nanos", pc.field("id") == 1,
                         {"p": pc.scalar(pa.scalar(1_000_000_001, pa.timestamp("ns")))}),
    ], match="sub-microsecond")
    assert "'p'" in str(err[0]) and "sales.nanos" in str(err[0])
    assert table_contents(wh) == before
    whole = pa.table({"id": [7], "p": pa.array([3_000], pa.timestamp("ns"))}, schema=NANOS)
    t.overwrite("sales.nanos", whole, partitions=[{"p": "1970-01-01T00:00:00.000003"}])
    assert t.read("sales.nanos", partitions=[{"p": dt.datetime(1970, 1, 1, 0, 0, 0, 3)}]).to_pylist() == [
        {"id": 7, "p": dt.datetime(1970, 1, 1, 0, 0, 0, 3)}]
    still_usable(wh, t)


def test_timestamp_partition_outside_python_years(tables: Warehouse, root: Path) -> None:
    """issue 16, case 10 (the same failure): a timestamp[s] partition value past year 9999 has no text
    form either; it raised a raw OverflowError and failed the transaction."""
    wh = tables
    t = wh.begin()
    far = pa.table({"id": [1], "p": pa.array([2**50], pa.timestamp("s"))}, schema=SECONDS)
    rejected(wh, root, SchemaMismatchError, lambda: t.append("sales.seconds", far), match="years 1-9999")
    still_usable(wh, t)


def test_attempt_beyond_int64_is_refused_at_once(tables: Warehouse, root: Path) -> None:
    """issue 16, case 10: use_key(attempt=2**64) was taken, and the next write raised a raw OverflowError
    and failed the transaction. The attempt is checked by use_key itself, which then changes nothing."""
    wh = tables
    t = wh.begin().use_key("dag/task/0", attempt=1)
    for attempt in (2**64, 2**63, -1, True, 1.0, "2"):
        rejected(wh, root, InvalidArgumentError, bind(t.use_key, "other", attempt=attempt),
                 match="attempt must be an integer")
        assert (t.default_key, t.default_attempt) == ("dag/task/0", 1)
        rejected(wh, root, InvalidArgumentError, bind(t.compensate, attempt=attempt),
                 match="attempt must be an integer")
    t.use_key("dag/task/0", attempt=INT64_MAX)
    t.append("sales.events", pa.table({"id": [1], "day": ["d"], "value": [1.0]}))
    assert wh.transaction_info(t.tid)["parts"][0]["attempt"] == INT64_MAX
    still_usable(wh, t)


def test_partition_path_longer_than_path_max(tables: Warehouse, root: Path | str) -> None:
    """issue 16, case 10: a partition path longer than PATH_MAX raised a raw OSError (ENAMETOOLONG) and
    failed the transaction. It is refused before any file is written: no file and no directory appears."""
    wh = tables
    if isinstance(root, str):  # an object store: its key limit (1,024 bytes), and no directory to leave behind
        limit, directories = 1024, None
        allows = f"longer than the object store allows .*{limit}"
    else:
        limit = os.pathconf(root, "PC_PATH_MAX")
        directories = sorted(p for p in root.rglob("*") if p.is_dir())
        allows = f"longer than the filesystem allows .*{limit}"
    long_row = pa.table({"id": [1], **{c: ["x" * 90] for c in WIDE_COLUMNS}}, schema=WIDE)
    short_row = pa.table({"id": [2], **{c: ["s"] for c in WIDE_COLUMNS}}, schema=WIDE)
    both = pa.concat_tables([short_row, long_row])
    t = wh.begin()
    rejected_all(wh, root, InvalidNameError, [
        lambda: t.append("sales.wide", long_row),
        lambda: t.append("sales.wide", both),  # the short partition is not written either
        lambda: t.overwrite("sales.wide", both),
    ], match=allows)
    if not isinstance(root, str):
        assert sorted(p for p in root.rglob("*") if p.is_dir()) == directories
    t.append("sales.wide", short_row)
    still_usable(wh, t)
    assert wh.read("sales.wide").column("id").to_pylist() == [2]


# -- case 11: integers beyond int64, wrong types, unbounded leases ---------------------------------------


def test_integers_beyond_int64_and_wrong_types(tables: Warehouse, root: Path) -> None:
    """issue 16, case 11: integers >= 2**63 for csn, versions or limit raised a raw OverflowError;
    wait_for_csn('5') a TypeError. Each is an InvalidArgumentError now, and changes nothing."""
    wh = tables
    t = wh.begin()
    t.append("sales.accounts", accounts({3: 30}))
    calls: list[Callable[[], object]] = []
    for bad in (2**63, 2**64, -(2**64), "5", 5.0, True, None):
        calls += [bind(wh.wait_for_csn, bad, timeout=0)]
        if bad is not None:  # csn=None is the watermark
            calls += [bind(wh.read, "sales.accounts", csn=bad), bind(wh.table_stats, "sales.accounts", csn=bad),
                      bind(wh.write_manifest, csn=bad)]
        calls += [bind(wh.transactions, limit=bad), bind(wh.commit_log, limit=bad)]
        if bad is not None:  # versions=None clears the rule
            calls += [bind(wh.set_retention, "sales.accounts", versions=bad)]
    calls += [bind(wh.wait_for_csn, 1, timeout="1"), bind(wh.wait_for_csn, 1, timeout=float("nan"))]
    for err in rejected_all(wh, root, InvalidArgumentError, calls):
        assert re.search(r"(csn|versions|limit|timeout) must be", str(err)), err
    # the largest values are taken
    assert wh.transactions(limit=INT64_MAX) and wh.commit_log(limit=INT64_MAX)
    with pytest.raises(TxnError, match="not readable yet"):
        wh.read("sales.accounts", csn=INT64_MAX)
    assert wh.set_retention("sales.accounts", versions=INT64_MAX)["versions"] == INT64_MAX
    still_usable(wh, t)
    assert ids(wh.read("sales.accounts")) == [1, 2, 3, 99]


def test_lease_seconds_is_bounded(tables: Warehouse, root: Path) -> None:
    """issue 16, case 11: lease_seconds=float('inf') was accepted, so a crashed owner pinned the vacuum
    horizon forever. A lease is a positive finite number of seconds up to MAX_LEASE_SECONDS (7 days)."""
    wh = tables
    t = wh.begin()
    bad: list[object] = [float("inf"), MAX_LEASE_SECONDS + 1, 10**30, float("nan"), True, "60", 0, -1.0]
    rejected_all(wh, root, InvalidArgumentError, [bind(wh.begin, lease_seconds=b) for b in bad],
                 match=f"lease_seconds must be a positive number of seconds up to {MAX_LEASE_SECONDS:g}")
    assert MAX_LEASE_SECONDS == 7 * 24 * 3600
    longest = wh.begin(lease_seconds=MAX_LEASE_SECONDS)
    assert wh.transaction_info(longest.tid)["lease_seconds"] == MAX_LEASE_SECONDS
    longest.rollback()
    still_usable(wh, t)


def test_cli_integers_beyond_int64_print_one_line(tables: Warehouse, catalog_url: str, root: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """issue 16, case 11: `airflow-txn read T --csn 9223372036854775808` printed an 18-line traceback.
    Every integer option is bounded: one line `error: ...` on stderr and exit code 2 (usage)."""
    opts = ["--catalog", catalog_url, "--root", str(root)]
    huge, bigger = str(2**63), str(2**64)
    commands = [
        ["read", "sales.accounts", "--csn", huge], ["read", "sales.accounts", "--limit", bigger],
        ["manifest", "--csn", bigger], ["list", "--limit", huge], ["log", "--limit", huge],
        ["retention", "sales.accounts", "--versions", huge],
        ["compact", "sales.accounts", "--target-file-bytes", huge], ["compact", "sales.accounts", "--min-parts", huge],
    ]
    before = state(tables, root)
    for args in commands:
        rc = main([*opts, *args])
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert rc == exit_codes.USAGE and out == "", (args, rc, out, err)
        assert len(lines) == 1 and lines[0].startswith("error: ") and args[-2] in lines[0], (args, err)
    assert state(tables, root) == before
    assert main([*opts, "list", "--limit", str(INT64_MAX), "--json"]) == exit_codes.OK
    capsys.readouterr()


# -- case 12: a catalog lock held past the busy timeout --------------------------------------------------


def short_wait_url(catalog_url: str) -> str:
    """The catalog URL with a short lock wait: SQLite's busy timeout (`?timeout=`), or PostgreSQL's
    lock_timeout added to the options of the test schema's URL (tests/conftest.py)."""
    if catalog_url.startswith("sqlite"):
        return f"{catalog_url}?timeout=0.3"
    assert "options=-csearch_path" in catalog_url.rsplit("?", 1)[1]
    return f"{catalog_url}%20-clock_timeout%3D300"


@contextlib.contextmanager
def catalog_locked(catalog_url: str) -> Iterator[None]:
    """Another client holds the catalog's write lock: SQLite's database lock (BEGIN IMMEDIATE from a plain
    sqlite3 connection), on PostgreSQL an exclusive lock on the transactions table. Released at the end."""
    if catalog_url.startswith("sqlite"):
        other = sqlite3.connect(make_url(catalog_url).database or "", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()
        return
    engine = create_engine(catalog_url)
    try:
        with engine.connect() as conn, conn.begin() as locked:
            conn.execute(text(f"LOCK TABLE {schema.transactions.name} IN ACCESS EXCLUSIVE MODE"))
            yield
            locked.rollback()
    finally:
        engine.dispose()


def test_catalog_lock_past_busy_timeout(catalog_url: str, root: Path) -> None:
    """issue 16, case 12: a SQLite lock held past the busy timeout reached callers as a raw sqlalchemy
    OperationalError ('database is locked') and marked the transaction failed. It is a CatalogUnavailableError
    with a hint now (so is PostgreSQL's lock_timeout), a stall fails nothing, and the calls succeed later."""
    with Warehouse.open(catalog=catalog_url, root=str(root)) as creator:  # created under the usual wait: creating
        make_tables(creator)  # a catalog takes a database-wide lock other tests' catalogs may hold for a moment
    wh = Warehouse.open(catalog=short_wait_url(catalog_url), root=str(root))
    try:
        with wh.begin() as t:
            t.append("sales.accounts", accounts({1: 10, 2: 20}))
        t = wh.begin()
        t.append("sales.accounts", accounts({3: 30}))
        before = state(wh, root)
        calls: list[Callable[[], object]] = [
            lambda: t.append("sales.accounts", accounts({4: 40})),
            lambda: t.delete("sales.accounts", pc.field("id") == 1),
            lambda: t.update("sales.accounts", pc.field("id") == 2, {"balance": 0}),
            t.commit,
            wh.begin,
        ]
        with catalog_locked(catalog_url):
            for call in calls:
                with pytest.raises(CatalogUnavailableError) as info:
                    call()
                message = str(info.value)
                assert "locked" in message and "busy timeout" in message and "retry" in message, message
                assert "timeout=" in message, message  # the hint names the setting
        assert state(wh, root) == before
        assert t.state == "active" and wh.transaction_info(t.tid)["failed_reason"] is None
        t.update("sales.accounts", pc.field("id") == 2, {"balance": 0})
        still_usable(wh, t)
        assert ids(wh.read("sales.accounts")) == [1, 2, 3, 99]
    finally:
        wh.close()


# -- issue 30, item 8: filters, retentions and compaction sizes out of range ------------------------------


def test_a_state_filter_that_is_no_state_is_refused(tables: Warehouse, root: Path) -> None:
    """`transactions(state="bogus")` listed nothing, as if no transaction were in that state."""
    wh = tables
    bad: list[object] = ["bogus", "ACTIVE", "", "rolled back", 1, True]
    for err in rejected_all(wh, root, InvalidArgumentError, [bind(wh.transactions, state=b) for b in bad]):
        assert "state must be one of" in str(err) and "'rolled_back'" in str(err), err
    assert [t["state"] for t in wh.transactions(state="committed")]
    for good in ("active", "committing", "committed", "rolled_back", None):
        wh.transactions(state=good)


def test_a_retention_out_of_range_is_refused_before_vacuum_or_the_policy_changes(tables: Warehouse,
                                                                                 root: Path) -> None:
    """vacuum(retention_seconds=1e300) and set_retention(seconds=1e300) were taken (a window no clock reaches)."""
    from airflow_txn.core.bounds import MAX_RETENTION_SECONDS

    wh = tables
    bad: list[object] = [1e300, math.inf, MAX_RETENTION_SECONDS * 2, 10**30, -1, math.nan, "7d", True]
    calls = [bind(wh.vacuum, retention_seconds=b) for b in bad]
    calls += [bind(wh.vacuum, retention_seconds=b, dry_run=True) for b in bad]
    calls += [bind(wh.set_retention, "sales.accounts", seconds=b) for b in bad]
    for err in rejected_all(wh, root, InvalidArgumentError, calls):
        assert re.search(r"(retention_seconds|retention seconds) must be a number of seconds from 0 to "
                         + re.escape(f"{MAX_RETENTION_SECONDS:g}"), str(err)), err
    assert wh.set_retention("sales.accounts", seconds=MAX_RETENTION_SECONDS)["seconds"] == MAX_RETENTION_SECONDS
    wh.vacuum(retention_seconds=MAX_RETENTION_SECONDS, dry_run=True)


def test_a_compaction_size_out_of_range_is_refused_before_any_merge(tables: Warehouse, root: Path) -> None:
    """compact(target_file_bytes=10**30) was taken; 0 and -1 raised a bare TxnError."""
    from airflow_txn.core.bounds import MAX_TARGET_FILE_BYTES

    wh = tables
    bad: list[object] = [0, -1, 10**30, MAX_TARGET_FILE_BYTES + 1, 1.5, "128MB", True]
    calls = [bind(wh.compact, "sales.accounts", target_file_bytes=b) for b in bad]
    calls += [bind(wh.compact, "sales.accounts", min_parts=b) for b in (1, 0, -1, 2**64, 2.0, "2")]
    for err in rejected_all(wh, root, InvalidArgumentError, calls):
        assert re.search(rf"target_file_bytes must be an integer from 1 to {MAX_TARGET_FILE_BYTES}|"
                         rf"min_parts must be an integer from 2 to {INT64_MAX}", str(err)), err


def test_the_spark_compaction_refuses_the_same_sizes_before_touching_spark(tables: Warehouse, root: Path) -> None:
    pytest.importorskip("pyspark")
    from airflow_txn.spark.compaction import compact

    no_spark: Any = object()  # never reached: the arguments are checked first
    calls = [bind(compact, no_spark, tables, "sales.accounts", target_file_bytes=b) for b in (0, -1, 10**30)]
    calls += [bind(compact, no_spark, tables, "sales.accounts", min_parts=1)]
    rejected_all(tables, root, InvalidArgumentError, calls, match="(target_file_bytes|min_parts) must be an integer")


def test_cli_out_of_range_retentions_states_and_sizes_are_usage_errors(tables: Warehouse, catalog_url: str,
                                                                        root: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    opts = ["--catalog", catalog_url, "--root", str(root)]
    commands = [
        ["vacuum", "--retention", "1e300"], ["vacuum", "--retention", "999999y"],
        ["retention", "sales.accounts", "--seconds", "1e300"], ["list", "--state", "bogus"],
        ["compact", "sales.accounts", "--target-file-bytes", str(2**50)],
        ["compact", "sales.accounts", "--target-file-bytes", "0"],
    ]
    before = state(tables, root)
    for args in commands:
        rc = main([*opts, *args])
        out, err = capsys.readouterr()
        assert rc == exit_codes.USAGE and out == "", (args, rc, out, err)
        assert err.startswith("error: ") or "Usage:" in err, (args, err)
    assert state(tables, root) == before
