"""Which way airflow_txn.spark.write/read go (model/options.Via), and the client side of the data-source way.

    native       Spark's own Parquet writer and reader, through Hadoop's filesystem: the root must be a path
                 every executor reaches (a local or shared filesystem); fastest where it works
    datasource   the "airflow_txn" data source (datasource.py): files written and read through pyarrow.fs on
                 the executors, so any root (s3://, gs://, ...) and Spark Connect, with no Hadoop connector
    auto         (default) datasource for an object-store root or a Spark Connect session, else native

The data-source way checks everything it can in this process before Spark runs anything (the transaction,
the table, the DataFrame's schema: typed errors, nothing staged), passes the warehouse's settings as options,
keeps the transaction's lease alive while the job runs, and turns an airflow_txn error raised on the Spark side
back into its own type.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

from airflow_txn import errors
from airflow_txn.core.adapter import (
    APPEND,
    OVERWRITE,
    MergePlan,
    ReadPlan,
    StoredTable,
    WritePlan,
    WrittenPart,
    plan_read,
)
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import StorageError, TxnError
from airflow_txn.model.options import Via, ViaName
from airflow_txn.model.results import PartitionSpec
from airflow_txn.spark import datasource

NATIVE, DATASOURCE, AUTO = Via.NATIVE, Via.DATASOURCE, Via.AUTO
_OUR_ERROR = re.compile(r"airflow_txn\.errors\.(\w+): (.*)")


def choose(spark: SparkSession, wh: Warehouse, via: Via | ViaName) -> Via:
    """NATIVE or DATASOURCE for `via` (InvalidOptionError for anything but a Via or its string)."""
    way = Via.parse(via, "via")
    if way is not AUTO:
        return way
    return DATASOURCE if is_connect(spark) or "://" in wh.config.root else NATIVE


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def write(df: DataFrame, plan: WritePlan) -> int:
    """airflow_txn.spark.write through the data source: the statement `plan` (adapter.open_write, decided in this
    process: the transaction, the table, what it replaces), carried to the data source as its option `write_plan`;
    returns the rows staged. A REWRITE whose parts a background merge took raises MergedAwayError."""
    datasource.check_schema(df.schema, plan.table)
    wh = plan.warehouse
    options = {**datasource.warehouse_options(wh), "write_plan": plan.to_json()}
    datasource.register(df.sparkSession)
    try:
        with plan.keep_alive(), ours_raised():
            df.write.format(datasource.NAME).options(**options).mode(
                (OVERWRITE if plan.mode is OVERWRITE else APPEND).value).save(plan.table.name)
    except BaseException:
        if not _registered(wh, plan.tid, plan.table.name, plan.statement):
            _sweep(plan.table, plan.tid, plan.statement)
        raise
    return sum(_staged(wh, plan.tid, plan.table.name, plan.statement).values())


def read(spark: SparkSession, wh: Warehouse, table: str, csn: int | None, txn: Transaction | None,
         partitions: PartitionSpec | None, parts: Sequence[int] | None = None, part_id: bool = False,
         tag: str | None = None) -> DataFrame:
    """airflow_txn.spark.read through the data source, planned here by the core's read planner (adapter.plan_read:
    its errors raised here, the read recorded once) and carried to the data source as its option `read_plan`.
    `parts`: exactly these parts of that view (MergedAwayError if one is gone); `part_id`: each row also carries
    its part's id (column types.PART_ID)."""
    return read_planned(spark, wh, plan_read(wh, table, csn=csn, txn=txn, partitions=partitions, tag=tag, parts=parts),
                        part_id)


def read_planned(spark: SparkSession, wh: Warehouse, plan: ReadPlan, part_id: bool = False) -> DataFrame:
    """The rows of a read the core planned (`plan`: plan_read's, or the parts a write plan or a merge plan
    rewrites), through the data source (option `read_plan`)."""
    options = {**datasource.warehouse_options(wh), "read_plan": plan.to_json()}
    if part_id:
        options["part_id"] = "true"
    datasource.register(spark)
    with ours_raised():
        frame = spark.read.format(datasource.NAME).options(**options).load(plan.stored.name)
        frame.schema  # noqa: B018  Spark Connect analyzes lazily: a data-source error comes here, not at an action
    return frame


def write_merge(frame: DataFrame, wh: Warehouse, task: MergePlan) -> WrittenPart:
    """One merge of compaction through the data source: `frame` (the sources' rows) written by one Spark task as
    ONE plain part file of the merge, found again by its statement id; the core then swaps it in. On a failure
    the statement's files are deleted (the core rolls the merge back)."""
    stored, statement = task.table, task.statement
    options = {**datasource.warehouse_options(wh), "merge": json.dumps(task.tags, default=str),
               "statement": statement, "merge_table": json.dumps(stored.to_dict())}
    datasource.register(frame.sparkSession)
    try:
        with ours_raised():
            frame.coalesce(1).write.format(datasource.NAME).options(**options).mode(APPEND.value).save(stored.name)
        written = stored.statement_parts(task.tid, statement)
        if len(written) != 1:
            raise StorageError(f"the merge {task.tid} of {stored.name} left {len(written)} part files instead of one")
    except BaseException:
        _sweep(stored, task.tid, statement)
        raise
    return written[0]


SWEEP_PAUSE_S = 0.5
SWEEP_MIN_S = 3.0
SWEEP_MAX_S = 10.0


def _sweep(table: StoredTable, tid: str, statement: str) -> None:
    """Delete the failed statement's files. Spark reports a failed job without waiting for its other tasks,
    which may still be writing (a task whose Python worker was still starting finishes seconds later): list
    again every SWEEP_PAUSE_S for at least SWEEP_MIN_S, and on until a round finds nothing (SWEEP_MAX_S at
    most). What a task writes later still is an orphan of the transaction, which vacuum removes."""
    start = time.monotonic()
    while True:
        found = table.delete_statement_files(tid, statement)
        waited = time.monotonic() - start
        if waited >= SWEEP_MAX_S or (waited >= SWEEP_MIN_S and not found):
            return
        time.sleep(SWEEP_PAUSE_S)


def _registered(wh: Warehouse, tid: str, table: str, statement: str) -> bool:
    """Whether the statement registered parts after all (the failure came after its commit)."""
    try:
        return bool(_staged(wh, tid, table, statement))
    except TxnError:
        return True  # cannot tell: leave the files to vacuum, which judges them by the catalog


def _staged(wh: Warehouse, tid: str, table: str, statement: str) -> dict[str, int]:
    """{path: rows} of the parts statement `statement` registered in `table` (their file names start with
    its id; other statements of the transaction, say other tasks writing the same table, do not count)."""
    mark = f"p-{tid}-{statement}"
    info = wh.transaction_info(tid)
    return {p["path"]: int(p["rows"]) for p in info["parts"]
            if p["role"] == "created" and p["table"] == table and p["path"].rsplit("/", 1)[-1].startswith(mark)}


@contextmanager
def ours_raised() -> Iterator[None]:
    """Re-raise an airflow_txn error that the Spark side raised (inside a Spark exception) as its own type."""
    try:
        yield
    except TxnError:
        raise
    except Exception as exc:
        found = _OUR_ERROR.findall(str(exc))
        error = getattr(errors, found[-1][0], None) if found else None
        if not (isinstance(error, type) and issubclass(error, TxnError)):
            raise
        try:
            ours = error(found[-1][1].strip())
        except TypeError:  # an error class that needs more than its message
            raise exc from None
        raise ours from exc
