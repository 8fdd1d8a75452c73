"""model/merging.py (issue 32, the pure part of MERGE): the request checked before anything is staged, one part's
rows merged with the source, and the inserts. The statement around it (candidate parts, removal locks, the read
set validated at commit) is the core's."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn.errors import InvalidArgumentError, SchemaMismatchError
from airflow_txn.model import merging

T = "shop.dim"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string()), ("qty", pa.int32()),
                    ("name", pa.string())])


def table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, SCHEMA)


TARGET = table([{"id": 1, "day": "a", "qty": 1, "name": "one"}, {"id": 2, "day": "a", "qty": 2, "name": "two"},
                {"id": 3, "day": "b", "qty": 3, "name": "three"}])
SOURCE = table([{"id": 2, "day": "a", "qty": 20, "name": "TWO"}, {"id": 4, "day": "b", "qty": 40, "name": "four"}])


def run(source: pa.Table = SOURCE, **clauses: Any) -> tuple[list[dict[str, Any]], merging.PartMerge, list[int]]:
    spec = merging.check(SCHEMA, T, source, ["id"], **clauses)
    merged = merging.merge_part(TARGET, spec)
    rows = (merged.rows if merged.rows is not None else TARGET).sort_by("id").to_pylist()
    inserted = merging.inserts(spec, [merged.matched]).column("id").to_pylist()
    return rows, merged, inserted


def test_upsert_updates_matched_rows_and_inserts_the_rest() -> None:
    rows, merged, inserted = run()
    assert [(r["id"], r["qty"], r["name"]) for r in rows] == [(1, 1, "one"), (2, 20, "TWO"), (3, 3, "three")]
    assert (merged.updated, merged.deleted, inserted) == (1, 0, [4])


def test_delete_ignore_and_not_matched_by_source() -> None:
    rows, merged, inserted = run(when_matched="delete", when_not_matched="ignore")
    assert [r["id"] for r in rows] == [1, 3] and (merged.updated, merged.deleted, inserted) == (0, 1, [])
    rows, merged, inserted = run(when_matched="ignore")
    assert merged.rows is None and inserted == [4]  # the part is unchanged: it stays as it is
    rows, merged, inserted = run(when_not_matched_by_source="delete")
    assert [r["id"] for r in rows] == [2] and (merged.updated, merged.deleted) == (1, 2)


def test_setters_see_the_target_and_the_matching_source_row() -> None:
    rows, merged, _ = run(when_matched={"qty": pc.field("qty") + pc.field("source", "qty"), "name": "set"})
    assert [(r["id"], r["qty"], r["name"]) for r in rows] == [(1, 1, "one"), (2, 22, "set"), (3, 3, "three")]
    assert (merged.updated, merged.deleted) == (1, 0)
    keys_only = pa.table({"id": pa.array([3], pa.int64())})
    rows, _, inserted = run(keys_only, when_matched={"qty": 0}, when_not_matched="ignore")
    assert [r["qty"] for r in rows] == [1, 2, 0] and inserted == []


def test_null_keys_never_match() -> None:
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    target = pa.table({"k": [None, 1], "v": ["t0", "t1"]}, schema=schema)
    spec = merging.check(schema, T, pa.table({"k": [None, 1], "v": ["s0", "s1"]}, schema=schema), ["k"])
    merged = merging.merge_part(target, spec)
    assert merged.rows is not None and merged.rows.to_pylist() == [{"k": None, "v": "t0"}, {"k": 1, "v": "s1"}]
    assert merging.inserts(spec, [merged.matched]).to_pylist() == [{"k": None, "v": "s0"}]


def test_inserts_are_the_source_rows_no_part_matched() -> None:
    spec = merging.check(SCHEMA, T, SOURCE, ["id"])
    first = merging.merge_part(TARGET.slice(0, 1), spec)  # ids 1: matches nothing
    second = merging.merge_part(TARGET.slice(1), spec)  # ids 2, 3: matches 2
    assert merging.inserts(spec, [first.matched, second.matched]).column("id").to_pylist() == [4]
    assert merging.inserts(spec, []).column("id").to_pylist() == [2, 4]


@pytest.mark.parametrize(("source", "clauses", "error", "match"), [
    (table([{"id": 1}, {"id": 1}]), {}, SchemaMismatchError, r"more than once, e\.g\. \{'id': 1\}"),
    (pa.table({"id": [1], "zzz": [1]}), {}, SchemaMismatchError, r"column\(s\) \['zzz'\] the table has not"),
    (pa.table({"id": pa.array([1], pa.int64())}), {}, SchemaMismatchError, "lacks column"),
    (pa.table({"id": pa.array([1], pa.int32())}), {"when_matched": "delete", "when_not_matched": "ignore"},
     SchemaMismatchError, "'id' is int32, the table has int64"),
    ("rows", {}, SchemaMismatchError, "pyarrow.Table"),
    (pa.table({"id": pa.array([None], pa.int64()), "day": ["a"], "qty": pa.array([1], pa.int32()), "name": ["x"]}),
     {}, SchemaMismatchError, r"\['id'\] are NOT NULL"),
    (SOURCE, {"when_matched": "upsert"}, InvalidArgumentError, "when_matched"),
    (SOURCE, {"when_not_matched": "delete"}, InvalidArgumentError, "when_not_matched"),
    (SOURCE, {"when_not_matched_by_source": "drop"}, InvalidArgumentError, "when_not_matched_by_source"),
    (SOURCE, {"when_matched": {"id": 1}}, SchemaMismatchError, "key column 'id'"),
    (SOURCE, {"when_matched": {"nope": 1}}, SchemaMismatchError, "unknown column 'nope'"),
    (SOURCE, {"when_matched": {"qty": "many"}}, SchemaMismatchError, "cannot set 'qty'"),
    (SOURCE, {"when_matched": {"qty": pc.field("missing")}}, SchemaMismatchError, "cannot be evaluated"),
    (SOURCE, {"when_matched": {}}, InvalidArgumentError, "sets nothing"),
])
def test_a_bad_request_is_refused_before_anything_is_merged(source: object, clauses: dict[str, Any],
                                                            error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match) as refused:
        merging.check(SCHEMA, T, source, ["id"], **clauses)
    assert T in str(refused.value)


@pytest.mark.parametrize("on", [[], "nope", ["id", "id"], [1]])
def test_bad_keys_are_refused(on: object) -> None:
    with pytest.raises((InvalidArgumentError, SchemaMismatchError), match=T):
        merging.check(SCHEMA, T, SOURCE, on)


def test_statistics_keys_leave_out_floats_and_every_part_merges() -> None:
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("s", pa.string())])
    source = pa.Table.from_pylist([{"id": 1, "x": 1.0, "s": "a"}], schema)
    assert merging.statistics_keys(merging.check(schema, T, source, ["id", "x", "s"]), schema) == ("id", "s")
    every = merging.check(schema, T, source, ["id"], when_not_matched_by_source="delete")
    assert merging.statistics_keys(every, schema) == ()


def test_may_hold_asks_for_one_source_key_inside_every_range_at_once() -> None:
    spec = merging.check(SCHEMA, T, table([{"id": 2, "day": "a", "qty": 1, "name": "x"},
                                           {"id": 9, "day": "c", "qty": 1, "name": "y"},
                                           {"id": 5, "day": None, "qty": 1, "name": "z"}]), ["id", "day"])
    keys = merging.source_keys(spec)
    assert keys.num_rows == 2  # the null key never matches: it rules no part in

    def r(low: Any, high: Any, arrow_type: pa.DataType) -> tuple[pa.Scalar, pa.Scalar]:
        return pa.scalar(low, arrow_type), pa.scalar(high, arrow_type)

    assert merging.may_hold(keys, {"id": r(1, 3, pa.int64())})
    assert not merging.may_hold(keys, {"id": r(3, 8, pa.int64())})
    assert merging.may_hold(keys, {"id": r(1, 9, pa.int64()), "day": r("b", "c", pa.string())})  # (9, "c")
    assert not merging.may_hold(keys, {"id": r(1, 3, pa.int64()), "day": r("b", "c", pa.string())})  # no tuple fits
    assert not merging.may_hold(keys, {"id": r(5, 5, pa.int64())})  # only the null-keyed row has id 5
    assert merging.may_hold(keys, {})  # no range known: any part may hold a key
    assert not merging.may_hold(keys.slice(0, 0), {})
