"""Invariant 10: names are validated and no user value can address a file outside its table or reach SQL as text."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_txn import Warehouse
from airflow_txn.core.ownership import MARKER
from airflow_txn.errors import InvalidNameError, TransactionNotFoundError
from airflow_txn.model.names import encode_path_value, parse_table_name, safe_join
from tests.helpers import ACCOUNTS, accounts, storage_files

BAD_TABLE_NAMES: list[object] = [
    "..", "../x", "ns/../x.t", "a/b", "a.b/c", "ns.t/..", "Sales.events", "SALES.EVENTS", "ns.Events",
    "a.b; DROP TABLE x", "a.b'; DROP TABLE txn_tables; --", 'ns."t"', "ns.tåble", "ns.表", "ns.ev\x00il",
    "ns.", ".t", "ns..t", "a.b.c", " ns.t", "ns.t ", "ns.t\n", "ns.t-1", "a" * 64 + ".t", "ns." + "t" * 64,
    "ns.1t", "1ns.t", "nodot", "", None, 5, b"ns.t",
]


def test_parse_table_name_accepts_the_documented_form() -> None:
    assert str(parse_table_name("sales.events")) == "sales.events"
    assert parse_table_name("_n1.t_2").namespace == "_n1"
    assert parse_table_name("a" * 63 + "." + "b" * 63).table == "b" * 63


@pytest.mark.parametrize("name", BAD_TABLE_NAMES, ids=lambda n: repr(n)[:24])
def test_parse_table_name_rejects(name: object) -> None:
    with pytest.raises(InvalidNameError, match="table name"):
        parse_table_name(name)


BAD_COLUMN_NAMES = ["a/b", "a=b", "..", ".", "", "nul\x00", "a\\b"]


def test_bad_table_and_column_names_create_nothing(wh: Warehouse, root: Path | str) -> None:
    for name in BAD_TABLE_NAMES:
        with pytest.raises(InvalidNameError, match=r"namespace\.table"):
            wh.create_table(name, ACCOUNTS)  # type: ignore[arg-type]
    for column in BAD_COLUMN_NAMES:
        schema = pa.schema([(column, pa.string()), ("n", pa.int64())])
        for partition_by in ([column], []):
            with pytest.raises(InvalidNameError, match="invalid column name"):
                wh.create_table("ns.t", schema, partition_by=partition_by)
    assert wh.tables() == []
    if isinstance(root, str):  # an object store: no object at all
        assert storage_files(root) == set()
    else:
        assert [p.name for p in root.iterdir()] == [MARKER]  # not even an empty directory: the root's marker alone
    # The catalog's own tables are intact (no name reached SQL as text).
    wh.create_table("a.b", ACCOUNTS)
    with wh.begin() as t:
        t.append("a.b", accounts({1: 1}))
    assert wh.read("a.b").num_rows == 1


# -- partition values that look like paths ----------------------------------------------------------------

TRICKY_VALUES: list[str | None] = [
    "a/b", "/etc/passwd", "../../../escape", "..", ".", "./x", "k=v", "day=1/..", "a\\b", "..\\..\\x",
    "ünïcødé", "日本語", "emoji 🎉", "nul\x00byte", "\x00", "x" * 5000, "é" * 200, "", "__empty__", "__null__",
    None, "%2F", "%", " spaces ", "\n", "h-" + "0" * 24, "p-" + "0" * 32, "_airflow_txn.json", "*", "{}",
    "'; DROP TABLE txn_parts; --",
]
SCHEMA = pa.schema([("key", pa.string()), ("n", pa.int64())])


def _rows(values: list[str | None], start: int = 0) -> pa.Table:
    return pa.table({"key": values, "n": list(range(start, start + len(values)))}, schema=SCHEMA)


def _by_n(table: pa.Table) -> dict[int, str | None]:
    return {row["n"]: row["key"] for row in table.to_pylist()}


def assert_confined(tmp: Path, root: Path | str, table_dir: str) -> None:
    """Every file and directory under the root lies inside `table_dir` (or is one of its ancestors),
    every path component is a sane length, and nothing was created next to the root (on an object store:
    every object's key lies below the table's prefix, with no `.`/`..` component)."""
    if isinstance(root, str):
        for name in storage_files(root):
            pieces = name.split("/")
            assert name.startswith(f"{table_dir}/") and not {".", "..", ""} & set(pieces), name
            assert all(len(piece.encode()) <= 255 for piece in pieces), name
        assert {p.name for p in tmp.iterdir()} <= {"catalog.db", "catalog.db-wal", "catalog.db-shm"}
        return
    inside = (root / table_dir).resolve()
    for current, dirs, files in os.walk(root):
        for name in dirs + [f for f in files if Path(current, f) != root / MARKER]:
            path = Path(current, name)
            assert not path.is_symlink(), path
            assert len(name.encode()) <= 255, name
            resolved = path.resolve()
            assert resolved == inside or inside in resolved.parents or resolved in inside.parents, path
    for name in storage_files(root):
        assert inside in (root / name).resolve().parents, name
    assert {p.name for p in tmp.iterdir()} <= {"warehouse", "catalog.db", "catalog.db-wal", "catalog.db-shm"}


def test_partition_values_round_trip_and_stay_in_the_table(wh: Warehouse, root: Path | str, tmp_path: Path) -> None:
    wh.create_table("ns.t", SCHEMA, partition_by=["key"])
    expected = dict(enumerate(TRICKY_VALUES))
    with wh.begin() as t:
        assert t.append("ns.t", _rows(TRICKY_VALUES)) == len(TRICKY_VALUES)
        assert _by_n(t.read("ns.t")) == expected
    assert _by_n(wh.read("ns.t")) == expected
    assert_confined(tmp_path, root, "ns/t")
    # Each value is its own partition, even where the encoded directory names could collide.
    info = wh.transaction_info(wh.transactions(limit=1)[0]["tid"])
    assert len(info["parts"]) == len(TRICKY_VALUES)
    assert sorted(map(repr, (p["partition"]["key"] for p in info["parts"]))) == sorted(map(repr, TRICKY_VALUES))
    for value in ["..", "a/b", "", "__empty__", None, "nul\x00byte", "x" * 5000]:
        where = pc.is_null(pc.field("key")) if value is None else pc.field("key") == value
        assert _by_n(wh.read("ns.t", filter=where)) == {n: v for n, v in expected.items() if v == value}


def test_overwrite_of_tricky_partitions_touches_only_them(wh: Warehouse, root: Path | str, tmp_path: Path) -> None:
    targets: list[str | None] = ["", "..", "a/b", None, "x" * 5000, "nul\x00byte"]
    wh.create_table("ns.t", SCHEMA, partition_by=["key"])
    with wh.begin() as t:
        t.append("ns.t", _rows(TRICKY_VALUES))
    with wh.begin() as t:
        t.overwrite("ns.t", _rows(targets, start=1000), partitions=[{"key": v} for v in targets])
        t.delete("ns.t", pc.field("key") == "__empty__")
    expected = {n: v for n, v in enumerate(TRICKY_VALUES) if v not in targets and v != "__empty__"}
    expected.update({1000 + i: v for i, v in enumerate(targets)})
    assert _by_n(wh.read("ns.t")) == expected
    assert_confined(tmp_path, root, "ns/t")


ODD_COLUMNS = ["día", "a.b", "a b", "%", "...", ".a", "DROP TABLE x;--", "列"]


def test_odd_partition_column_names_round_trip(wh: Warehouse, root: Path | str, tmp_path: Path) -> None:
    schema = pa.schema([*[(c, pa.string()) for c in ODD_COLUMNS], ("n", pa.int64())])
    wh.create_table("ns.odd", schema, partition_by=ODD_COLUMNS)
    rows = pa.table({**{c: ["../v", f"{c}/x"] for c in ODD_COLUMNS}, "n": [1, 2]}, schema=schema)
    with wh.begin() as t:
        t.append("ns.odd", rows)
    assert wh.read("ns.odd").sort_by("n").equals(rows)
    assert wh.schema("ns.odd").names == [*ODD_COLUMNS, "n"]
    assert wh.partition_by("ns.odd") == tuple(ODD_COLUMNS)
    depth = len(ODD_COLUMNS)
    for name in storage_files(root):
        part_file = r"p-\d+-\d+-[0-9a-f]{16}-[0-9a-f]{32}\.parquet"  # p-<writer's tid>-<32 hex>
        assert re.fullmatch(rf"ns/odd/([^/=]+=[^/=]+/){{{depth}}}{part_file}", name), name
    assert_confined(tmp_path, root, "ns/odd")


def test_typed_partition_values_round_trip(wh: Warehouse, root: Path | str, tmp_path: Path) -> None:
    import datetime as dt

    schema = pa.schema([("i", pa.int64()), ("d", pa.date32()), ("b", pa.bool_()), ("v", pa.string())])
    wh.create_table("ns.typed", schema, partition_by=["i", "d", "b"])
    rows = pa.table({"i": [-5, 0, 2**62, None], "d": [dt.date(1970, 1, 1), dt.date(2024, 2, 29), None, None],
                     "b": [True, False, None, True], "v": ["../a", "b", "c", "d"]}, schema=schema)
    with wh.begin() as t:
        t.append("ns.typed", rows)
    assert wh.read("ns.typed").sort_by("v").equals(rows)
    with wh.begin() as t:
        t.overwrite("ns.typed", rows.slice(0, 1), partitions=[{"i": "-5", "d": "1970-01-01", "b": True}])
    assert wh.read("ns.typed").num_rows == 4
    assert_confined(tmp_path, root, "ns/typed")


def test_keys_and_labels_are_data_not_sql(wh: Warehouse) -> None:
    wh.create_table("ns.t", ACCOUNTS)
    label = "x'); DROP TABLE txn_transactions; --"
    key = "dag/../task/0'; DELETE FROM txn_parts; --"
    t = wh.begin(label=label)
    t.append("ns.t", accounts({1: 1}), key=key)
    t.append("ns.t", accounts({2: 2}), key=key)  # a retry under the same key replaces the first write
    info = wh.transaction_info(t.tid)
    assert info["label"] == label
    assert {p["key"] for p in info["parts"]} == {key}
    t.commit()
    assert wh.read("ns.t").column("id").to_pylist() == [2]



def test_a_short_tid_is_a_prefix_of_one_tid_and_never_a_pattern(wh: Warehouse) -> None:
    """Warehouse.resolve_tid (the CLI's short tids): a unique prefix names its tid, like git's hashes; the
    prefix is checked against the tid's form before it reaches SQL's LIKE, so `%` and `_` match nothing."""
    a, b = wh.begin(), wh.begin()  # 1-1-<host>, 1-2-<host>
    assert wh.resolve_tid(a.tid[:6]) == a.tid and wh.resolve_tid(f" {b.tid[:5]}") == b.tid
    unknown = "5-1-0123456789abcdef"
    assert wh.resolve_tid(f" {unknown} ") == unknown  # a whole tid is taken as it is (transaction_info says if absent)
    with pytest.raises(InvalidNameError, match=rf"ambiguous: it begins {a.tid}, {b.tid}; give more of the tid"):
        wh.resolve_tid("1-")
    with pytest.raises(TransactionNotFoundError, match="beginning with '1-3'"):
        wh.resolve_tid("1-3")
    for bad in ("", " ", "-1", "1--", "1-1-XYZ", "1-1-0123456789abcdef0", "1%", "1_", "1-_", "%", "1-1-%"):
        with pytest.raises(InvalidNameError, match="malformed tid"):
            wh.resolve_tid(bad)


# -- encode_path_value and safe_join ------------------------------------------------------------------------


@given(st.one_of(st.none(), st.text()))
def test_encoded_value_is_one_safe_path_component(value: str | None) -> None:
    encoded = encode_path_value(value)
    assert encoded and encoded not in {".", ".."}
    assert not set(encoded) & {"/", "\\", "\x00", "="}
    assert len(encoded) <= 96 or re.fullmatch(r"h-[0-9a-f]{24}", encoded)
    assert re.fullmatch(r"[A-Za-z0-9_\-%]+", encoded)


@given(st.text(min_size=1), st.text(min_size=1))
def test_short_encodings_are_injective(a: str, b: str) -> None:
    ea, eb = encode_path_value(a), encode_path_value(b)
    if a != b and len(ea) <= 96 and len(eb) <= 96:
        assert ea != eb


@pytest.mark.parametrize("component", [
    "..", "../x", "a/../..", "a/../../b", ".", "./a", "a/.", "/etc", "/", "", "a\\..\\b", "x\x00y", "a//..",
])
def test_safe_join_refuses_escapes(tmp_path: Path, component: str) -> None:
    base = tmp_path / "base"
    base.mkdir()
    with pytest.raises(InvalidNameError):
        safe_join(base, component)
    with pytest.raises(InvalidNameError):
        safe_join(base, "ok", component)


def test_safe_join_refuses_a_symlink_out(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "inner").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (base / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(InvalidNameError, match="escapes"):
        safe_join(base, "link", "file")
    assert safe_join(base, "inner", "file") == base / "inner" / "file"


def test_safe_join_allows_nested_and_encoded_components(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    assert safe_join(base, "a/b", "c=d", "%2E%2E", "...") == base / "a" / "b" / "c=d" / "%2E%2E" / "..."
    assert safe_join(base) == base
