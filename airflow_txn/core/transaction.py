"""The Transaction handle: staging writes, reading its own view, commit, rollback, leases.

A Transaction object is a thin handle on a catalog row; any number of handles (in any number of
processes, via Warehouse.attach) may act on the same transaction. A statement that fails while
executing marks the transaction failed (only rollback is allowed afterwards); a statement rejected
for bad input before doing anything leaves the transaction as it was (invariant 9). Those statement
rules are the module functions at the end (statement_of, run_statement), which the adapter interface
(adapter.py) applies to an engine's statements too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn.catalog import table_registry, txn_records
from airflow_txn.core import (
    bounds,
    check_reports,
    commit_route,
    crashpoints,
    log_mirror,
    manifests,
    reading,
    rollback,
    staging,
    table_changes,
    tags,
    versions,
)
from airflow_txn.core.bounds import catalog_int
from airflow_txn.core.isolation import Isolation
from airflow_txn.core.leases import LeaseKeeper
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import (
    CatalogBusyError,
    InvalidArgumentError,
    InvalidatedKeysError,
    InvalidNameError,
    LeaseExpiredError,
    RetryConflictError,
    SchemaMismatchError,
    SerializationError,
    StaleAttemptError,
    TableNotFoundError,
    TransactionClosedError,
    TransactionNotFoundError,
)
from airflow_txn.model import evolution
from airflow_txn.model.names import check_key
from airflow_txn.model.options import Manifests
from airflow_txn.model.results import JsonObject, MergeCounts, PartitionSpec, TableManifest, TransactionState
from airflow_txn.telemetry import logs, metrics

if TYPE_CHECKING:
    from airflow_txn.core.warehouse import Warehouse

log = logs.get_logger(__name__)
T = TypeVar("T")

# Errors that reject a statement before it changed anything: the transaction stays usable. A catalog
# that stayed locked past its busy timeout (CatalogBusyError) is a transient stall, not a failure either.
_REJECTED = (InvalidArgumentError, InvalidatedKeysError, InvalidNameError, RetryConflictError, SchemaMismatchError,
             StaleAttemptError, TableNotFoundError, TransactionClosedError, TransactionNotFoundError, CatalogBusyError)


class Transaction:
    """One transaction of a Warehouse; stage writes, read, commit or roll back (docs/CONCEPTS.md)."""

    def __init__(self, warehouse: Warehouse, tid: str, snapshot_csn: int, isolation: Isolation) -> None:
        self.warehouse = warehouse
        self._tid = tid
        self._snapshot = snapshot_csn
        self._isolation = isolation
        self.default_key: str | None = None
        """Key used by writes that pass none (Airflow sets it to dag/task/map index)."""
        self.default_attempt: int | None = None
        """Attempt number of writes under `default_key` (Airflow's try number); see staging.py."""

    @property
    def _rt(self) -> Runtime:
        return self.warehouse.runtime

    @property
    def tid(self) -> str:
        return self._tid

    @property
    def snapshot_csn(self) -> int:
        return self._snapshot

    @property
    def isolation(self) -> Isolation:
        """The isolation level (a string enum: compares equal to "snapshot" / "serializable")."""
        return self._isolation

    @property
    def state(self) -> TransactionState:
        """active, committed or rolled_back (a commit in progress is active until its record exists)."""
        with self._rt.catalog.read() as conn:
            row = txn_records.fetch(conn, self._tid)
        if log_mirror.logged_commit_csn(self._rt, row) is not None:
            return "committed"
        return txn_records.PUBLIC_STATES[row.state]

    def __repr__(self) -> str:
        return f"Transaction(tid={self._tid!r}, snapshot_csn={self._snapshot}, isolation={self._isolation.value!r})"

    # -- writes -------------------------------------------------------------------------------------
    def use_key(self, key: str, attempt: int | None = None) -> Transaction:
        """Stage every write that passes no key under `key`, as attempt `attempt` (returns self).

        With an attempt number, all writes of this attempt accumulate and the first write of a newer
        attempt replaces everything older attempts staged under the key (a retried task); the attempt is
        recorded now, so from this call on an older attempt's writes are refused (StaleAttemptError,
        raised here too if a newer attempt started already). Without one, each write replaces the
        previous write under the key.
        """
        checked = check_key(key)
        checked_attempt = None if attempt is None else catalog_int(attempt, "attempt")
        if checked is not None and checked_attempt is not None:
            staging.start_attempt(self._rt, self._tid, checked, checked_attempt)
        self.default_key = checked
        self.default_attempt = checked_attempt
        return self

    def compensate(self, key: str | None = None, attempt: int | None = None) -> int:
        """Roll back now what was staged under `key` (default: this handle's key) by attempts before
        `attempt` (None: by every attempt). Returns the number of parts changed."""
        checked_attempt = None if attempt is None else catalog_int(attempt, "attempt")
        stmt = staging.Statement(self._tid, self._snapshot, check_key(key) or self.default_key, checked_attempt)
        if stmt.key is None:
            raise InvalidNameError("compensate needs a key: pass one or set it with use_key()")
        return run_statement(self, f"compensation of {stmt.key}", lambda: staging.compensate(self._rt, stmt))

    def append(self, table: str, data: pa.Table, key: str | None = None, merge_schema: bool = False) -> int:
        """Stage `data` as new parts of `table`; returns the number of rows staged. Appends never conflict.

        `merge_schema=True`: in the same statement, the data's columns the table lacks are added (nullable) and
        the columns it holds in a wider type are widened where a widening is allowed (docs/CONCEPTS.md, "Changing
        tables"); the data's columns are taken by name. A keyed retry replaces the changes with the rows; a
        narrowing or a type no widening reaches is refused naming the column, before anything is staged."""
        merge = self._merging(merge_schema)
        stmt = statement_of(self, key)
        return run_statement(self, f"append to {table}", lambda: staging.append(self._rt, stmt, table, data, merge))

    def append_many(self, tables: Mapping[str, pa.Table], key: str | None = None,
                    merge_schema: bool = False) -> dict[str, int]:
        """Append to several tables in ONE statement, {table: data}; returns {table: rows staged}.

        Every table's data is checked before anything is written (one bad table stages nothing), the part
        files are written side by side (on an object store the uploads overlap: the statement waits for
        the slowest, not their sum) and registered in one catalog transaction. Under a key it is one
        statement: a retry under the same key replaces all of it. `merge_schema`: as append's, for each table."""
        merge = self._merging(merge_schema)
        stmt = statement_of(self, key)
        what = "append to " + (", ".join(map(str, tables)) if isinstance(tables, Mapping) else "several tables")
        return run_statement(self, what, lambda: staging.append_many(self._rt, stmt, tables, merge))

    def overwrite(self, table: str, data: pa.Table, partitions: PartitionSpec | None = None,
                  key: str | None = None, merge_schema: bool = False) -> int:
        """Replace the whole table (partitions=None) or only the listed partitions with `data`. `merge_schema`: as
        append's."""
        merge = self._merging(merge_schema)
        stmt = statement_of(self, key)
        return run_statement(self, f"overwrite of {table}",
                             lambda: staging.overwrite(self._rt, stmt, table, data, partitions, merge))

    def _merging(self, merge_schema: object) -> bool:
        """merge_schema checked (InvalidArgumentError unless a bool); True needs a catalog with versions of tables'
        schemas (CatalogUpgradeRequiredError): both before anything is staged, the transaction left usable."""
        merge = evolution.merge_flag(merge_schema)
        if merge:
            table_changes.require_versions(self._rt)
        return merge

    def delete(self, table: str, where: pc.Expression, key: str | None = None) -> int:
        """Delete matching rows, rewriting only the parts that hold some; returns the number of rows deleted."""
        stmt = statement_of(self, key)
        return run_statement(self, f"delete in {table}", lambda: staging.delete(self._rt, stmt, table, where))

    def update(self, table: str, where: pc.Expression, set: Mapping[str, object], key: str | None = None) -> int:
        """Set columns of matching rows (values or Expressions), rewriting only the parts holding some;
        returns the number of rows updated."""
        stmt = statement_of(self, key)
        return run_statement(self, f"update of {table}",
                             lambda: staging.update(self._rt, stmt, table, where, set))

    def merge(self, table: str, source: pa.Table, on: Sequence[str] | str,
              when_matched: str | Mapping[str, object] = "update", when_not_matched: str = "insert",
              when_not_matched_by_source: str = "keep", key: str | None = None) -> MergeCounts:
        """Upsert `source` into `table` by the key columns `on` (docs/CONCEPTS.md, "MERGE"): matched rows are
        updated from the source ("update"), deleted, kept ("ignore"), or set by {column: value or Expression}
        (the matching source row is the struct column `source`: `pc.field("source", "qty")`); unmatched source
        rows inserted or ignored; target rows no source row matches kept or deleted. Only the parts that can hold
        a matching key are rewritten, the inserts appended, in one statement. A source holding a key twice, or
        anything else wrong, is refused before anything is staged. Returns {updated, inserted, deleted}."""
        stmt = statement_of(self, key)
        return run_statement(self, f"merge into {table}", lambda: staging.merge(
            self._rt, stmt, table, source, on, when_matched, when_not_matched, when_not_matched_by_source))

    # -- changing tables (docs/CONCEPTS.md, "Changing tables"; docs/DESIGN.md, D27) ----------------------------
    def add_column(self, table: str, field: pa.Field, default: object = None, key: str | None = None) -> None:
        """Add `field` as the table's last column: nullable, or NOT NULL with a `default` that rows written before
        read as. Visible with the transaction's data, at its CSN; compatible: concurrent writers of the table still
        commit, their rows read the new column as null (or the default)."""
        self._change(table, f"add_column to {table}", table_changes.add_column(field, default), key)

    def rename_column(self, table: str, old: str, new: str, key: str | None = None) -> None:
        """Rename a column (its id stays: rows written before read under the new name). Conflicts with concurrent
        writers of the table (first committer wins)."""
        self._change(table, f"rename_column of {table}", table_changes.rename_column(old, new), key)

    def drop_column(self, table: str, name: str, key: str | None = None) -> None:
        """Drop a column (parts keep its values unread; time travel before the change still reads them). Conflicts
        with concurrent writers of the table (first committer wins)."""
        self._change(table, f"drop_column of {table}", table_changes.drop_column(name), key)

    def alter_column(self, table: str, name: str, type: pa.DataType, key: str | None = None) -> None:
        """Widen a column's type (int32 -> int64, float32 -> float64, ...: every old value kept); a narrowing is
        refused. Compatible: rows written before are cast when read."""
        self._change(table, f"alter_column of {table}", table_changes.alter_column(name, type), key)

    def set_nullable(self, table: str, name: str, nullable: bool, key: str | None = None) -> None:
        """Allow nulls in a column (compatible), or forbid them (no visible row may hold one; conflicts with
        concurrent writers of the table)."""
        self._change(table, f"set_nullable of {table}", table_changes.set_nullable(name, nullable), key)

    def create_table(self, table: str, schema: pa.Schema, partition_by: Sequence[str] = (),
                     key: str | None = None) -> None:
        """Create `table` inside this transaction: other readers see it from the commit's CSN on (with the rows the
        transaction loads into it); a rollback leaves no table. TableExistsError when it exists; bad input refused
        as Warehouse.create_table refuses it, before anything is staged."""
        table_changes.require_versions(self._rt)
        stmt = statement_of(self, key)
        run_statement(self, f"create_table {table}",
                      lambda: table_changes.create_table(self._rt, stmt, table, schema, partition_by))

    def drop_table(self, table: str, key: str | None = None) -> None:
        """Drop `table` inside this transaction: from the commit's CSN on it is gone (reads raise TableNotFoundError,
        `wh.tables()` leaves it out) and its name is free again; reads at an older CSN still see it. Conflicts with
        concurrent writers of the table (first committer wins)."""
        table_changes.require_versions(self._rt)
        stmt = statement_of(self, key)
        run_statement(self, f"drop_table {table}", lambda: table_changes.drop_table(self._rt, stmt, table))

    def schema(self, table: str) -> pa.Schema:
        """The table's schema as this transaction sees it: its snapshot's version, or the one its own changes
        staged (docs/DESIGN.md, D27). Nothing is recorded as read."""
        if not isinstance(table, str):
            raise InvalidNameError(f"table must be a table name, got {type(table).__name__}")
        with self._rt.catalog.read() as conn:
            txn_records.require_usable(txn_records.fetch(conn, self._tid))
            return versions.table_at(conn, table_registry.get(conn, table), self._tid, self._snapshot).schema

    def rename_table(self, old: str, new: str, key: str | None = None) -> None:
        """Rename table `old` to `new` inside this transaction: readers find it by `old` before the commit's CSN
        (time travel included) and by `new` from it on; this transaction sees `new` at once. No file moves. The
        new name is taken at once: TableExistsError when a table holds it, SerializationError when another
        transaction is creating or renaming a table to it; a rollback gives it back. Conflicts with concurrent
        writers of the table (first committer wins)."""
        table_changes.require_versions(self._rt)
        stmt = statement_of(self, key)
        run_statement(self, f"rename_table {old} {new}",
                      lambda: table_changes.rename_table(self._rt, stmt, old, new))

    def _change(self, table: str, what: str, make: table_changes.Make, key: str | None) -> None:
        table_changes.require_versions(self._rt)  # a catalog too old for it: nothing staged, still usable
        stmt = statement_of(self, key)
        run_statement(self, what, lambda: table_changes.change(self._rt, stmt, table, make))

    # -- reads --------------------------------------------------------------------------------------
    def read(self, table: str, filter: pc.Expression | None = None,
             partitions: PartitionSpec | None = None, tag: str | None = None) -> pa.Table:
        """The table as this transaction sees it: its snapshot plus its own writes.

        With isolation="serializable" the read is recorded (the listed partitions, else the whole
        table) and checked at commit. With `tag`: the table at that named snapshot instead (what a tag
        holds never changes, so nothing is recorded for the commit check or for retries).
        """
        rt = self._rt
        if tag is not None:
            with rt.catalog.read() as conn:
                txn_records.require_usable(txn_records.fetch(conn, self._tid))
            return reading.read_planned(rt, reading.plan(rt, table, tag=tag, partitions=partitions), filter)
        planned = reading.plan(rt, table, view=statement_of(self, None), partitions=partitions)
        return reading.read_planned(rt, planned, filter)

    def manifest(self, tables: Sequence[str] | None = None) -> dict[str, TableManifest]:
        """The transaction's own view of `tables` (None: every table) as manifests (docs/MANIFESTS.md),
        {table: TableManifest}: exactly the Parquet files a read of this transaction sees, its staged parts
        included, with `csn` its snapshot and `tid` set. Nothing is written; read the files while the
        transaction is open (write-audit-publish checks read them before the commit: docs/CONCEPTS.md). The
        tables count as read, as by `read` (recorded for the isolation level)."""
        if isinstance(tables, str) or not (tables is None or (isinstance(tables, Sequence)
                                                                and all(isinstance(t, str) for t in tables))):
            raise InvalidNameError(f"tables must be a list of table names, got {tables!r}")
        rt = self._rt
        with rt.catalog.read() as conn:  # every table checked before any read is recorded
            txn_records.require_usable(txn_records.fetch(conn, self._tid))
            infos = versions.tables_seen(conn, self._tid, self._snapshot) if tables is None else \
                [table_registry.get(conn, t) for t in tables]
        chosen = sorted({i.id: i.name.qualified for i in infos}.values())
        view = statement_of(self, None)  # each table planned (and its read recorded) as `read` plans it
        return {name: manifests.view_manifest(rt, reading.plan(rt, name, view=view)) for name in chosen}

    # -- end ----------------------------------------------------------------------------------------
    def commit(self, tag: str | None = None, tag_note: str | None = None) -> int:
        """Make every staged part visible at once; returns the commit CSN. With `tag`, also name the commit's
        snapshot (Warehouse.tag; holding the tables it wrote, every table when it wrote none; `tag_note` its
        note): with the SQL oracle in the commit's own catalog transaction, so a name already taken is a
        TagExistsError before anything is committed (the transaction stays active). With ZooKeeper the name is
        checked first and the tag made once the commit is applied (docs/DESIGN.md D18)."""
        wanted = tags.commit_tag(tag, tag_note)
        with logs.bind(tid=self._tid):
            csn = commit_route.commit(self._rt, self._tid, wanted)
            if self.warehouse.config.manifests is Manifests.ON_COMMIT:  # never fails the commit (it stands)
                manifests.write_on_commit(self._rt, self._tid, csn)
            self.warehouse._after_commit()  # commit, then publish: in the background, never failing the commit
            return csn

    def rollback(self, reason: str | None = None) -> None:
        """Compensate every staged part (metadata only; vacuum deletes the files later); `reason` is
        recorded unless the transaction had already failed a statement (that reason is kept)."""
        with logs.bind(tid=self._tid):
            rollback.rollback(self._rt, self._tid, reason=reason or "rolled back by the caller")

    def annotate(self, metadata: Mapping[str, object]) -> JsonObject:
        """Merge `metadata` (a JSON object: who wrote the transaction, a link back to them) into the
        transaction's metadata, key by key, and return the result. Allowed while the transaction may run a
        statement (it renews the lease, as a statement does); metadata that is no JSON object (or grows
        past bounds.MAX_METADATA_BYTES) is refused before anything changes (InvalidArgumentError)."""
        bounds.user_metadata_json(metadata)
        cat = self._rt.catalog
        with cat.write() as conn:
            txn_records.lock_usable(conn, cat, self._tid)
            merged = {**txn_records.stored_metadata(txn_records.fetch(conn, self._tid).metadata_json), **metadata}
            txn_records.set_metadata(conn, self._tid, bounds.metadata_json(merged))
        merged.pop(txn_records.PRIVATE_KEY, None)
        return merged

    def record_check(self, key: str, report: Mapping[str, object]) -> None:
        """Append a write-audit-publish check report (a JSON object) under `key` (the check step); steps
        recording at once each keep theirs (core/check_reports.py). Allowed while the transaction may run a
        statement; a bad key or report is refused before anything changes (InvalidArgumentError)."""
        check_reports.record(self._rt, self._tid, key, report)

    def claim_private(self, name: str, value: str, replacing: str | None = None) -> str:
        """The value airflow_txn keeps with this transaction under `name` for itself (e.g. the Spark Connect
        session id every task of the transaction shares): `value` if none is kept yet (or the kept one is
        `replacing`, found stale), else the kept one: first writer wins, atomically, so two callers at once
        get one value. Never shown (transaction_info, transactions(), the page, `airflow-txn show` leave
        it out). Allowed while the transaction may run a statement (it renews the lease)."""
        bounds.private_value(name, "name")
        bounds.private_value(value, "value")
        cat = self._rt.catalog
        with cat.write() as conn:
            txn_records.lock_usable(conn, cat, self._tid)
            return txn_records.claim_private(conn, self._tid, name, value, replacing)

    def heartbeat(self) -> bool:
        """Extend the lease; False if the transaction is no longer active or its lease already ran out."""
        with self._rt.catalog.write() as conn:
            row = txn_records.fetch(conn, self._tid, self._rt.catalog)
            renewed = txn_records.renew(conn, self._tid, row.lease_seconds)
            crashpoints.hit(crashpoints.LEASE_MID_RENEW)
            return renewed

    def keep_alive(self, interval: float | None = None) -> LeaseKeeper:
        """`with txn.keep_alive(): long_job()` renews the lease in a background thread meanwhile."""
        with self._rt.catalog.read() as conn:
            lease = txn_records.fetch(conn, self._tid).lease_seconds
        return LeaseKeeper(self.heartbeat, interval if interval is not None else lease / 3, tid=self._tid)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            self.commit()
            return
        try:
            if self.state == txn_records.ACTIVE:
                self.rollback()
        except Exception:  # keep the caller's exception, which is what they need to see
            log.exception("rollback after %s failed; recovery will finish it", exc_type,
                          extra=logs.fields(self._tid))


# -- the statement rules: shared by the handle's methods and the adapter interface (adapter.py) --------
def statement_of(txn: Transaction, key: str | None) -> staging.Statement:
    """Who writes: the transaction, its snapshot and `key` (the handle's default key and attempt when
    `key` is None: an Airflow task's writes)."""
    rt = txn.warehouse.runtime
    if check_key(key) is not None:
        return staging.Statement(txn.tid, txn.snapshot_csn, key, tables=rt.tables, isolation=txn.isolation)
    return staging.Statement(txn.tid, txn.snapshot_csn, txn.default_key,
                             txn.default_attempt if txn.default_key is not None else None, rt.tables, txn.isolation)


def run_statement(txn: Transaction, what: str, fn: Callable[[], T]) -> T:
    """Run `fn`, a step of a statement of `txn` described by `what`, under the failure rules (invariant
    9): an expired lease rolls the transaction back, a rejected input (_REJECTED) leaves it usable, any
    other error (a conflict, a catalog or storage failure) marks it failed; the error is raised. A storage
    root that is another warehouse's refuses the statement before it runs, the transaction left as it was
    (invariant 11)."""
    txn.warehouse._check_root()
    try:
        with logs.bind(tid=txn.tid):  # lines logged while the statement runs name the transaction
            return fn()
    except LeaseExpiredError:
        rollback.rollback(txn.warehouse.runtime, txn.tid, reason="lease expired")
        raise
    except _REJECTED:
        raise
    except Exception as exc:
        if isinstance(exc, SerializationError):
            metrics.incr(metrics.CONFLICTS)
        _mark_failed(txn, f"{what} failed: {type(exc).__name__}: {exc}")
        raise


def _mark_failed(txn: Transaction, reason: str) -> None:
    try:
        with txn.warehouse.runtime.catalog.write() as conn:
            txn_records.mark_failed(conn, txn.tid, reason)
    except Exception:  # the catalog itself may be what failed; the original error matters more
        log.warning("could not mark the transaction failed", exc_info=True, extra=logs.fields(txn.tid))
