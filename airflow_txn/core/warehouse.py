"""The Warehouse: one catalog + one storage root + one CSN oracle, and the operations on them.

Opening is lazy (docs/DESIGN.md, D17): `open` creates nothing, the first call that writes (`init`,
`create_table`, `begin`) creates the catalog and the storage root, and every other call on a warehouse
that does not exist raises WarehouseNotFoundError (the catalog's own check, catalog/database.py)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from airflow_txn.catalog import (
    Catalog,
    State,
    commit_log,
    counters,
    database,
    key_records,
    meta_records,
    part_records,
    table_registry,
    table_versions,
    txn_records,
)
from airflow_txn.core import (
    apply,
    bounds,
    check_reports,
    compaction,
    identity,
    log_mirror,
    manifests,
    overview,
    ownership,
    reading,
    recovery,
    retention,
    tags,
    vacuum,
    versions,
)
from airflow_txn.core.config import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RETENTION_SECONDS,
    WarehouseConfig,
    home_dir,
    root_uri,
)
from airflow_txn.core.isolation import Isolation
from airflow_txn.core.runtime import Runtime
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse_groups import Maintenance, Tags
from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    SnapshotTooOldError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    TransactionNotFoundError,
    WaitTimeoutError,
)
from airflow_txn.model.names import check_label
from airflow_txn.model.options import Manifests, ManifestsName
from airflow_txn.model.results import (
    AdoptionReport,
    CheckRecord,
    CommitLogEntry,
    CompactionReport,
    IsolationName,
    LoggedCommit,
    ManifestReport,
    PartInfo,
    PartitionSpec,
    RecoveryReport,
    RetentionInfo,
    TableStats,
    TagInfo,
    TransactionInfo,
    TransactionRecord,
    VacuumReport,
    WatermarkInfo,
)
from airflow_txn.model.tid import Tid, TidFactory
from airflow_txn.model.tid import is_prefix as is_tid_prefix
from airflow_txn.oracle import make_oracle
from airflow_txn.publish.publisher import Publisher
from airflow_txn.storage.root import Storage
from airflow_txn.storage.roots import open_storage
from airflow_txn.telemetry import logs

if TYPE_CHECKING:
    import pyarrow.dataset as pads
    from pyiceberg.catalog import Catalog as IcebergCatalog

    from airflow_txn.core.datasets import DuckDBConnection

log = logs.get_logger(__name__)

_AMBIGUOUS_SHOWN = 10
"""How many of the tids an ambiguous prefix begins resolve_tid's error names."""


def _whole_tid(text: str) -> bool:
    try:
        Tid.parse(text)
    except InvalidNameError:
        return False
    return True


def _recorded_root(catalog: Catalog) -> str:
    """The root a catalog claimed (core/ownership.py); for a catalog of a release before roots were claimed,
    the default root of those releases, home/warehouse, whatever the catalog (what it has been using)."""
    with catalog.read() as conn:
        recorded = meta_records.value(conn, ownership.ROOT_KEY)
    return recorded if recorded is not None else root_uri(home_dir() / "warehouse")


class Warehouse:
    """Open with `Warehouse.open(catalog=..., root=..., oracle=...)`; docs/CONCEPTS.md says what each argument is."""

    def __init__(self, config: WarehouseConfig, runtime: Runtime) -> None:
        self.config = config
        self.runtime = runtime
        self._warehouse_id: str | None = None
        self._created = False
        self._root_checked = False
        """Catalog and root made sure of by this object's first writing call (init, create_table, begin)."""
        self._publisher: Publisher | None = None

    @classmethod
    def open(cls, catalog: str | None = None, root: str | os.PathLike[str] | None = None,
             oracle: str | None = None, manifests: Manifests | ManifestsName | None = None,
             storage_options: Mapping[str, str | bool] | str | None = None,
             filesystem: pafs.FileSystem | None = None, connect_timeout: float | None = None,
             upgrade: bool = False, publish: str | Sequence[str] | None = None,
             iceberg_catalog: Mapping[str, str] | str | None = None) -> Warehouse:
        """Open the warehouse; arguments override AIRFLOW_TXN_* and the defaults. Creates nothing: the first
        `init`, `create_table` or `begin` creates a missing catalog and root; any other call on a warehouse
        that does not exist raises WarehouseNotFoundError. Opening never upgrades a catalog (docs/DESIGN.md,
        D23): one older than this package works with raises CatalogUpgradeRequiredError unless `upgrade=True`
        (an explicit writer-side request: it is migrated here, as `airflow-txn upgrade` does); a newer one is used
        when its min_client_version allows this package, else CatalogTooNewError.
        `root` (else $AIRFLOW_TXN_ROOT, else the root the catalog claimed, else one of the catalog's own:
        config.default_root; docs/DESIGN.md, invariant 11) may be an object store (`s3://bucket/prefix`,
        whose bucket must exist); `storage_options`
        its settings (endpoint_url, region, access_key_id, ...: docs/DEPLOYMENT.md), else the AWS_* environment.
        manifests="on-commit" writes the snapshot manifests of every commit (docs/COMPACTION.md).
        `filesystem` replaces the pyarrow filesystem the root's settings make (its caller keeps it equivalent:
        the Airflow hook's S3 filesystem whose credentials refresh, airflow/hooks/aws.py).
        `connect_timeout`: seconds a catalog server or object store that does not answer is waited for before
        CatalogUnavailableError / StorageError (else $AIRFLOW_TXN_CONNECT_TIMEOUT, else 20).
        `publish="iceberg"` (else $AIRFLOW_TXN_PUBLISH) publishes every commit as an Iceberg snapshot after it
        commits, to a pyiceberg SQL catalog in this catalog's database unless `iceberg_catalog` (pyiceberg catalog
        properties, else $AIRFLOW_TXN_ICEBERG_CATALOG) names another; `publish="delta"` as a Delta version of a
        Delta table in the table's own directory; `publish="iceberg,delta"` both (docs/INTEROP.md)."""
        config = WarehouseConfig.resolve(catalog, root, oracle, manifests, storage_options, connect_timeout,
                                         publish, iceberg_catalog)

        def storage_of(config: WarehouseConfig) -> Storage:
            where = config.location()  # settings checked before the catalog is touched
            return open_storage(where if filesystem is None else dataclasses.replace(where, filesystem=filesystem))

        storage = storage_of(config)
        cat = Catalog(config.catalog_url, where=f"catalog {database.safe_url(config.catalog_url)} (root {config.root})",
                      connect_timeout=config.connect_timeout)
        try:
            state = cat.check_versions(upgrade=upgrade)
            if not config.root_given and state is not State.ABSENT:
                recorded = _recorded_root(cat)
                if recorded != config.root:  # the root this catalog claimed, not the one derived from its URL
                    config = dataclasses.replace(config, root=recorded)
                    storage = storage_of(config)
        except BaseException:  # e.g. a catalog this package may not use: close its connections
            cat.dispose()
            raise
        runtime = Runtime(cat, make_oracle(config.oracle, cat), storage, TidFactory())
        return cls(config, runtime)

    @staticmethod
    def warehouse_id_at(catalog_url: str, where: str | None = None, connect_timeout: float | None = None) -> str:
        """The warehouse id of the catalog at `catalog_url`, opening neither storage nor the oracle (what an
        Airflow DAG file needs while it is parsed: core/identity.py). Creates nothing: a missing catalog
        raises WarehouseNotFoundError naming `where` (default: the catalog URL). `connect_timeout`: seconds an
        unreachable catalog server is waited for (None: $AIRFLOW_TXN_CONNECT_TIMEOUT, else 20)."""
        return identity.warehouse_id_at(catalog_url, where, connect_timeout)

    def init(self) -> None:
        """Create the storage root (an object store's bucket must exist) and the catalog if they are missing;
        a warehouse that exists is left as it is. Safe to call any number of times, from any process."""
        if self._created:
            return
        self._create()
        ownership.claim(self.runtime, self.warehouse_id)  # RootOwnedError: another warehouse's root (invariant 11)
        self._created = True

    def _check_root(self) -> None:
        """RootOwnedError when the storage root is another warehouse's (or newer than this catalog): what every
        write checks once per Warehouse object before it writes (invariant 11), also a write that is no first
        write here: a statement of a transaction attached from another process, a compaction, a manifest.
        Claims nothing (init does, on the first write of the warehouse)."""
        if self._created or self._root_checked:
            return
        ownership.check(self.runtime, self.warehouse_id)
        self._root_checked = True

    def _create(self) -> None:
        self.runtime.storage.ensure()  # the root (or the bucket check) first: a bad root creates no catalog
        self.runtime.catalog.initialize()

    def adopt_root(self) -> AdoptionReport:
        """Make the storage root this warehouse's after an operator checked it (what `airflow-txn adopt-root`
        runs): for a catalog re-created over its old root, or restored from a backup older than the root, which
        writes and vacuums refuse (RootOwnedError). Every file a committed part of this catalog needs must be
        on the root, else RootOwnedError listing what is missing and nothing changes. Files of transactions
        this catalog does not know stay where they are: vacuum keeps and reports them (docs/DEPLOYMENT.md)."""
        self._create()
        done = ownership.adopt(self.runtime, self.warehouse_id)
        self._created = True
        previous = done.previous
        return AdoptionReport(root=done.root, warehouse_id=done.warehouse_id, csn=done.csn,
                              parts_checked=done.parts_checked,
                              previous_warehouse_id=None if previous is None else previous.warehouse_id,
                              previous_csn=None if previous is None else previous.csn)

    def exists(self) -> bool:
        """Whether the warehouse's catalog exists (creates nothing)."""
        return self.runtime.catalog.exists()

    def close(self) -> None:
        if self._publisher is not None:
            self._publisher.close()
        self.runtime.oracle.close()
        self.runtime.catalog.dispose()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Warehouse(root={str(self.config.root)!r}, oracle={self.config.oracle!r})"

    @property
    def warehouse_id(self) -> str:
        """The warehouse's stable identity (32 hex digits, kept in its catalog: catalog/meta_records.py): the
        same whichever connection, URL or host reaches the catalog, different for another warehouse.
        Airflow Asset URIs name the warehouse by it (core/identity.py)."""
        if self._warehouse_id is None:
            self._warehouse_id = identity.warehouse_id(self.runtime.catalog)
        return self._warehouse_id

    # -- tables -------------------------------------------------------------------------------------
    def create_table(self, name: str, schema: pa.Schema, partition_by: Sequence[str] = (),
                     exist_ok: bool = False) -> None:
        """Create `namespace.table`. With exist_ok an existing table is fine when `schema` and `partition_by` are
        those of a committed version of it (docs/DESIGN.md, D27): the ones it was created with (a DAG creating its
        table idempotently keeps working after the table was changed), its newest, or any in between; another
        schema or partitioning raises TableExistsError ("different schema"). Column ids and defaults (field
        metadata) are not compared."""
        table_name, arrow_schema = table_registry.validate_new_table(name, schema, partition_by)
        self.init()
        with self.runtime.catalog.read() as conn:
            existing = table_registry.find(conn, name, historical=False)
            again = (table_versions.dropped(conn, existing.id) if existing is not None
                     else table_versions.named(conn, table_name.qualified) is not None)
        if again:  # a dropped (or renamed) table's name: created again at a CSN of its own (older snapshots see the
            # old table)
            with self.begin(label=f"create_table {table_name}") as t:
                t.create_table(table_name.qualified, arrow_schema, list(partition_by))
            return
        with self.runtime.catalog.write() as conn:
            existing = table_registry.find(conn, name, historical=False)
            if existing is not None and table_versions.revive(conn, existing.id, arrow_schema, list(partition_by),
                                                              table_name.qualified):
                return  # its only creation was rolled back: the name was free
            if existing is not None:
                if exist_ok and any(had.equals(arrow_schema) and by == tuple(partition_by)
                                    for had, by in table_versions.committed_schemas(conn, existing.id)
                                    or [(existing.schema, existing.partition_by)]):
                    return
                if exist_ok:
                    raise TableExistsError(f"table {name} exists with a different schema or partitioning")
                raise TableExistsError(f"table {name} exists already")
            table_registry.create(conn, table_name, arrow_schema, list(partition_by))

    def tables(self, csn: int | None = None, tag: str | None = None) -> list[str]:
        """The tables, sorted: the committed ones now, or those that existed at snapshot `csn` or at tag `tag`, by
        the names they had there (a table renamed since under its old name, one dropped since included, one created
        since left out: docs/DESIGN.md D27). A CSN not readable yet or below the retention horizon is refused as
        `read(csn=)` refuses it; a tag lists the tables it holds (TagNotFoundError)."""
        if tag is not None:
            if csn is not None:
                raise InvalidArgumentError(f"list tables at csn {csn} or at tag {tag!r}, not both")
            return sorted(self.tag_info(tag)["tables"])
        if csn is None:
            with self.runtime.catalog.read() as conn:
                return [t.name.qualified for t in table_registry.listed_tables(conn)]
        snapshot = self._snapshot_for(csn)
        with self.runtime.catalog.read() as conn:
            return [i.name.qualified for i in versions.tables_seen(conn, None, snapshot)]

    def schema(self, name: str, csn: int | None = None, tag: str | None = None) -> pa.Schema:
        """The table's schema: the newest committed one, or the one it had at snapshot `csn` or at tag `tag` (time
        travel keeps old schemas: docs/DESIGN.md, D27). Each field carries its column id (`PARQUET:field_id`)."""
        return reading.plan_schema(self.runtime, name, csn, tag)

    def partition_by(self, name: str, csn: int | None = None) -> tuple[str, ...]:
        """The table's partition columns, as of its newest committed version or of the one visible at snapshot
        `csn` (a renamed table's old name names nothing now, only at older snapshots: TableNotFoundError)."""
        snapshot = self.readable_csn() if csn is None else reading.snapshot_for(self.runtime, csn, [name])
        with self.runtime.catalog.read() as conn:
            return versions.table_at(conn, table_registry.get(conn, name), None, snapshot).partition_by

    # -- transactions -------------------------------------------------------------------------------
    def begin(self, label: str | None = None, isolation: Isolation | IsolationName = Isolation.SNAPSHOT,
              lease_seconds: float = DEFAULT_LEASE_SECONDS,
              metadata: Mapping[str, object] | None = None) -> Transaction:
        """Start a transaction at the readable watermark; `isolation` is "snapshot" or "serializable"
        (or an `airflow_txn.core.isolation.Isolation`). `metadata`: a JSON object kept with the transaction
        (shown by `transaction_info` and `airflow-txn show`; `Transaction.annotate` adds to it)."""
        check_label(label)
        level = Isolation.parse(isolation, "isolation")
        lease = bounds.lease_seconds(lease_seconds)
        stored = None if metadata is None else bounds.user_metadata_json(metadata)
        self.init()
        cat = self.runtime.catalog
        with cat.write() as conn:
            counters.share_snapshot_gate(conn, cat)
            snapshot = self.runtime.oracle.readable_csn(conn)
            tid = str(self.runtime.tids.next(snapshot))
            txn_records.insert_row(conn, tid, label, level.value, snapshot, lease, stored)
        log.debug("began at snapshot %d", snapshot, extra=logs.fields(tid, snapshot))
        return Transaction(self, tid, snapshot, level)

    def attach(self, tid: str) -> Transaction:
        """The transaction `tid` (as printed by Transaction.tid), e.g. from another process."""
        parsed = str(Tid.parse(tid))
        with self.runtime.catalog.read() as conn:
            row = txn_records.fetch(conn, parsed)
        return Transaction(self, parsed, row.snapshot_csn, Isolation(row.isolation))

    def resolve_tid(self, text: str) -> str:
        """The tid `text` names: a whole tid as it is (whether or not it exists), else the one tid that
        begins with it, like git's short hashes (`17-3-9f0c`). TransactionNotFoundError when none does;
        InvalidNameError when several do (the message names them) or `text` cannot begin a tid."""
        if not isinstance(text, str) or not is_tid_prefix(text.strip()):
            raise InvalidNameError(f"malformed tid {text!r}: expected '<start_csn>-<local_tid>-<16 hex digits>' "
                                   "or its beginning (e.g. '17-3-9f0c')")
        prefix = text.strip()
        if _whole_tid(prefix):
            return str(Tid.parse(prefix))
        with self.runtime.catalog.read() as conn:
            found = txn_records.tids_starting(conn, prefix, _AMBIGUOUS_SHOWN + 1)
        if not found:
            raise TransactionNotFoundError(f"no transaction in this warehouse has a tid beginning with {prefix!r}")
        if len(found) > 1:
            shown = ", ".join(found[:_AMBIGUOUS_SHOWN]) + (", ..." if len(found) > _AMBIGUOUS_SHOWN else "")
            raise InvalidNameError(f"tid prefix {prefix!r} is ambiguous: it begins {shown}; give more of the tid")
        return found[0]

    def transaction_info(self, tid: str) -> TransactionInfo:
        parsed = str(Tid.parse(tid))
        with self.runtime.catalog.read() as conn:
            row = txn_records.fetch(conn, parsed)
            parts = part_records.of_transaction(conn, parsed)
            invalidated = key_records.invalidated(conn, parsed)  # {key: the retried key that withdrew it}
            reports = check_reports.of_transaction(conn, parsed, row.metadata, self._stored_reports())
        record = row.as_dict()
        record["metadata"] = check_reports.as_metadata(record["metadata"], reports)
        logged_csn = log_mirror.logged_commit_csn(self.runtime, row)  # committing: committed iff its record exists
        if logged_csn is not None:
            record["state"], record["commit_csn"], record["commit_in_progress"] = "committed", logged_csn, False
        with self.runtime.catalog.read() as conn:
            names = {t.id: t.name.qualified for t in table_registry.all_tables(conn)}
        return TransactionInfo(
            **record, must_run_again=invalidated, tables=sorted({names[p.table_id] for p in parts}),
            parts=[PartInfo(
                table=names[p.table_id], partition=p.partition, path=p.path, rows=p.row_count, bytes=p.size_bytes,
                key=p.stage_key, attempt=p.stage_attempt, removal_key=p.removal_key,
                removal_attempt=p.removal_attempt, role="created" if p.version.creation_tid == parsed else "removed",
                creation_csn=p.version.creation_csn, removal_csn=p.version.removal_csn) for p in parts],
        )

    def _stored_reports(self) -> bool:
        """Whether the catalog has the check reports' own table (an older one this package uses has not: D23)."""
        return self.runtime.catalog.at_least(check_reports.STORED_SINCE)

    def check_reports(self, tid: str) -> list[CheckRecord]:
        """Every write-audit-publish check report recorded on transaction `tid`, in the order recorded
        (`transaction_info(tid)["metadata"]["checks"]` shows the newest of each key)."""
        parsed = str(Tid.parse(tid))
        with self.runtime.catalog.read() as conn:
            return check_reports.of_transaction(conn, parsed, txn_records.fetch(conn, parsed).metadata,
                                                self._stored_reports())

    def transactions(self, state: str | None = None, limit: int = 100,
                     labels: txn_records.LabelFilter | None = None) -> list[TransactionRecord]:
        """The newest `limit` transactions of `state`, kept by the DAG their label names (`labels`)."""
        state, limit = bounds.transaction_state(state), bounds.catalog_int(limit, "limit")
        with self.runtime.catalog.read() as conn:
            listed = [r.as_dict() for r in txn_records.list_rows(conn, state, limit, labels)]
            shown = check_reports.with_reports(conn, {r["tid"]: r["metadata"] for r in listed}, self._stored_reports())
        return [{**r, "metadata": shown[r["tid"]]} for r in listed]

    def label_dags(self) -> list[str | None]:
        """The distinct DAGs that transaction labels `<dag_id>/<run_id>` name (None: a label naming none)."""
        with self.runtime.catalog.read() as conn:
            return txn_records.label_dags(conn)

    # -- reads --------------------------------------------------------------------------------------
    def read(self, table: str, csn: int | None = None, filter: pc.Expression | None = None,
             tag: str | None = None) -> pa.Table:
        """The table at snapshot `csn` (None: the readable watermark), or at tag `tag` (a named snapshot that
        holds the table; readable whatever the retention)."""
        return reading.read_planned(self.runtime, reading.plan(self.runtime, table, csn=csn, tag=tag), filter)

    def write_manifest(self, csn: int | None = None, tables: list[str] | None = None,
                       tag: str | None = None) -> ManifestReport:
        """Write JSON manifests of snapshot `csn` (None: the watermark) under <root>/.manifests; see MANIFESTS.md.
        With `tag`, of the tag's snapshot (`tables` None: every table it holds). A CSN below the retention
        horizon is written only where tags at exactly that CSN hold the tables below it (D18)."""
        self._check_root()
        if tag is not None:
            if csn is not None:
                raise InvalidArgumentError(f"write a manifest at csn {csn} or at tag {tag!r}, not both")
            return manifests.write_at_tag(self.runtime, tag, tables)
        snapshot = self._snapshot_for(csn, [])  # readable; each table's horizon is the read planner's (manifests.py)
        try:
            return manifests.write_manifests(self.runtime, snapshot, tables)
        except StorageError as exc:
            if snapshot < vacuum.stored_horizon(self.runtime):
                raise SnapshotTooOldError(f"CSN {snapshot} is past the retention horizon; use a newer one") from exc
            raise

    def _snapshot_for(self, csn: int | None, tables: Sequence[str] | None = None) -> int:
        """The snapshot of a read at `csn` (None: the watermark); refuses CSNs not readable yet and
        CSNs below the retention horizon of one of `tables` (None: of every table; retention.py)."""
        return reading.snapshot_for(self.runtime, csn, tables)

    def readable_csn(self) -> int:
        return apply.readable_csn(self.runtime)

    def last_commit_csn(self, table: str, at: int | None = None) -> int | None:
        """The CSN of the latest readable commit that touched `table` (None if none); with `at`, the latest at
        or below `at`: the commit whose version of the table a read at snapshot `at` sees (None also where
        vacuum purged the history that would tell: below the retention horizon, at no tag holding `table`).
        The name is resolved as a read resolves it (docs/DESIGN.md D27): a renamed table's old name names nothing
        today (TableNotFoundError) and, with `at`, the table that had it at `at`; a name no table had at `at`
        names the table it names today (a transaction's lineage: a table it renamed, or created: None)."""
        wanted = None if at is None else bounds.catalog_int(at, "at")
        with self.runtime.catalog.read() as conn:
            watermark = self.runtime.oracle.readable_csn(conn)
            snapshot = watermark if wanted is None else min(watermark, wanted)
            named = table_registry.get(conn, table)
            try:
                info = versions.table_at(conn, named, None, snapshot)
            except TableNotFoundError:
                if snapshot == watermark:
                    raise
                info = versions.table_at(conn, named, None, watermark)
            if wanted is None:
                return commit_log.last_commit_csn(conn, info.id, watermark)
            return commit_log.version_at(conn, info.id, snapshot)

    def tables_read(self, tid: str, key: str | None = None, attempt: int | None = None) -> list[str]:
        """The tables transaction `tid` read through keyed handles (an Airflow task's `txn`, Spark reads through
        it), at its snapshot: every key's, or `key`'s (under `attempt`, if given). What the operators report as
        lineage inputs; recorded while the transaction runs, forgotten by vacuum once it ended."""
        parsed = str(Tid.parse(tid))
        with self.runtime.catalog.read() as conn:
            ids = key_records.tables_read(conn, parsed, key, attempt)
            if not ids:
                return []
            names = {t.id: t.name.qualified for t in table_registry.all_tables(conn)}
        return sorted(names[i] for i in ids if i in names)

    def wait_for_csn(self, csn: int, timeout: float) -> int:
        """Block until the watermark covers `csn`, applying pending records on the way; return it."""
        csn = bounds.catalog_int(csn, "csn")
        deadline = time.monotonic() + bounds.timeout_seconds(timeout)
        delay = 0.05
        while True:
            apply.apply_pending(self.runtime, up_to=csn)
            watermark = self.readable_csn()
            if watermark >= csn:
                return watermark
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(f"CSN {csn} not readable after {timeout}s (watermark {watermark})")
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)

    def commit_log(self, limit: int = 20) -> list[CommitLogEntry]:
        """The newest commit records first; with ZooKeeper also those not yet mirrored into the catalog."""
        limit = bounds.catalog_int(limit, "limit")
        with self.runtime.catalog.read() as conn:
            rows = [
                CommitLogEntry(csn=r.csn, tid=r.tid, tables=list(r.tables), committed_at=r.committed_at,
                               applied=r.applied)
                for r in commit_log.recent(conn, limit)
            ]
        if self.runtime.oracle.external_log is not None:
            rows += [CommitLogEntry(csn=r.csn, tid=r.entry.tid, tables=list(r.entry.tables),
                                    committed_at=r.entry.committed_at, applied=False)
                     for r in log_mirror.unmirrored(self.runtime)]
        return sorted(rows, key=lambda r: -r["csn"])[:limit]

    # -- named snapshots (tags) ---------------------------------------------------------------------
    def tag(self, name: str, csn: int | None = None, tables: Sequence[str] | None = None,
            note: str | None = None) -> TagInfo:
        """Name snapshot `csn` (None: the readable watermark) of `tables` (None: every table); read it with
        `read(table, tag=name)` for as long as the tag exists: vacuum keeps every file it sees, whatever the
        retention. TagExistsError when the name is taken (a tag never moves), SnapshotTooOldError below a
        table's retention horizon, InvalidArgumentError above the readable watermark."""
        return tags.create(self.runtime, name, csn, tables, note)

    @property
    def tags(self) -> Tags:
        """The named snapshots as a group (core/warehouse_groups.py): `tags.create`, `list`, `get`, `drop`;
        `wh.tags()` lists every tag ({name, csn, tables, created_at, note}), the newest CSN first."""
        return Tags(self.runtime)

    def tag_info(self, name: str) -> TagInfo:
        """The tag `name` (TagNotFoundError when there is none)."""
        return tags.get(self.runtime, name)

    def untag(self, name: str) -> TagInfo:
        """Remove the tag (the next vacuum may delete what only it kept); returns what it was."""
        return tags.drop(self.runtime, name)

    def commits_after(self, csn: int, limit: int = 100) -> list[LoggedCommit]:
        """The readable commits above `csn`, oldest first, at most `limit`, each with its transaction's
        metadata: what a watcher of the commit log reads to hear of new commits (airflow/triggers/commits.py).
        Compaction merges write no commit record and never appear; a commit not yet readable appears once
        the watermark covers it."""
        csn, limit = bounds.catalog_int(csn, "csn"), bounds.catalog_int(limit, "limit")
        with self.runtime.catalog.read() as conn:
            watermark = self.runtime.oracle.readable_csn(conn)
            found = commit_log.records_with_metadata(conn, csn, watermark, limit)
            shown = check_reports.with_reports(conn, {r.tid: txn_records.parse_metadata(stored) for r, stored in found},
                                               self._stored_reports())
        return [LoggedCommit(csn=r.csn, tid=r.tid, tables=list(r.tables), committed_at=r.committed_at,
                             applied=r.applied, metadata=shown[r.tid]) for r, _ in found]

    # -- maintenance --------------------------------------------------------------------------------
    @property
    def maintenance(self) -> Maintenance:
        """vacuum, compact, recover, retention and set_retention as a group (core/warehouse_groups.py):
        `wh.maintenance.vacuum(...)` is `wh.vacuum(...)`."""
        return Maintenance(self)

    def recover(self, progress: recovery.Progress | None = None) -> RecoveryReport:
        """Roll forward, roll back, reconcile; `progress(stage, done, total)` follows the work. With publishing on,
        also wakes the background publisher: commits whose process died before publishing them are caught up."""
        report = recovery.recover(self.runtime, progress=progress)
        self._after_commit()
        return report

    # -- overview (read-only; the CLI's tables, watermark and doctor) --------------------------------
    def table_stats(self, table: str, csn: int | None = None, tag: str | None = None) -> TableStats:
        """Partitioning, last commit CSN and the visible parts, rows and bytes of `table` at `csn` (None: the
        watermark), or at tag `tag` (TagNotFoundError, TableNotInTagError; whatever the retention)."""
        if tag is not None:
            if csn is not None:
                raise InvalidArgumentError(f"table stats at csn {csn} or at tag {tag!r}, not both")
            row, _ = tags.resolve(self.runtime, tag, table)
            return overview.table_summary(self.runtime, table, row.csn)
        return overview.table_summary(self.runtime, table, self._snapshot_for(csn, [table]))

    def watermark_info(self) -> WatermarkInfo:
        """readable_csn, the oracle's latest CSN (oracle_csn) and the lag between them."""
        return overview.watermark(self.runtime)

    def recovery_backlog(self) -> dict[str, int]:
        """What recover() would do now: expired transactions, unfinished rollbacks, unapplied records."""
        return overview.recovery_backlog(self.runtime)

    def vacuum(self, retention_seconds: float = DEFAULT_RETENTION_SECONDS, dry_run: bool = False,
               progress: vacuum.Progress | None = None) -> VacuumReport:
        """Delete what no snapshot in the retention window can see (each table keeps at least its own
        policy, set_retention); dry_run reports the same counts and deletes nothing; `progress(stage,
        done, total)` follows the work. Returns horizons and what was (would be) removed."""
        return vacuum.vacuum(self.runtime, retention_seconds, dry_run=dry_run, progress=progress)

    def compact(self, table: str, partitions: PartitionSpec | None = None,
                target_file_bytes: int = compaction.DEFAULT_TARGET_FILE_BYTES, min_parts: int = 2,
                progress: compaction.Progress | None = None,
                writer: compaction.Writer | None = None) -> CompactionReport:
        """Merge small visible parts of `table` (of the listed partitions; None: all) into parts of up
        to `target_file_bytes`, each merge a transaction of its own that no snapshot notices and that
        yields to any user transaction touching its parts (docs/COMPACTION.md). `writer` replaces the
        pyarrow writer (compaction.Writer; an engine compacts through adapter.open_compaction, which runs the
        same steps). Returns groups, merged, yielded, parts and bytes before/after."""
        self._check_root()
        return compaction.compact(self.runtime, table, partitions, target_file_bytes, min_parts, progress, writer)

    def set_retention(self, table: str, seconds: float | None = None,
                      versions: int | None = None) -> RetentionInfo:
        """Keep `table` readable at least `seconds` back and/or its last `versions` commits, whatever
        vacuum's retention_seconds (both None: back to the global rules). Returns `retention(table)`."""
        return retention.set_policy(self.runtime, table, seconds, versions)

    def retention(self, table: str) -> RetentionInfo:
        """{table, seconds, versions, horizon}: the table's own policy and the oldest CSN it can be read at."""
        return retention.describe(self.runtime, table)

    # -- lazy reads for other engines (core/datasets.py) ---------------------------------------------
    def dataset(self, table: str, csn: int | None = None, tag: str | None = None) -> pads.Dataset:
        """`table` at snapshot `csn` (None: the readable watermark) or at tag `tag`, as a lazy
        `pyarrow.dataset.Dataset` of exactly the visible parts' files: nothing is read until it is scanned
        (`to_table(columns=..., filter=...)`, DuckDB, Polars' `scan_pyarrow_dataset`), and filters on partition
        columns skip whole files. Keep the snapshot readable (inside the retention window, or tagged) until the
        scan is done."""
        from airflow_txn.core import datasets  # pyarrow.dataset (and pandas, which it loads): only when used

        planned = datasets.plan(self.runtime, table, csn=csn, tag=tag)
        return datasets.planned_dataset(self.runtime, planned)

    def duckdb(self, connection: DuckDBConnection, csn: int | None = None, tag: str | None = None,
               tables: Sequence[str] | None = None) -> list[str]:
        """Register views `ns.table` in a DuckDB connection, each a lazy `dataset` of one consistent snapshot:
        `csn` (None: the readable watermark, taken once for all the views) or tag `tag`, of `tables` (None: every
        table; with a tag: every table it holds). Queries push projections and filters into the Parquet reader;
        an object-store root is read through pyarrow.fs (no DuckDB extension). Returns the view names."""
        from airflow_txn.core import datasets

        rt = self.runtime
        if tag is not None:
            if csn is not None:
                raise InvalidArgumentError(f"read at csn {csn} or at tag {tag!r}, not both")
            held = self.tag_info(tag)
            names = list(tables) if tables is not None else list(held["tables"])
            suffix = f"tag_{held['csn']}"
        else:
            csn = self._snapshot_for(csn, [] if tables is None else list(tables))
            if tables is None:  # the tables there, by the names they had there (docs/DESIGN.md D27)
                with rt.catalog.read() as conn:
                    names = [i.name.qualified for i in versions.tables_seen(conn, None, csn)]
            else:
                names = list(tables)
            suffix = str(csn)
        found = {}
        for name in names:
            planned = datasets.plan(rt, name, csn=None if tag is not None else csn, tag=tag)
            found[str(planned.info.name)] = datasets.planned_dataset(rt, planned)
        return datasets.register_views(connection, found, suffix)

    # -- publishing to other table formats (airflow_txn/publish; docs/INTEROP.md) ---------------------------
    @property
    def publisher(self) -> Publisher:
        """This warehouse's publishing (made on first use; InvalidArgumentError from its runs when it is off)."""
        if self._publisher is None:
            from airflow_txn.publish import delta, iceberg

            config = self.config
            self._publisher = Publisher(
                self.runtime, config.publish,
                lambda: iceberg.catalog_properties(config.catalog_url, self.runtime.storage.location,
                                                   config.storage_options, config.iceberg_catalog,
                                                   config.connect_timeout),
                lambda: self.warehouse_id,
                lambda: delta.storage_options(self.runtime.storage.location, config.storage_options))
        return self._publisher

    def publish(self, wait: bool = True, tables: Sequence[str] | None = None) -> dict[str, object]:
        """Catch publishing up to the readable watermark: every commit of `tables` (None: every table) not
        published yet becomes an Iceberg snapshot and/or a Delta version (the formats of publish=). wait=False only
        wakes the background publisher and returns {"scheduled": True}. Returns {csn, formats, tables: {table:
        {published_csn, snapshots, tags, and iceberg_snapshot_id and/or delta_version}}, errors}; PublishError
        names the tables that failed (the others were published; every commit stands). InvalidArgumentError when
        the warehouse was opened without publish=."""
        if not wait:
            if not self.config.publish:
                raise InvalidArgumentError("publishing is off for this warehouse: open it with publish='iceberg'")
            self.publisher.request()
            return {"scheduled": True}
        return self.publisher.run(tables)

    def _after_commit(self) -> None:
        """Called once a commit stands: publish it in the background (never fails, never waits)."""
        if self.config.publish:
            self.publisher.request()

    def iceberg_catalog(self) -> IcebergCatalog:
        """The pyiceberg catalog commits are published to (default: a SQL catalog in this catalog's database;
        its tables `ns.table`, each snapshot's summary carrying "airflow-txn.csn")."""
        return self.publisher.iceberg_catalog()

    def published(self, csn: int | None = None, tag: str | None = None,
                  tables: Sequence[str] | None = None) -> dict[str, dict[str, object]]:
        """Per table, what other engines read for snapshot `csn` (None: the readable watermark) or tag `tag`:
        {"csn" (the commit whose version it is), "published_csn"} and, publishing to Iceberg, {"iceberg_snapshot_id",
        "iceberg_table", "metadata_location"}, to Delta, {"delta_version", "delta_table" (its URI)}. Publishing is
        caught up first where it is behind; tables with nothing committed at or below the CSN are left out.
        SnapshotTooOldError below a table's retention horizon (as `read`), PublishError
        naming a table publishing could not catch up."""
        if tag is not None:
            if csn is not None:
                raise InvalidArgumentError(f"published at csn {csn} or at tag {tag!r}, not both")
            info = self.tag_info(tag)
            return dict(self.publisher.published(int(info["csn"]), list(info["tables"])))
        snapshot = self._snapshot_for(csn, tables)  # as a read: not above the watermark, not below a horizon
        return dict(self.publisher.published(snapshot, tables))

    def republish(self, table: str) -> dict[str, object]:
        """Publish `table` again from scratch: its Iceberg table (Delta log) is dropped and rebuilt from its oldest
        readable commit (snapshot ids and versions change; no data file is copied or touched)."""
        return self.publisher.republish(table)
