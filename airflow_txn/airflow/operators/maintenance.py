"""Maintenance operators: CompactOperator (merge small parts, docs/COMPACTION.md) and VacuumOperator.

    compact = CompactOperator(task_id="compact", tables=["shop.orders"], engine="spark")
    vacuum = VacuumOperator(task_id="vacuum", retention_seconds=7 * 24 * 3600)
    compact >> vacuum

Both run outside any DAG-run transaction: each merge is a transaction of its own that yields to user
transactions, and readers of older snapshots keep their files until the retention window passes.
Arguments are templated and may arrive as text (e.g. "{{ params.engine }}"); they are checked before
anything changes, and a bad one fails the task without retrying, naming what was wrong. The XCom is
the result dict (JSON-serialisable): per table `wh.compact`'s result, or `wh.vacuum`'s.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_txn.airflow.hooks.txn import coerce_tables
from airflow_txn.airflow.operators.base import TxnBaseOperator, is_template
from airflow_txn.airflow.version_compat import AirflowFailException, Context
from airflow_txn.core.adapter import DEFAULT_TARGET_FILE_BYTES
from airflow_txn.core.config import DEFAULT_RETENTION_SECONDS
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import (
    CatalogUnavailableError,
    InvalidOptionError,
    LeaseExpiredError,
    OracleUnavailableError,
    SerializationError,
    StorageError,
    TxnError,
)
from airflow_txn.model.options import CompactionEngine, CompactionEngineName
from airflow_txn.model.results import CompactionReport, CompactionSummary, PartitionSpec, VacuumReport

_TRANSIENT = (CatalogUnavailableError, OracleUnavailableError, StorageError, LeaseExpiredError, SerializationError)
"""Errors a retry may get past; any other TxnError is bad input and fails the task at once."""
Compact = Callable[[str, PartitionSpec | None, int, int], CompactionReport]
"""(table, partitions, target_file_bytes, min_parts) -> the compaction's result."""
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no", "")


class CompactOperator(TxnBaseOperator):
    """Compact `tables`: merge each partition's small visible parts into parts of up to `target_file_bytes`.

    :param tables: table names (a list, or text "a.b,c.d"); None (default): every table of the warehouse.
    :param skip_missing: skip listed tables that do not exist (yet) instead of failing.
    :param partitions: only these partitions, `[{"day": "2024-01-01"}, ...]`, of every listed table,
        or `{"shop.orders": [{...}], ...}` per table (tables not in it: all partitions). None: all.
    :param target_file_bytes: size to aim for per merged part (default 128 MiB).
    :param min_parts: merge only groups of at least this many parts (>= 2).
    :param engine: "arrow" (the core merges in this worker with pyarrow) or "spark" (Spark writes
        the merged files: `airflow_txn.spark.compact`): a `CompactionEngine` or its name (templated; any other
        value is refused with InvalidOptionError when the DAG is parsed, or fails the task without retry).
    :param spark_conf: Spark settings over the connection's `spark_conf` (engine "spark", when this
        worker has no SparkSession yet).
    :param conn_id: the airflow_txn connection.

    XCom: `{"engine", "tables": {table: wh.compact's result}, "skipped": [missing tables], "merged",
    "yielded", "parts_before", "parts_after", "bytes_before", "bytes_after"}` (totals over the tables).
    A merge that yields to a user transaction is no failure: the next run merges what is left.
    """

    template_fields: Sequence[str] = ("tables", "partitions", "target_file_bytes", "min_parts", "engine",
                                      "spark_conf", "conn_id")
    template_fields_renderers = {"partitions": "json", "spark_conf": "json"}
    ui_color = "#cfe2f3"

    def __init__(self, *, tables: Sequence[str] | str | None = None,
                 partitions: PartitionSpec | Mapping[str, PartitionSpec] | str | None = None,
                 target_file_bytes: int | str = DEFAULT_TARGET_FILE_BYTES, min_parts: int | str = 2,
                 engine: CompactionEngine | CompactionEngineName | str = CompactionEngine.ARROW,
                 spark_conf: Mapping[str, str] | None = None, skip_missing: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not is_template(engine):
            _engine(engine, self.task_id, InvalidOptionError)
        self.tables = tables
        self.partitions = partitions
        self.target_file_bytes = target_file_bytes
        self.min_parts = min_parts
        self.engine = engine
        self.spark_conf = dict(spark_conf or {})
        self.skip_missing = skip_missing

    def execute(self, context: Context) -> CompactionSummary:
        engine = _engine(self.engine, self.task_id, AirflowFailException)
        target = _integer(self.target_file_bytes, "target_file_bytes", self.task_id)
        min_parts = _integer(self.min_parts, "min_parts", self.task_id)
        hook = self.hook
        with hook.warehouse() as wh:
            tables, skipped = self._tables(wh)
            partitions = _partitions_by_table(self.partitions, tables, self.task_id)
            compact = self._compactor(wh, engine, {**hook.spark_conf(), **self.spark_conf}, context)
            results: dict[str, CompactionReport] = {}
            for table in tables:
                try:
                    result = compact(table, partitions.get(table), target, min_parts)
                except _TRANSIENT:
                    raise
                except TxnError as exc:  # bad input: retrying cannot help
                    raise AirflowFailException(f"{self.task_id}: compaction of {table} refused: {exc}") from exc
                self.log.info("%s: %d of %d merge(s) done (%d yielded), parts %d -> %d, bytes %d -> %d", table,
                              result["merged"], result["groups"], result["yielded"], result["parts_before"],
                              result["parts_after"], result["bytes_before"], result["bytes_after"])
                results[table] = result
        reports = results.values()
        return CompactionSummary(
            engine=engine.value, tables=results, skipped=skipped, merged=sum(r["merged"] for r in reports),
            yielded=sum(r["yielded"] for r in reports), parts_before=sum(r["parts_before"] for r in reports),
            parts_after=sum(r["parts_after"] for r in reports), bytes_before=sum(r["bytes_before"] for r in reports),
            bytes_after=sum(r["bytes_after"] for r in reports))

    def _tables(self, wh: Warehouse) -> tuple[list[str], list[str]]:
        """The tables to compact, and the listed ones skipped because they do not exist."""
        if self.tables is None:
            return wh.tables(), []
        try:
            tables = coerce_tables(self.tables)
        except TxnError as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc
        if not tables:
            raise AirflowFailException(f"{self.task_id}: tables is empty; list the tables to compact "
                                       "(or leave tables=None for every table)")
        existing = set(wh.tables())
        missing = sorted(set(tables) - existing)
        if missing and not self.skip_missing:
            raise AirflowFailException(f"{self.task_id}: no such table(s) {missing}; the warehouse has "
                                       f"{sorted(existing)} (skip_missing=True skips them)")
        if missing:
            self.log.info("skipping table(s) that do not exist: %s", ", ".join(missing))
        return [t for t in dict.fromkeys(tables) if t in existing], missing

    def _compactor(self, wh: Warehouse, engine: CompactionEngine, spark_conf: Mapping[str, str],
                   context: Context) -> Compact:
        """Compaction on the chosen engine (the SparkSession starts here, for CompactionEngine.SPARK)."""
        if engine is CompactionEngine.ARROW:
            return lambda table, partitions, target, min_parts: wh.compact(table, partitions, target, min_parts)
        from airflow_txn.airflow.operators.spark import spark_session
        from airflow_txn.spark import compact as spark_compact

        ti = context["ti"]
        spark = spark_session(spark_conf, app_name=f"{ti.dag_id}.{ti.task_id}")
        return lambda table, partitions, target, min_parts: spark_compact(spark, wh, table, partitions, target,
                                                                          min_parts)


def _engine(value: object, task_id: str, error: type[Exception]) -> CompactionEngine:
    """The `engine` argument (a rendered template's text too) as a CompactionEngine; `error` (InvalidOptionError
    when the DAG is parsed, AirflowFailException when the task runs: no retry) names the engines otherwise."""
    try:
        return CompactionEngine.parse(value.strip() if isinstance(value, str) else value, "engine")
    except InvalidOptionError as exc:
        raise error(f"{task_id}: {exc}") from exc


class VacuumOperator(TxnBaseOperator):
    """Vacuum the warehouse: delete what no snapshot inside the retention window can see.

    :param retention_seconds: how far back snapshots stay readable (default 7 days; each table keeps
        at least its own policy, `wh.set_retention`).
    :param dry_run: report what would be removed and delete nothing.
    :param conn_id: the airflow_txn connection.

    XCom: `wh.vacuum`'s result (horizon, parts_removed, orphan_dirs_removed, bytes_freed, ...).
    """

    template_fields: Sequence[str] = ("retention_seconds", "vacuum_dry_run", "conn_id")
    ui_color = "#e6d3f0"

    def __init__(self, *, retention_seconds: float | str = DEFAULT_RETENTION_SECONDS, dry_run: bool | str = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.retention_seconds = retention_seconds
        self.vacuum_dry_run = dry_run  # BaseOperator.dry_run is a method

    def execute(self, context: Context) -> VacuumReport:
        retention = _seconds(self.retention_seconds, self.task_id)
        dry_run = _flag(self.vacuum_dry_run, "dry_run", self.task_id)
        with self.hook.warehouse() as wh:
            result = wh.vacuum(retention_seconds=retention, dry_run=dry_run)
        self.log.info("vacuum%s (retention %ss): %d part(s), %d orphan dir(s), %d bytes", " (dry run)" if dry_run
                      else "", retention, result["parts_removed"], result["orphan_dirs_removed"], result["bytes_freed"])
        return result


def _integer(value: Any, name: str, task_id: str) -> int:
    """A rendered integer argument (an int or its text); the range is the engine's to check."""
    if isinstance(value, bool):
        raise AirflowFailException(f"{task_id}: {name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError as exc:
        raise AirflowFailException(f"{task_id}: {name} must be an integer, got {value!r}") from exc


def _seconds(value: Any, task_id: str) -> float:
    try:
        seconds = float(str(value).strip()) if not isinstance(value, bool) else -1.0
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise AirflowFailException(f"{task_id}: retention_seconds must be a number of seconds >= 0, got {value!r}")
    return seconds


def _flag(value: Any, name: str, task_id: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise AirflowFailException(f"{task_id}: {name} must be true or false, got {value!r}")


def _literal(text: str, task_id: str) -> Any:
    if text in ("", "None", "null"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise AirflowFailException(f"{task_id}: partitions {text!r} is neither JSON nor a Python literal") from exc


def _partitions_by_table(value: object, tables: Sequence[str], task_id: str) -> dict[str, PartitionSpec]:
    """{table: partitions or None}: one list for every table, or a dict per table (also as the text
    a template renders them to: JSON or a Python literal)."""
    if isinstance(value, str):
        value = _literal(value.strip(), task_id)
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping) and all(isinstance(v, list | tuple) for v in value.values()):
        unknown = sorted(set(value) - set(tables))
        if unknown:
            raise AirflowFailException(f"{task_id}: partitions names table(s) {unknown} that are not compacted "
                                       f"here ({list(tables)})")
        return {table: list(parts) for table, parts in value.items()}
    if isinstance(value, list | tuple):
        return {table: list(value) for table in tables}
    raise AirflowFailException(f"{task_id}: partitions must be a list of {{column: value}} dicts or "
                               f"{{table: [dicts]}}, got {value!r}")
