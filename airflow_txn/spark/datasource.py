"""The Spark data source "airflow_txn" (Spark 4's Python Data Source API): a transaction's writes and exact
snapshots through `df.write.format(...)` / `spark.read.format(...)`, with no Hadoop connector, so on any root
(local disk or object store) and through Spark Connect alike.

    airflow_txn.spark.register(spark)                       # once per session (idempotent)
    df.write.format("airflow_txn").option("tid", tid).mode("append").save("shop.orders")
    spark.read.format("airflow_txn").option("csn", 42).load("shop.orders")   # or option("tid"/"tag", ...)

Writing: the driver checks the transaction, the table and the DataFrame's schema when the write is planned
(nothing written on a mismatch); each Spark task conforms its Arrow batches to the table (the core's own
checks) and writes one plain Parquet file per partition straight to the root through `pyarrow.fs` (one PUT
each on an object store, its footer naming the transaction); the driver's `commit` registers every task's
files as the statement's parts in ONE catalog transaction (the core's statement rules: keys, attempts,
removal locks). A failed task deletes its own files; a failed job's files are deleted by `abort`, a failed
registration's by `commit`; a driver that dies leaves orphans named after the transaction, which vacuum
removes once its lease is over.

Reading: the visible parts packed into Spark partitions as Spark packs a native scan's files (read_splits),
read through the root's filesystem with the partition columns restored (typed as the table declares them).
Option `partitions` prunes parts on the driver; Spark's own filters are evaluated by Spark on the rows (why
not pushed down here: _Reader).

Options: `tid` (required to write; to read a transaction's own view), `csn`, `tag` (read at a named snapshot:
Warehouse.tag; the tag keeps its files while it exists), `key` and `attempt` (the staging key of a write, and the
key a read of `tid`'s own view is recorded under, so that a retry withdrawing what it read withdraws the reader's
work too: invariant 7; default: none), `partitions` (JSON list of {column: value}: an overwrite's partitions, or the
partitions a read keeps), `parallelism` (about how many Spark tasks a read of small parts is spread over; default:
the cores of the process planning the read), `statement` (16 hex digits starting the names of the statement's files,
so a failed statement's files can be found and deleted; default: a fresh one); for copy-on-write and compaction
(cow.py, compaction.py): `parts` (JSON list of part ids: a read of exactly those, MergedAwayError if one left the
view), `part_id` ("true": each row read also carries its part's id, column types.PART_ID), `replaces` (JSON list of
part ids an append replaces: a rewrite, checked to be still visible to the statement), `merge` (a merge's footer
tags as JSON: one task writes ONE plain part file of the merge, which the core swaps in; nothing is registered
here); and where the warehouse is: `catalog`, `catalog_password`, `root`, `oracle`, `storage.<setting>`
(endpoint_url, region, access_key_id, secret_access_key, ...); without them the Spark side's own AIRFLOW_TXN_* and
AWS_* environment applies. Spark's default `spark.redaction.regex` hides options whose names hold "secret",
"password" or "access key" from its UI and logs; airflow_txn.spark.write/read pass the warehouse's own settings this
way. """

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import LongType, StructType
from sqlalchemy.engine import make_url

from airflow_txn.core.adapter import (
    PartView,
    Statement,
    StoredTable,
    WrittenPart,
    new_statement_id,
    open_root,
    open_statement,
    plan_read,
    stored_table,
)
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import InvalidArgumentError, InvalidNameError, MergedAwayError, SchemaMismatchError
from airflow_txn.model.partitioning import WHOLE_TABLE, parse_partition_key
from airflow_txn.spark.types import PART_ID, check_frame_schema, to_arrow_schema, to_spark_schema

NAME = "airflow_txn"
STORAGE_PREFIX = "storage."
SPILL_BYTES = 128 * 1024 * 1024
"""A task writes a partition's rows once it holds this many bytes of them (more parts, bounded memory)."""
_WAREHOUSE_OPTIONS = ("catalog", "catalog_password", "root", "oracle")


def register(spark: SparkSession) -> None:
    """Register the data source "airflow_txn" with `spark` (a local session or Spark Connect); idempotent."""
    spark.dataSource.register(AirflowTxnDataSource)


def warehouse_options(wh: Warehouse) -> dict[str, str]:
    """The options that open `wh` on the Spark side: catalog (its password apart), root, oracle, settings."""
    url = make_url(wh.config.catalog_url)
    options = {"catalog": url.set(password=None).render_as_string(hide_password=False) if url.password else
               wh.config.catalog_url, "root": wh.config.root, "oracle": wh.config.oracle}
    if url.password:
        options["catalog_password"] = str(url.password)
    options.update({STORAGE_PREFIX + k: str(v) for k, v in wh.config.storage_options.items()})
    return options


_OPEN: dict[tuple[tuple[str, str], ...], Warehouse] = {}


def _warehouse(options: Mapping[str, str]) -> Warehouse:
    """The warehouse the options name (else the Spark side's environment), opened once per Python worker."""
    chosen = {k: str(v) for k, v in options.items() if k in _WAREHOUSE_OPTIONS or k.startswith(STORAGE_PREFIX)}
    key = tuple(sorted(chosen.items()))
    found = _OPEN.get(key)
    if found is None:
        catalog = chosen.get("catalog")
        if catalog and chosen.get("catalog_password"):
            catalog = make_url(catalog).set(password=chosen["catalog_password"]).render_as_string(hide_password=False)
        storage = {k[len(STORAGE_PREFIX):]: v for k, v in chosen.items() if k.startswith(STORAGE_PREFIX)}
        found = _OPEN[key] = Warehouse.open(catalog=catalog or None, root=chosen.get("root") or None,
                                            oracle=chosen.get("oracle") or None, storage_options=storage or None)
    return found


def _table_name(options: Mapping[str, str]) -> str:
    table = options.get("path")
    if not table:
        raise InvalidNameError('name the table: .save("namespace.table") / .load("namespace.table")')
    return str(table)


def _transaction(wh: Warehouse, options: Mapping[str, str]) -> Transaction:
    """The transaction of option `tid`, staging under option `key` (and `attempt`) when given."""
    txn = wh.attach(str(options["tid"]))
    key = options.get("key")
    if key:
        attempt = options.get("attempt")
        txn.use_key(str(key), _integer(attempt, "attempt") if attempt else None)
    return txn


def _flag(options: Mapping[str, str], name: str) -> bool:
    value = str(options.get(name) or "false").lower()
    if value not in ("true", "false"):
        raise InvalidNameError(f"option {name!r} must be true or false, got {options.get(name)!r}")
    return value == "true"


def _part_ids(options: Mapping[str, str], name: str) -> list[int] | None:
    """Option `name` as a list of part ids (a JSON list of whole numbers), None when not given."""
    value = options.get(name)
    if value is None:
        return None
    try:
        found = json.loads(value)
    except ValueError:
        found = None
    if not isinstance(found, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in found):
        raise InvalidNameError(f"option {name!r} must be a JSON list of part ids, got {value!r}")
    return [int(i) for i in found]


def _integer(value: object, name: str) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise InvalidArgumentError(f"option {name!r} must be a whole number, got {value!r}") from None


class AirflowTxnDataSource(DataSource):
    """`format("airflow_txn")`: the table named by `.save(...)`/`.load(...)` of the warehouse in the options."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        schema = to_spark_schema(stored_table(_warehouse(self.options), _table_name(self.options)).schema)
        if _flag(self.options, "part_id"):
            schema = schema.add(PART_ID, LongType(), nullable=False)
        return schema

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if self.options.get("merge"):
            return _MergeWriter(dict(self.options), schema)
        return _Writer(dict(self.options), schema, overwrite)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(_plan_read(dict(self.options)), to_arrow_schema(schema))


# -- writing ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _TaskParts(WriterCommitMessage):
    """What one Spark task wrote: [(partition key, written part)]."""

    parts: tuple[tuple[str, WrittenPart], ...]


@dataclass(frozen=True)
class _WritePlan:
    """The statement as planned on the driver (picklable: every task gets it)."""

    options: dict[str, str]
    table: StoredTable
    tags: dict[str, Any]
    removals: tuple[int, ...]
    scanned: tuple[str, ...] | None
    listed: tuple[str, ...] | None
    """The partition keys an overwrite of listed partitions may write (None: any)."""
    rewrite: bool = False
    """A copy-on-write rewrite (option `replaces`): a merge that took some of the removals meanwhile leaves
    the transaction usable (MergedAwayError: the client chooses its parts again)."""


class _Writer(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if not options.get("tid"):
            raise InvalidNameError('writing needs the transaction: .option("tid", t.tid)')
        wh = _warehouse(options)
        table = _table_name(options)
        txn = _transaction(wh, options)
        mode = "overwrite" if overwrite else "append"
        stmt = open_statement(txn, table, what=f"spark {mode} of {table} (data source)")
        stored = stmt.stored
        check_schema(schema, stored)
        listed = _listed(options.get("partitions"), stmt, overwrite)
        replaces = _part_ids(options, "replaces")
        removals: list[int] = []
        scanned: tuple[str, ...] | None = None
        if overwrite:
            if replaces is not None:
                raise InvalidNameError("option 'replaces' goes with mode('append'): the rewrite replaces those parts")
            victims = stmt.visible_parts(listed)
            stmt.check_replaceable(victims)
            removals = [p.id for p in victims]
            scanned = tuple(listed or [WHOLE_TABLE])
        elif replaces is not None:  # a copy-on-write rewrite of parts the client chose from the whole table
            stmt.check_replaceable(_chosen(stmt, replaces))
            removals, scanned = replaces, (WHOLE_TABLE,)
        statement = options.get("statement") or new_statement_id()
        tags = {"tid": txn.tid, "key": stmt.key, "writer": "spark-datasource", "statement": statement}
        self.plan = _WritePlan(options, stored, tags, tuple(removals), scanned,
                               None if listed is None else tuple(listed), replaces is not None)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _TaskParts:
        """One Spark task: its rows, conformed, as plain part files (deleted again if the task fails)."""
        table = self.plan.table
        written: list[tuple[str, WrittenPart]] = []
        buffered: list[pa.RecordBatch] = []
        size = 0
        try:
            for batch in iterator:
                buffered.append(batch)
                size += batch.nbytes
                if size >= SPILL_BYTES:
                    written += self._write(pa.Table.from_batches(buffered))
                    buffered, size = [], 0
            if buffered:
                written += self._write(pa.Table.from_batches(buffered))
        except BaseException:
            table.delete_parts([part.path for _, part in written])
            raise
        return _TaskParts(tuple(written))

    def _write(self, rows: pa.Table) -> list[tuple[str, WrittenPart]]:
        conformed = self.plan.table.conformed(rows)
        written = self.plan.table.write_parts(conformed, self.plan.tags)
        stray = [k for k, _ in written if self.plan.listed is not None and k not in self.plan.listed]
        if stray:
            self.plan.table.delete_parts([part.path for _, part in written])
            raise SchemaMismatchError(
                f"overwrite of {self.plan.table.name} lists partitions "
                f"{[parse_partition_key(k) for k in self.plan.listed or ()]} but the DataFrame also holds rows of "
                f"{parse_partition_key(stray[0])}; nothing was staged")
        return written

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """On the driver: every task's parts registered as the statement's, in one catalog transaction."""
        written = [(parse_partition_key(k), part) for m in messages if isinstance(m, _TaskParts) for k, part in m.parts]
        try:
            wh = _warehouse(self.plan.options)
            txn = _transaction(wh, self.plan.options)
            stmt = open_statement(txn, self.plan.table.name, what=f"spark write of {self.plan.table.name} (commit)")
            stmt.register(written, list(self.plan.removals), list(self.plan.scanned) if self.plan.scanned else None,
                          choose_again=self.plan.rewrite)
            if self.plan.scanned is not None:
                stmt.record_read_set(None if self.plan.listed is None else list(self.plan.listed))
        except BaseException:
            self.plan.table.delete_parts([part.path for _, part in written])
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """The job failed: delete what its tasks wrote (a failed task deleted its own; a task that finished
        may not have reported it yet, so the statement's files are also found by name)."""
        self.plan.table.delete_parts([part.path for m in messages if isinstance(m, _TaskParts) for _, part in m.parts])
        self.plan.table.delete_statement_files(str(self.plan.tags["tid"]), str(self.plan.tags["statement"]))


def _chosen(stmt: Statement, ids: Sequence[int]) -> list[PartView]:
    """The parts `ids` among those the statement sees; MergedAwayError (the transaction stays usable) when one
    is no longer there: a background merge combined it with others since it was chosen."""
    visible = {p.id: p for p in stmt.visible_parts()}
    gone = [i for i in ids if i not in visible]
    if gone:
        raise MergedAwayError(f"part {gone[0]} of {stmt.stored.name} is no longer visible to the statement (a "
                              "background merge combined it with others): choose the parts again")
    return [visible[i] for i in ids]


class _MergeWriter(DataSourceArrowWriter):
    """Option `merge` (the merge's footer tags, JSON: compaction through the data source): the one Spark task
    of a coalesced frame writes all its rows as ONE plain part file of the merge, which nothing registers here:
    the client finds it by the statement id and hands it to the core's swap (compaction.py)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        stored = stored_table(_warehouse(options), _table_name(options))
        check_schema(schema, stored)
        try:
            tags = json.loads(options["merge"])
        except ValueError as exc:
            raise InvalidNameError(f"option 'merge' must be the merge's tags as JSON: {exc}") from None
        if not isinstance(tags, dict) or not tags.get("tid") or not options.get("statement"):
            raise InvalidNameError("option 'merge' needs the merge's tags (with its tid) and option 'statement'")
        self.table = stored
        self.tags = {**tags, "statement": str(options["statement"])}

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        batches = list(iterator)
        rows = self.table.conformed(pa.Table.from_batches(batches) if batches else self.table.schema.empty_table())
        partition = {str(k): None if v is None else str(v) for k, v in dict(self.tags.get("partition") or {}).items()}
        open_root(self.table.root, self.table.storage_options).write_part(self.table.directory, partition, rows,
                                                                         {**self.tags, "table": self.table.name})
        return WriterCommitMessage()


def check_schema(schema: StructType, table: StoredTable) -> None:
    """SchemaMismatchError listing every difference between the DataFrame's columns and the table's."""
    check_frame_schema(schema, table.schema, table.name)


def _listed(value: str | None, stmt: Statement, overwrite: bool) -> list[str] | None:
    """The partition keys of option `partitions` (a JSON list of {column: value}), checked against the table."""
    if value is None:
        return None
    if not overwrite:
        raise InvalidNameError("option 'partitions' only goes with mode('overwrite')")
    return stmt.partition_keys(_json_list(value, "partitions"))


def _json_list(value: str, name: str) -> list[Any]:
    try:
        found = json.loads(value)
    except ValueError as exc:
        raise InvalidNameError(f"option {name!r} must be a JSON list of {{column: value}}: {exc}") from None
    if not isinstance(found, list):
        raise InvalidNameError(f"option {name!r} must be a JSON list of {{column: value}}, got {value!r}")
    return found


# -- reading ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _PartsToRead(InputPartition):
    """The parts one Spark task reads, one after the other."""

    parts: tuple[PartView, ...]


_MAX_SPLIT_BYTES = 128 * 1024 * 1024
"""Spark's spark.sql.files.maxPartitionBytes default: the most bytes of parts one task reads."""
_OPEN_COST_BYTES = 4 * 1024 * 1024
"""Spark's spark.sql.files.openCostInBytes default: what opening one more part costs, counted as bytes."""


def read_splits(parts: Sequence[PartView], parallelism: int) -> list[tuple[PartView, ...]]:
    """`parts` packed into tasks the way Spark packs the files of a native scan: largest first, each task up
    to min(128 MiB, the total / `parallelism`) counting 4 MiB per part opened, so many small parts make a
    few tasks (one Python task per part was most of a data-source read of 100 small parts: B12)."""
    total = sum(p.size_bytes + _OPEN_COST_BYTES for p in parts)
    limit = min(_MAX_SPLIT_BYTES, max(_OPEN_COST_BYTES, total // max(1, parallelism)))
    splits: list[tuple[PartView, ...]] = []
    current: list[PartView] = []
    size = 0
    for part in sorted(parts, key=lambda p: p.size_bytes, reverse=True):
        if current and size + part.size_bytes > limit:
            splits.append(tuple(current))
            current, size = [], 0
        current.append(part)
        size += part.size_bytes + _OPEN_COST_BYTES
    if current:
        splits.append(tuple(current))
    return splits


@dataclass
class _ReadPlan:
    table: StoredTable
    parts: list[PartView]
    part_id: bool = False
    """Each row also carries its part's id (column PART_ID): what a copy-on-write statement counts by."""
    parallelism: int = 2
    """How many tasks Spark runs at once (option `parallelism`; default: this process's cores), which
    read_splits spreads small parts over."""


def _plan_read(options: dict[str, str]) -> _ReadPlan:
    wh = _warehouse(options)
    table = _table_name(options)
    if sum(bool(options.get(o)) for o in ("tid", "csn", "tag")) > 1:
        raise InvalidNameError("read one of a transaction's own view (tid), a committed snapshot (csn) or a tag "
                               "(tag), not several")
    txn = _transaction(wh, options) if options.get("tid") else None  # with its key: the read is recorded under it
    csn = _integer(options["csn"], "csn") if options.get("csn") else None
    partitions = _json_list(options["partitions"], "partitions") if options.get("partitions") else None
    only = _part_ids(options, "parts")
    plan = plan_read(wh, table, csn=csn, txn=txn, partitions=partitions, tag=options.get("tag") or None)
    parts = list(plan.parts)
    if only is not None:  # exactly the parts a statement or a merge chose
        seen = {p.id: p for p in parts}
        gone = [i for i in only if i not in seen]
        if gone:
            raise MergedAwayError(f"part {gone[0]} of {table} is not visible in this read (a background merge "
                                  "combined it with others since it was chosen): choose the parts again")
        parts = [seen[i] for i in only]
    parallelism = _integer(options["parallelism"], "parallelism") if options.get("parallelism") else None
    return _ReadPlan(plan.stored, parts, _flag(options, "part_id"), parallelism or os.cpu_count() or 2)


class _Reader(DataSourceReader):
    """No pushFilters, on purpose: Spark 4.3 keeps what a filter pushdown planned on the data source object
    that every scan of one DataFrame shares, so a filtered query's pruned part list leaked into later queries
    of the unfiltered DataFrame (its count fell from 3 to 1, locally and through Spark Connect; fixed in
    Spark's main branch, where the read info stays with each scan). Spark filters the rows itself; option
    `partitions` prunes parts on the driver."""

    def __init__(self, plan: _ReadPlan, declared: pa.Schema) -> None:
        self.plan = plan
        self.declared = declared
        """The Arrow form of the schema this source declared (schema()): what every batch must be exactly."""

    def partitions(self) -> Sequence[InputPartition]:
        return [_PartsToRead(split) for split in read_splits(self.plan.parts, self.plan.parallelism)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, _PartsToRead):  # Spark reads one empty partition when there are none
            return
        for part in partition.parts:
            rows = self.plan.table.read_part(part).cast(self.plan.table.schema)
            if self.plan.part_id:
                ids = pa.array([part.id] * rows.num_rows, pa.int64())
                rows = rows.append_column(pa.field(PART_ID, pa.int64(), nullable=False), ids)
            # Spark checks each batch against the declared schema, nullability included: the stored types cast to
            # Spark's (large_string -> string, timestamp[s]/[ms] -> [us], any zone -> UTC, the same instant)
            yield from rows.cast(self.declared).to_batches()
