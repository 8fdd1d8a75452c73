"""Each Spark path reaches the core in at most 3 calls (issue 31; docs/ARCHITECTURE.md, "The two plans").

A statement through an engine opens the core's plan, may choose what it replaces and where its files go, and
commits: the core decides the rest inside those calls. The spy below counts every call that code of
airflow_txn.spark or airflow_txn.checks makes to one of the core's protocol steps (the plans' openings and
the catalog or storage steps of a plan), while one statement, read or compaction runs; a call the core makes
inside another step is not the engine's and is not counted. Cleanup after a failure (`discard`) and values
(`table`, `view`, `file_tags`, `read_plan`, `to_json`) are not steps. The data source's own driver-side
commit runs in Spark's Python worker, out of the spy's sight: a data-source statement's count is the
client's calls plus that one commit.

test_engine_plans.py (tests/architecture) keeps the engines to the names of the plans; this one bounds their use.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

import airflow_txn.spark
import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.core import adapter
from tests.helpers import EVENTS
from tests.spark.helpers import frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

ENGINES = ("airflow_txn.spark", "airflow_txn.checks")
STEPS = ("open_write", "plan_read", "open_compaction", "stored_table", "table_view")
"""The adapter's functions that open a plan or reach the catalog."""
PLAN_STEPS: tuple[tuple[type, str], ...] = (
    (adapter.WritePlan, "replacing"), (adapter.WritePlan, "new_write_dir"), (adapter.WritePlan, "commit"),
    (adapter.CompactionPlan, "run"), (adapter.MergePlan, "new_write_dir"), (adapter.StoredTable, "statement_parts"),
)
"""The plans' methods that reach the catalog or the storage root."""
MAX_CALLS = 3
T = "sales.events"
DAYS = ("2024-01-01", "2024-01-02")


def _counting(seen: list[str], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        if str(sys._getframe(1).f_globals.get("__name__", "")).startswith(ENGINES):
            seen.append(name)
        return fn(*args, **kwargs)
    return step


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The engine's calls into the core's steps, in order (clear it before the statement measured)."""
    seen: list[str] = []
    for found in pkgutil.walk_packages(airflow_txn.spark.__path__, "airflow_txn.spark."):
        importlib.import_module(found.name)  # loaded lazily otherwise: its names bound after the patch
    for name in STEPS:
        original = getattr(adapter, name)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith(ENGINES) and getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, _counting(seen, name, original))
    for owner, name in PLAN_STEPS:
        monkeypatch.setattr(owner, name, _counting(seen, f"{owner.__name__}.{name}", getattr(owner, name)))
    yield seen


def _table(wh: Warehouse, appends: int = 1) -> None:
    """`appends` commits of one row per day each: ids 10*n + d."""
    wh.create_table(T, EVENTS, partition_by=["day"])
    for n in range(appends):
        with wh.begin() as t:
            t.append(T, pa.table({"id": [10 * n + d for d in range(len(DAYS))], "day": list(DAYS),
                                  "value": [float(n)] * len(DAYS)}, schema=EVENTS))


@pytest.mark.parametrize(("via", "expected"), [
    ("native", ["open_write", "WritePlan.new_write_dir", "WritePlan.commit"]),
    ("datasource", ["open_write"]),  # + the data source's commit
])
def test_a_write_and_an_overwrite(spark: SparkSession, swh: Warehouse, calls: list[str], via: str,
                                  expected: list[str]) -> None:
    _table(swh)
    df = frame(spark, EVENTS, [(100, DAYS[0], 1.0)])
    with swh.begin() as t:
        calls.clear()
        assert txn_spark.write(df, t, T, via=via) == 1
        assert calls == expected
        calls.clear()
        assert txn_spark.write(df, t, T, mode="overwrite", partitions=[{"day": DAYS[0]}], via=via) == 1
        assert calls == expected
    assert len(calls) + (via == "datasource") <= MAX_CALLS


@pytest.mark.parametrize(("via", "expected"), [
    ("native", ["open_write", "WritePlan.replacing", "WritePlan.commit"]),
    ("datasource", ["open_write", "WritePlan.replacing"]),  # + the data source's commit
])
def test_copy_on_write(spark: SparkSession, swh: Warehouse, calls: list[str], via: str, expected: list[str]) -> None:
    _table(swh, appends=2)
    with swh.begin() as t:
        calls.clear()
        assert txn_spark.delete(spark, t, T, "id = 0", via=via) == 1
        assert calls == expected
        calls.clear()
        assert txn_spark.update(spark, t, T, "id = 1", {"value": 9.0}, via=via) == 1
        assert calls == expected
    assert len(calls) + (via == "datasource") <= MAX_CALLS
    assert sorted(swh.read(T)["id"].to_pylist()) == [1, 10, 11]


@pytest.mark.parametrize(("via", "expected"), [
    ("native", ["open_write", "WritePlan.replacing", "WritePlan.commit"]),
    ("datasource", ["open_write", "WritePlan.replacing"]),  # + the data source's commit
])
def test_a_merge(spark: SparkSession, swh: Warehouse, calls: list[str], via: str, expected: list[str]) -> None:
    """A MERGE that rewrites a part and inserts, then one that only inserts: the same three steps (its scope is the
    core's rule inside the plan, the write dir comes with the choice)."""
    _table(swh)
    with swh.begin() as t:
        calls.clear()
        df = frame(spark, EVENTS, [(0, DAYS[0], 5.0), (100, DAYS[0], 1.0)])
        assert txn_spark.merge(df, t, T, on=["id", "day"], via=via) == {"updated": 1, "inserted": 1, "deleted": 0}
        assert calls == expected
        calls.clear()
        df = frame(spark, EVENTS, [(200, DAYS[1], 1.0)])
        assert txn_spark.merge(df, t, T, on=["id", "day"], via=via)["inserted"] == 1
        assert calls == expected
    assert len(calls) + (via == "datasource") <= MAX_CALLS
    assert sorted(swh.read(T)["id"].to_pylist()) == [0, 1, 100, 200]


@pytest.mark.parametrize(("via", "per_merge"), [
    ("native", "MergePlan.new_write_dir"),
    ("datasource", "StoredTable.statement_parts"),
])
def test_compaction_goes_through_the_compaction_plan(spark: SparkSession, swh: Warehouse, calls: list[str],
                                                     via: str, per_merge: str) -> None:
    """open_compaction, CompactionPlan.run, and one step per merge (where its file went): the core plans,
    begins and swaps every merge inside those."""
    _table(swh, appends=3)
    calls.clear()
    report = txn_spark.compact(spark, swh, T, via=via)
    assert report["merged"] == len(DAYS)
    assert calls == ["open_compaction", "CompactionPlan.run"] + [per_merge] * len(DAYS)
    assert len(set(calls)) <= MAX_CALLS
    assert len(swh.read(T)) == 3 * len(DAYS)


@pytest.mark.parametrize("via", ["native", "datasource"])
def test_a_read(spark: SparkSession, swh: Warehouse, calls: list[str], via: str) -> None:
    _table(swh)
    with swh.begin() as t:
        calls.clear()
        assert txn_spark.read(spark, swh, T, txn=t, via=via).count() == len(DAYS)
        assert calls == ["plan_read"]
