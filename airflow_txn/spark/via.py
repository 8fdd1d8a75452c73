"""Which way airflow_txn.spark.write/read go, and the client side of the data-source way.

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
    MergeTask,
    StoredTable,
    WrittenPart,
    new_statement_id,
    open_statement,
    stored_table,
)
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import InvalidNameError, StorageError, TxnError
from airflow_txn.model.results import PartitionSpec
from airflow_txn.spark import datasource

NATIVE, DATASOURCE, AUTO = "native", "datasource", "auto"
WAYS = (AUTO, NATIVE, DATASOURCE)
_OUR_ERROR = re.compile(r"airflow_txn\.errors\.(\w+): (.*)")


def choose(spark: SparkSession, wh: Warehouse, via: str) -> str:
    """NATIVE or DATASOURCE for `via` (InvalidNameError for anything but WAYS)."""
    if via not in WAYS:
        raise InvalidNameError(f"via must be one of {WAYS}, got {via!r}")
    if via != AUTO:
        return via
    return DATASOURCE if is_connect(spark) or "://" in wh.config.root else NATIVE


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def write(df: DataFrame, txn: Transaction, table: str, mode: str, partitions: PartitionSpec | None,
          key: str | None, replaces: Sequence[int] | None = None) -> int:
    """airflow_txn.spark.write through the data source; returns the rows staged. `replaces`: the parts a
    copy-on-write rewrite replaces (mode "append"; cow.py), MergedAwayError when a background merge took one."""
    stmt = open_statement(txn, table, key, what=f"spark {mode} of {table}")  # the transaction may write
    datasource.check_schema(df.schema, stmt.stored)
    if partitions is not None:
        stmt.partition_keys(partitions)  # checked against the table here, again on the Spark side
    statement = new_statement_id()
    options = {**datasource.warehouse_options(txn.warehouse), "tid": txn.tid, "statement": statement}
    if stmt.key is not None:
        options["key"] = stmt.key
        if stmt.attempt is not None:
            options["attempt"] = str(stmt.attempt)
    if partitions is not None:
        options["partitions"] = json.dumps([dict(p) for p in partitions], default=str)
    if replaces is not None:
        options["replaces"] = json.dumps(list(replaces))
    datasource.register(df.sparkSession)
    try:
        with txn.keep_alive(), ours_raised():
            df.write.format(datasource.NAME).options(**options).mode(mode).save(stmt.stored.name)
    except BaseException:
        if not _registered(txn, stmt.stored.name, statement):
            _sweep(stmt.stored, txn.tid, statement)
        raise
    return sum(_staged(txn, stmt.stored.name, statement).values())


def read(spark: SparkSession, wh: Warehouse, table: str, csn: int | None, txn: Transaction | None,
         partitions: PartitionSpec | None, parts: Sequence[int] | None = None, part_id: bool = False,
         tag: str | None = None) -> DataFrame:
    """airflow_txn.spark.read through the data source, at a snapshot fixed now (the watermark when no csn/txn/tag).
    `parts`: exactly these parts of that view (MergedAwayError, when the query runs, if one is gone);
    `part_id`: each row also carries its part's id (column types.PART_ID)."""
    if sum(x is not None for x in (csn, txn, tag)) > 1:
        raise TxnError("pass one of csn (a committed snapshot), tag (a named one) or txn (a transaction's own "
                       "view), not several")
    stored = stored_table(wh, table)  # TableNotFoundError here, not inside a Spark job
    options = datasource.warehouse_options(wh)
    if txn is not None:
        options["tid"] = txn.tid
        if txn.default_key is not None:  # a keyed handle's read is recorded under its key (invariant 7)
            options["key"] = txn.default_key
            if txn.default_attempt is not None:
                options["attempt"] = str(txn.default_attempt)
    elif tag is not None:
        wh.tag_info(tag)  # TagNotFoundError here, not inside a Spark job
        options["tag"] = tag
    else:
        options["csn"] = str(csn if csn is not None else wh.readable_csn())
    if partitions is not None:
        options["partitions"] = json.dumps([dict(p) for p in partitions], default=str)
    if parts is not None:
        options["parts"] = json.dumps(list(parts))
    if part_id:
        options["part_id"] = "true"
    datasource.register(spark)
    with ours_raised():
        frame = spark.read.format(datasource.NAME).options(**options).load(stored.name)
    return frame


def write_merge(frame: DataFrame, wh: Warehouse, task: MergeTask) -> WrittenPart:
    """One merge of compaction through the data source: `frame` (the sources' rows) written by one Spark task as
    ONE plain part file of the merge, found again by its statement id; the core then swaps it in. On a failure
    the statement's files are deleted (the core rolls the merge back)."""
    stored = stored_table(wh, task.name)
    statement = new_statement_id()
    options = {**datasource.warehouse_options(wh), "merge": json.dumps(task.tags, default=str),
               "statement": statement}
    datasource.register(frame.sparkSession)
    try:
        with ours_raised():
            frame.coalesce(1).write.format(datasource.NAME).options(**options).mode("append").save(stored.name)
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


def _registered(txn: Transaction, table: str, statement: str) -> bool:
    """Whether the statement registered parts after all (the failure came after its commit)."""
    try:
        return bool(_staged(txn, table, statement))
    except TxnError:
        return True  # cannot tell: leave the files to vacuum, which judges them by the catalog


def _staged(txn: Transaction, table: str, statement: str) -> dict[str, int]:
    """{path: rows} of the parts statement `statement` registered in `table` (their file names start with
    its id; other statements of the transaction, say other tasks writing the same table, do not count)."""
    mark = f"p-{txn.tid}-{statement}"
    info = txn.warehouse.transaction_info(txn.tid)
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
