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

Planning is the core's (docs/ARCHITECTURE.md, "The two plans"): `airflow_txn.spark.write/read` plan on the client
(adapter.open_write / plan_read: their errors raised there) and pass the plan as option `write_plan` / `read_plan`
(JSON, the root's settings left out), so the Spark side decides nothing and asks the catalog nothing before the
commit; a direct `format("airflow_txn")` use plans here from the options below with the same two functions.

Options: `tid` (required to write; to read a transaction's own view), `csn`, `tag` (read at a named snapshot:
Warehouse.tag; the tag keeps its files while it exists), `key` and `attempt` (the staging key of a write, and the
key a read of `tid`'s own view is recorded under, so that a retry withdrawing what it read withdraws the reader's
work too: invariant 7; default: none), `partitions` (JSON list of {column: value}: an overwrite's partitions, or the
partitions a read keeps), `parallelism` (about how many Spark tasks a read of small parts is spread over; default:
the cores of the process planning the read), `statement` (16 hex digits starting the names of the statement's files,
so a failed statement's files can be found and deleted; default: a fresh one); for copy-on-write and compaction
(cow.py, compaction.py): `parts` (JSON list of part ids: a read of exactly those, MergedAwayError if one left the
view), `part_id` ("true": each row read also carries its part's id, column types.PART_ID), `replaces` (JSON list of
part ids an append replaces: a rewrite, checked to be still visible to the statement and free), `merge` (a merge's
footer tags as JSON: one task writes ONE plain part file of the merge, which the core swaps in; nothing is registered
here; `merge_table`: the table as of the merge's version, JSON); `mergeSchema` ("true": a write first adds the
DataFrame's new columns and widenings to the table, in the same statement: evolve.py); and where the warehouse
is: `catalog`, `catalog_password`, `root`, `oracle`, `storage.<setting>` (endpoint_url, region, access_key_id,
secret_access_key, ...); without them the Spark side's own AIRFLOW_TXN_* and AWS_* environment applies. Spark's
default `spark.redaction.regex` hides options whose names hold "secret", "password" or "access key" from its UI and
logs; airflow_txn.spark.write/read pass the warehouse's own settings this way. """

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

from airflow_txn.errors import InvalidArgumentError, InvalidNameError
from airflow_txn.model.partitioning import parse_partition_key
from airflow_txn.spark.types import PART_ID, check_frame_schema, to_arrow_schema, to_spark_schema

if TYPE_CHECKING:
    from airflow_txn.core.adapter import PartView, ReadPlan, StoredTable, WritePlan, WrittenPart
    from airflow_txn.core.transaction import Transaction
    from airflow_txn.core.warehouse import Warehouse

# What runs in Spark's Python workers (a task's read/write, unpickling the reader and writer: StoredTable, PartView)
# loads no catalog and no SQLAlchemy: the core's modules are imported inside the functions that plan, open the
# warehouse or commit (Spark's planning and committing workers). Each task's worker imports this module (pickled
# classes are found by reference), and the whole core cost about a second of CPU there
# (tests/spark/test_worker_imports.py).

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
    from sqlalchemy.engine import make_url

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
        from sqlalchemy.engine import make_url

        from airflow_txn.core.warehouse import Warehouse

        catalog = chosen.get("catalog")
        if catalog and chosen.get("catalog_password"):
            catalog = make_url(catalog).set(password=chosen["catalog_password"]).render_as_string(hide_password=False)
        storage = {k[len(STORAGE_PREFIX):]: v for k, v in chosen.items() if k.startswith(STORAGE_PREFIX)}
        found = _OPEN[key] = Warehouse.open(catalog=catalog or None, root=chosen.get("root") or None,
                                            oracle=chosen.get("oracle") or None, storage_options=storage or None)
    return found


def _table_name(options: Mapping[str, str]) -> str:
    """Option `table` (a table of Spark's catalog, register_tables: Spark makes `path` its location), else the
    name given to .save(...)/.load(...)."""
    table = options.get("table") or options.get("path")
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
    given = options.get(name.lower(), options.get(name))  # Spark hands a data source its options' names lowercased
    value = str(given or "false").lower()
    if value not in ("true", "false"):
        raise InvalidNameError(f"option {name!r} must be true or false, got {given!r}")
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
        from airflow_txn.core.adapter import ReadPlan, WritePlan, stored_table

        if self.options.get("read_plan"):  # planned by the client (via.read)
            stored = ReadPlan.from_json(str(self.options["read_plan"]), {}).stored
        elif self.options.get("write_plan"):  # planned by the client (via.write)
            stored = WritePlan.from_json(str(self.options["write_plan"]), {}).table
        elif self.options.get("csn") or self.options.get("tag"):  # a read: its planning errors come at load()
            self._planned = _plan_read(dict(self.options)).to_json()
            stored = ReadPlan.from_json(self._planned, {}).stored
        elif self.options.get("tid"):  # a transaction's view (planned and recorded once, by reader()) or a write:
            wh = _warehouse(self.options)   # the version of the schema it sees, its own changes included
            stored = stored_table(wh, _table_name(self.options), txn=_transaction(wh, self.options))
        else:
            stored = stored_table(_warehouse(self.options), _table_name(self.options))
        schema = to_spark_schema(stored.schema)
        if _flag(self.options, "part_id"):
            schema = schema.add(PART_ID, LongType(), nullable=False)
        return schema

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if self.options.get("merge"):
            return _MergeWriter(dict(self.options), schema)
        return _Writer(dict(self.options), schema, overwrite)

    def reader(self, schema: StructType) -> DataSourceReader:
        from airflow_txn.core.adapter import ReadPlan

        options = dict(self.options)
        planned = options.get("read_plan") or getattr(self, "_planned", None)
        plan = ReadPlan.from_json(planned, _storage(options)) if planned else _plan_read(options)
        parallelism = _integer(options["parallelism"], "parallelism") if options.get("parallelism") else None
        return _Reader(_ReadPlan(plan.stored, list(plan.parts), _flag(options, "part_id"),
                                 parallelism or os.cpu_count() or 2), to_arrow_schema(schema))


def _storage(options: Mapping[str, str]) -> dict[str, str]:
    """The root's settings the warehouse of `options` is opened with (its `storage.*`, else the environment)."""
    return dict(_warehouse(options).config.storage_options)


# -- writing ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _TaskParts(WriterCommitMessage):
    """What one Spark task wrote: [(partition key, written part)]."""

    parts: tuple[tuple[str, WrittenPart], ...]


class _Writer(DataSourceArrowWriter):
    """A statement through the data source: its plan (adapter.open_write) made by the client (option `write_plan`,
    via.write) or here from the options; each task writes plain part files and the driver commits them. It pickles
    the plan as JSON: a task needs only the table and the file tags (and the plan itself only for an overwrite of
    listed partitions, to check what it wrote), so a task's worker never loads the core (see the imports)."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        from airflow_txn.core.adapter import OVERWRITE, WritePlan

        if options.get("write_plan"):
            plan = WritePlan.from_json(str(options["write_plan"]), _storage(options))
            if (plan.mode is OVERWRITE) != overwrite or plan.table.name != _table_name(options):
                raise InvalidNameError(f"option 'write_plan' is a {plan.mode} of {plan.table.name}, not this write")
        else:
            plan = _open_write(options, overwrite, schema)
        check_schema(schema, plan.table)
        self.options = options
        self.table = plan.table
        self.tags = plan.file_tags("spark-datasource")
        self.some_partitions = plan.allowed is not None
        """An overwrite of listed partitions: each task checks the partitions it wrote (plan.check_written)."""
        self._plan_json = plan.to_json()
        self._plan: WritePlan | None = plan

    @property
    def plan(self) -> WritePlan:
        """The statement's plan (in another process: rebuilt from its JSON, where the core is loaded)."""
        if self._plan is None:
            from airflow_txn.core.adapter import WritePlan

            self._plan = WritePlan.from_json(self._plan_json, self.table.storage_options)
        return self._plan

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_plan": None}  # the plan travels as its JSON (a pickled one loads the core)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _TaskParts:
        """One Spark task: its rows, conformed, as plain part files (deleted again if the task fails)."""
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
            self.table.delete_parts([part.path for _, part in written])
            raise
        return _TaskParts(tuple(written))

    def _write(self, rows: pa.Table) -> list[tuple[str, WrittenPart]]:
        conformed = self.table.conformed(rows)
        written = self.table.write_parts(conformed, self.tags)
        if not self.some_partitions:  # any partition may be written: nothing to check (check_written passes)
            return written
        try:
            self.plan.check_written([k for k, _ in written])  # a stray partition fails the task at once
        except BaseException:
            self.table.delete_parts([part.path for _, part in written])
            raise
        return written

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """On the driver: every task's parts committed as the statement's, in one catalog transaction."""
        written = [(parse_partition_key(k), part) for m in messages if isinstance(m, _TaskParts) for k, part in m.parts]
        try:
            self.plan.commit(written, _warehouse(self.options))
        except BaseException:
            self.table.delete_parts([part.path for _, part in written])
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """The job failed: delete what its tasks wrote (a failed task deleted its own; a task that finished
        may not have reported it yet, so the statement's files are also found by name)."""
        self.table.delete_parts([part.path for m in messages if isinstance(m, _TaskParts) for _, part in m.parts])
        self.table.delete_statement_files(self.plan.tid, self.plan.statement)


def _open_write(options: Mapping[str, str], overwrite: bool, schema: StructType) -> WritePlan:
    """The statement the options describe (no `write_plan`: a write through df.write.format(...) itself); option
    `mergeSchema` "true": the DataFrame's (`schema`) new columns and widenings first (evolve.py)."""
    from airflow_txn.core.adapter import APPEND, OVERWRITE, REWRITE, open_write
    from airflow_txn.spark import evolve

    if not options.get("tid"):
        raise InvalidNameError('writing needs the transaction: .option("tid", t.tid)')
    wh = _warehouse(options)
    table = _table_name(options)
    txn = _transaction(wh, options)
    replaces = _part_ids(options, "replaces")
    if replaces is not None and overwrite:
        raise InvalidNameError("option 'replaces' goes with mode('append'): the rewrite replaces those parts")
    partitions = _json_list(options["partitions"], "partitions") if options.get("partitions") is not None else None
    if partitions is not None and not overwrite:
        raise InvalidNameError("option 'partitions' only goes with mode('overwrite')")
    mode = OVERWRITE if overwrite else REWRITE if replaces is not None else APPEND
    if _flag(options, "mergeSchema"):
        evolve.merge_schema(txn, table, schema, None)
    plan = open_write(txn, table, mode, partitions, replaces, what=f"spark {mode} of {table} (data source)")
    statement = options.get("statement")
    return plan.with_statement(str(statement)) if statement else plan


class _MergeWriter(DataSourceArrowWriter):
    """Option `merge` (the merge's footer tags, JSON: compaction through the data source): the one Spark task
    of a coalesced frame writes all its rows as ONE plain part file of the merge, which nothing registers here:
    the client finds it by the statement id and hands it to the core's swap (compaction.py)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        from airflow_txn.core.adapter import StoredTable, stored_table

        if options.get("merge_table"):  # the table as of the version the merge's sources were written under
            stored = StoredTable.from_dict(_json_object(str(options["merge_table"]), "merge_table"), _storage(options))
        else:
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
        self.table.write_merge_part(partition, rows, self.tags)
        return WriterCommitMessage()


def check_schema(schema: StructType, table: StoredTable) -> None:
    """SchemaMismatchError listing every difference between the DataFrame's columns and the table's."""
    check_frame_schema(schema, table.schema, table.name)


def _json_object(value: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = _json_option(value, name, dict, "a JSON object")
    return found


def _json_list(value: str, name: str) -> list[Any]:
    found: list[Any] = _json_option(value, name, list, "a JSON list of {column: value}")
    return found


def _json_option(value: str, name: str, kind: type, what: str) -> Any:
    """Option `name`'s JSON text, which must hold `what` (a value of `kind`): InvalidNameError naming it otherwise."""
    try:
        found = json.loads(value)
    except ValueError as exc:
        raise InvalidNameError(f"option {name!r} must be {what}: {exc}") from None
    if not isinstance(found, kind):
        raise InvalidNameError(f"option {name!r} must be {what}, got {value[:80]!r}")
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
    """Each written under the table's version or under PartView.written_schema (StoredTable.read_part projects it)."""
    part_id: bool = False
    """Each row also carries its part's id (column PART_ID): what a copy-on-write statement counts by."""
    parallelism: int = 2
    """How many tasks Spark runs at once (option `parallelism`; default: this process's cores), which
    read_splits spreads small parts over."""


def _plan_read(options: dict[str, str]) -> ReadPlan:
    """The read the options describe (no `read_plan`: a read through spark.read.format(...) itself)."""
    from airflow_txn.core.adapter import plan_read

    wh = _warehouse(options)
    table = _table_name(options)
    if sum(bool(options.get(o)) for o in ("tid", "csn", "tag")) > 1:
        raise InvalidNameError("read one of a transaction's own view (tid), a committed snapshot (csn) or a tag "
                               "(tag), not several")
    txn = _transaction(wh, options) if options.get("tid") else None  # with its key: the read is recorded under it
    csn = _integer(options["csn"], "csn") if options.get("csn") else None
    partitions = _json_list(options["partitions"], "partitions") if options.get("partitions") else None
    return plan_read(wh, table, csn=csn, txn=txn, partitions=partitions, tag=options.get("tag") or None,
                     parts=_part_ids(options, "parts"))


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
