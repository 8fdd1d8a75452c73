"""CompactOperator and VacuumOperator under real dag.test() runs: the example maintenance DAG on a warehouse
with many small parts (arrow and Spark engines, both catalogs), the vacuum's dry run, and refused input."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import part_records, table_registry
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.errors import InvalidOptionError
from airflow_txn.model.options import CompactionEngine
from tests.airflow.helpers import run_dag, task_states, xcom
from tests.helpers import EVENTS, events, part_writer_tags, storage_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.airflow

CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("day", pa.date32())])
ORDERS = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("amount", pa.float64()),
                    ("day", pa.date32())])
DAYS = ("2024-01-01", "2024-01-02")
APPENDS = 4


def _small_parts(wh: Warehouse) -> None:
    """shop.customers and shop.orders (not shop.order_items): APPENDS commits of one part per day each."""
    wh.create_table("shop.customers", CUSTOMERS, partition_by=["day"])
    wh.create_table("shop.orders", ORDERS, partition_by=["day"])
    for n in range(APPENDS):
        with wh.begin() as t:
            for d, day in enumerate(DAYS):
                base = 1000 * d + 10 * n
                date = pa.array([day, day]).cast(pa.date32())
                t.append("shop.customers", pa.table({"customer_id": [base, base + 1], "name": [f"c{base}", None],
                                                     "day": date}, schema=CUSTOMERS))
                t.append("shop.orders", pa.table({"order_id": [base * 10, base * 10 + 1], "customer_id": [base, base],
                                                  "amount": [1.5 * n, -2.0], "day": date}, schema=ORDERS))


def _live(wh: Warehouse, table: str) -> list[PartRow]:
    with wh.runtime.catalog.read() as conn:
        info = table_registry.get(conn, table)
        return part_records.visible_parts(conn, info.id, None, wh.readable_csn())


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


def _parquet(root: Path) -> set[str]:
    return {f for f in storage_files(root) if f.endswith(".parquet")}


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_maintenance_dag_compacts_then_vacuums(dagbag: Any, spark: SparkSession, txn_conn: Warehouse, root: Path,
                                               engine: str) -> None:
    wh = txn_conn
    _small_parts(wh)
    tables = ("shop.customers", "shop.orders")
    before = {t: _sorted(wh.read(t)) for t in tables}
    watermark, files_before = wh.readable_csn(), _parquet(root)
    assert len(files_before) == 2 * APPENDS * len(DAYS)

    run = run_dag(dagbag, "warehouse_maintenance", {"engine": engine, "retention_seconds": 0})
    assert str(run.state) == "success"
    assert task_states(run) == {"compact": ("success", 1), "vacuum": ("success", 1)}

    compacted = xcom(run, "compact")
    assert compacted["engine"] == engine and compacted["skipped"] == ["shop.order_items"]
    assert set(compacted["tables"]) == set(tables)
    assert (compacted["merged"], compacted["yielded"]) == (4, 0)
    assert (compacted["parts_before"], compacted["parts_after"]) == (16, 4)
    for table in tables:
        result = compacted["tables"][table]
        assert result["table"] == table and result["merged"] == 2 and result["parts_after"] == 2
        parts = _live(wh, table)
        assert sorted(str(p.partition["day"]) for p in parts) == list(DAYS), "one part per partition"
        for part in parts:
            tags = part_writer_tags(wh, table, part.path)  # the footer (arrow), the sidecar (spark)
            assert tags["writer"] == "compaction" and tags.get("engine", "arrow") == engine
        assert _sorted(wh.read(table)) == before[table], f"{table} changed"
    assert wh.readable_csn() == watermark, "compaction commits nothing users can see"

    vacuumed = xcom(run, "vacuum")
    assert vacuumed["dry_run"] is False and vacuumed["parts_removed"] == 16
    files_after = _parquet(root)
    assert len(files_after) == 4 and not files_after & files_before
    assert wh.recover()["missing_files"] == []


def test_vacuum_dry_run_reports_and_keeps_the_merged_away_files(dagbag: Any, txn_conn: Warehouse,
                                                                root: Path) -> None:
    wh = txn_conn
    _small_parts(wh)
    files_before = _parquet(root)
    run = run_dag(dagbag, "warehouse_maintenance", {"retention_seconds": 0, "dry_run": True, "min_parts": 3})
    assert str(run.state) == "success"
    assert xcom(run, "compact")["parts_after"] == 4
    vacuumed = xcom(run, "vacuum")
    assert vacuumed["dry_run"] is True and vacuumed["parts_removed"] == 16
    assert _parquet(root) >= files_before, "a dry run deletes nothing"
    again = run_dag(dagbag, "warehouse_maintenance", {"retention_seconds": 3600})  # inside the window
    assert xcom(again, "compact")["merged"] == 0 and xcom(again, "vacuum")["parts_removed"] == 0
    assert _parquet(root) >= files_before


def test_listed_partitions_only(dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    for n in range(3):
        with wh.begin() as t:
            for day in DAYS:
                t.append("sales.events", events([10 * n, 10 * n + 1], day=day))
    run = run_dag(dagbag, "txn_maintenance_probe", {"partitions": [{"day": DAYS[1]}]})
    assert task_states(run) == {"compact": ("success", 1)}
    result = xcom(run, "compact")["tables"]["sales.events"]
    assert (result["merged"], result["parts_before"], result["parts_after"]) == (1, 3, 1)
    assert sorted(str(p.partition["day"]) for p in _live(wh, "sales.events")) == [DAYS[0]] * 3 + [DAYS[1]]
    assert len(wh.read("sales.events")) == 12


@pytest.mark.parametrize("conf", [
    {"tables": "sales.nope"},
    {"target_file_bytes": "lots"},
    {"target_file_bytes": "0"},
    {"engine": "duckdb"},
    {"partitions": [{"nope": "x"}]},
])
def test_refused_input_fails_without_retry_and_changes_nothing(dagbag: Any, txn_conn: Warehouse, root: Path,
                                                               conf: dict[str, Any]) -> None:
    wh = txn_conn
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    for n in range(2):
        with wh.begin() as t:
            t.append("sales.events", events([n], day=DAYS[0]))
    parts, files, txns = {p.id for p in _live(wh, "sales.events")}, storage_files(root), len(wh.transactions())
    run = run_dag(dagbag, "txn_maintenance_probe", conf)
    assert str(run.state) == "failed"
    assert task_states(run) == {"compact": ("failed", 1)}, "bad input fails at once, no retry"
    assert {p.id for p in _live(wh, "sales.events")} == parts and storage_files(root) == files
    assert len(wh.transactions()) == txns


def test_an_engine_that_does_not_exist_is_refused_when_the_dag_is_parsed() -> None:
    from airflow_txn.operators import CompactOperator, VacuumOperator

    with pytest.raises(InvalidOptionError, match=r"^compact: engine must be one of 'arrow', 'spark', got 'duckdb'$"):
        CompactOperator(task_id="compact", engine="duckdb")
    assert CompactOperator(task_id="compact", engine=CompactionEngine.SPARK).engine is CompactionEngine.SPARK
    assert CompactOperator(task_id="compact", engine="{{ params.engine }}").engine == "{{ params.engine }}"
    assert VacuumOperator(task_id="vacuum", dry_run=True).vacuum_dry_run is True
