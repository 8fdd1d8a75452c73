"""split_by_partition: one group-by pass gives exactly what the old one-filter-per-partition loop gave."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_txn.model.partitioning import Partition, split_by_partition, value_to_text


def _reference(data: pa.Table, partition_by: Sequence[str]) -> list[tuple[Partition, pa.Table]]:
    """The implementation before issue 16 (O(rows x partitions)): kept here as the reference."""
    if not partition_by:
        return [({}, data)]
    if data.num_rows == 0:
        return []
    keys = [f"k{i}" for i in range(len(partition_by))]
    grouped = data.select(list(partition_by)).rename_columns(keys).group_by(keys).aggregate([]).to_pylist()
    combos = [{col: row[k] for col, k in zip(partition_by, keys, strict=True)} for row in grouped]
    out: list[tuple[Partition, pa.Table]] = []
    for combo in combos:
        mask = None
        for col in partition_by:
            value = combo[col]
            cond = pc.is_null(data[col]) if value is None else pc.equal(data[col], pa.scalar(value, data[col].type))
            cond = pc.fill_null(cond, False)
            mask = cond if mask is None else pc.and_(mask, cond)
        out.append(({col: value_to_text(combo[col]) for col in partition_by}, data.filter(mask)))
    return out


def _as_dict(pieces: list[tuple[Partition, pa.Table]]) -> dict[str, list[dict[str, object]]]:
    return {repr(sorted(p.items(), key=lambda kv: kv[0])): t.to_pylist() for p, t in pieces}


_DAYS = st.sampled_from([None, dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2023, 12, 31)])
_NAMES = st.sampled_from([None, "a", "b", "", "é"])
_ROWS = st.lists(st.tuples(st.integers(-3, 3) | st.none(), _DAYS, _NAMES, st.booleans() | st.none()),
                 max_size=60)
_SCHEMA = pa.schema([("n", pa.int32()), ("d", pa.date32()), (".a", pa.string()), ("flag", pa.bool_())])


@settings(max_examples=150, deadline=None)
@given(rows=_ROWS, by=st.lists(st.sampled_from(_SCHEMA.names), min_size=1, max_size=4, unique=True),
       chunks=st.integers(1, 3))
def test_one_pass_split_equals_the_reference(rows: list[tuple[object, ...]], by: list[str], chunks: int) -> None:
    """issue 16, case 13: the one-pass split gives the same partitions (nulls included, a column named like a
    field path, '.a'), each with the same rows in the same order, as the old filter loop. (The old order of the
    partitions came from a multi-threaded group-by and changed from run to run on several chunks; the new one
    is single-threaded, so stable.)"""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in _SCHEMA]
    full = pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, _SCHEMA, strict=True)],
                                schema=_SCHEMA)
    step = max(1, len(rows) // chunks)
    data = pa.concat_tables([full.slice(i, step) for i in range(0, len(rows), step)] or [full])
    got = split_by_partition(data, by)
    assert _as_dict(got) == _as_dict(_reference(data, by))
    assert [p for p, _ in split_by_partition(data, by)] == [p for p, _ in got]  # a stable partition order
    assert all(t.schema == data.schema and t.num_rows for _, t in got)


def test_unpartitioned_and_empty_inputs() -> None:
    """issue 16, case 13: the edge cases keep their old answers."""
    data = pa.table({"k": pa.array([1, 2], pa.int64())})
    assert split_by_partition(data, []) == [({}, data)]
    assert split_by_partition(data.slice(0, 0), ["k"]) == []
