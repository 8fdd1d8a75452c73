"""The shapes of what the warehouse, the CLI and the maintenance operators return: one TypedDict per result.

They are plain dicts at run time (JSON-able as they are, pushed to XCom as they are, compared with dict
literals in tests); the classes only tell mypy, FastAPI and a reader which keys each holds and of what
type. `NotRequired` marks a key present only sometimes (e.g. with an external commit log).

    TransactionRecord   one transaction: `Warehouse.transactions()`, the CLI's `list`
    TransactionInfo     one transaction with its parts: `Warehouse.transaction_info()`, `show`
    PartInfo            a part a transaction wrote (role "created") or removes (role "removed")
    CommitLogEntry      a commit record: `Warehouse.commit_log()`, `log`
    LoggedCommit        a readable commit record with its transaction's metadata: `Warehouse.commits_after()`
    TableStats          a table at a snapshot: `Warehouse.table_stats()`, `tables`
    WatermarkInfo       readable CSN, oracle CSN and lag: `Warehouse.watermark_info()`, `watermark`
    RecoveryReport      what recovery did and found: `Warehouse.recover()`, `recover`
    VacuumReport        horizons and what vacuum removed: `Warehouse.vacuum()`, `vacuum`, VacuumOperator
    CompactionReport    a table's merges: `Warehouse.compact()`, `airflow_txn.spark.compact`, `compact`
    MergeOutcome        one merge of a compaction (status merged or yielded)
    CompactionSummary   CompactOperator's XCom: every table's CompactionReport and totals
    ManifestReport      the manifests written: `Warehouse.write_manifest()`, `manifest`
    TableManifest, ManifestIndex   the manifest files themselves (docs/MANIFESTS.md)
    RetentionInfo       a table's retention policy and horizon: `Warehouse.retention()`, `retention`
    TagInfo             a named snapshot: `Warehouse.tag()`, `Warehouse.tags()`, `tag`, `tags`
    DoctorReport        the checks of `airflow-txn doctor`
    InitResult, ReadResult, RollbackResult   the CLI's `init`, `read` and `rollback`

The plugin page's JSON (transaction summaries and details grouped by task and table) is shaped in
airflow_txn/airflow/plugins/web/data.py, on top of these. Partition ({column: value as text, None for NULL})
is model/partitioning.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired

from typing_extensions import TypedDict  # pydantic (the page's JSON API) needs this one before Python 3.12

from airflow_txn.model.partitioning import Partition

TransactionState = Literal["active", "committed", "rolled_back"]
"""A transaction's public state; one being committed shows as active with commit_in_progress true."""
IsolationName = Literal["snapshot", "serializable"]
PartRole = Literal["created", "removed"]
MergeStatus = Literal["merged", "yielded"]
CheckStatus = Literal["ok", "warn", "fail", "skip"]

PartitionSpec = Sequence[Mapping[str, object]]
"""Partitions as a caller names them: [{column: value}, ...], each value cast to its column's type."""
Row = dict[str, object]
"""One row of a table's data as Python values: {column: value}."""
JsonObject = dict[str, object]
"""A JSON object as Python values (str keys; str, int, float, bool, None, lists and objects)."""


# -- transactions -------------------------------------------------------------------------------------------------
class TransactionRecord(TypedDict):
    tid: str
    label: str | None
    state: TransactionState
    isolation: IsolationName
    snapshot_csn: int
    commit_csn: int | None
    lease_seconds: float
    lease_deadline: float
    created_at: float
    ended_at: float | None
    failed_reason: str | None
    cleanup_done: bool
    commit_in_progress: bool
    metadata: JsonObject
    """What the caller recorded with the transaction (`begin(metadata=)`, `Transaction.annotate`); {}: nothing."""


class MergeCounts(TypedDict):
    """What a MERGE did (Transaction.merge): target rows updated and deleted, source rows inserted."""

    updated: int
    inserted: int
    deleted: int


class PartInfo(TypedDict):
    table: str
    partition: Partition
    path: str
    rows: int
    bytes: int
    key: str | None
    attempt: int | None
    removal_key: str | None
    removal_attempt: int | None
    role: PartRole
    creation_csn: int | None
    removal_csn: int | None


class TransactionInfo(TransactionRecord):
    must_run_again: dict[str, str]
    """{staging key: the retried key whose retry withdrew what it staged} (docs/CONCEPTS.md)."""
    tables: list[str]
    parts: list[PartInfo]


class CheckRecord(TypedDict):
    """One report a write-audit-publish check step recorded on a transaction (Warehouse.check_reports)."""

    key: str
    """The step's key (in Airflow: task_id, or task_id[map_index])."""
    recorded_at: float | None
    """When it was recorded (None: kept in the transaction's metadata by an airflow_txn before schema version 6)."""
    report: JsonObject
    """The report (airflow_txn.checks.CheckReport)."""


class CommitLogEntry(TypedDict):
    csn: int
    tid: str
    tables: list[str]
    committed_at: float
    applied: bool


class LoggedCommit(CommitLogEntry):
    """A readable commit record with what its transaction recorded (Warehouse.commits_after)."""

    metadata: JsonObject
    """The transaction's metadata ({}: none, or its row was purged): `{"airflow": {...}}` when an Airflow
    task began or committed it."""


# -- overview -----------------------------------------------------------------------------------------------------
class TableStats(TypedDict):
    table: str
    partition_by: list[str]
    last_commit_csn: int | None
    parts: int
    rows: int
    bytes: int
    csn: int


class WatermarkInfo(TypedDict):
    readable_csn: int
    oracle: str
    oracle_csn: int | None
    """None: ZooKeeper could not be reached (oracle_error says why)."""
    mirrored_csn: NotRequired[int]
    """External log only: the last CSN mirrored into the catalog."""
    lag: int | None
    oracle_error: NotRequired[str]


# -- maintenance --------------------------------------------------------------------------------------------------
class RecoveryReport(TypedDict):
    rolled_forward: int
    rolled_back: list[str]
    finished_rollbacks: list[str]
    watermark: int
    log_records_compacted: NotRequired[int]
    """External log only."""
    orphan_dirs: NotRequired[int]
    """With the storage check (Warehouse.recover always does it): unregistered write dirs."""
    missing_files: NotRequired[list[str]]
    """With the storage check: files of visible parts that are gone."""


class PurgedRows(TypedDict):
    read_set: int
    keys: int
    commit_log: int
    table_commits: int
    table_versions: int
    """Rolled-back versions of tables' schemas (docs/DESIGN.md, D27; catalog schema version 7)."""
    transactions: int
    check_reports: int
    """Write-audit-publish check reports of purged transactions (catalog schema version 6)."""
    compactions: int
    """Rows of background merges whose sources are all gone, older than the history kept (each table's newest
    merge stays)."""


class AdoptionReport(TypedDict):
    """What Warehouse.adopt_root found and did (`airflow-txn adopt-root`)."""

    root: str
    warehouse_id: str
    """The warehouse the root belongs to now."""
    csn: int
    """The CSN its catalog had reached, recorded in the root's marker."""
    parts_checked: int
    """Committed parts whose files were found on the root."""
    previous_warehouse_id: str | None
    """Whose marker the root had (None: none)."""
    previous_csn: int | None


class VacuumReport(TypedDict):
    horizon: int
    horizons: dict[str, int]
    """{table: the horizon it was vacuumed to}."""
    parts_removed: int
    orphan_dirs_removed: int
    bytes_freed: int
    merge_sources_kept: int
    tagged_parts_kept: int
    """Parts past the horizon kept because a tag sees them (Warehouse.tag)."""
    manifests_removed: int
    manifests_refreshed: int
    rows_purged: PurgedRows
    foreign_files_kept: int
    """Unregistered files below the tables that this warehouse cannot prove are its own (their transaction is not
    in its catalog: another warehouse's, or newer than a restored catalog): kept, and named in the log."""
    dry_run: bool


class MergeOutcome(TypedDict):
    tid: str
    partition: Partition
    sources: int
    rows: int
    bytes_before: int
    csn: int
    status: MergeStatus
    reason: NotRequired[str]
    """status yielded: why."""
    part: NotRequired[int]
    """status merged: the merged part's id."""
    bytes_after: NotRequired[int]
    """status merged."""


class MergeTotals(TypedDict):
    """What merges did, summed: over a table's groups (CompactionReport) or over tables (CompactionSummary)."""

    merged: int
    yielded: int
    parts_before: int
    parts_after: int
    bytes_before: int
    bytes_after: int


class CompactionReport(MergeTotals):
    table: str
    groups: int
    tids: list[str]
    merges: list[MergeOutcome]


class CompactionSummary(MergeTotals):
    """CompactOperator's XCom value: one report per table compacted, the tables skipped, the totals."""

    engine: str
    tables: dict[str, CompactionReport]
    skipped: list[str]


class RetentionInfo(TypedDict):
    table: str
    seconds: float | None
    versions: int | None
    horizon: int


class TagInfo(TypedDict):
    """A named snapshot: the CSN it names and the tables it holds (vacuum keeps what it sees)."""

    name: str
    csn: int
    tables: list[str]
    created_at: float
    note: str | None


# -- manifests (docs/MANIFESTS.md) ---------------------------------------------------------------------------------
class ManifestReport(TypedDict):
    csn: int
    directory: str
    index: str
    tables: dict[str, str]
    """{table: path of its manifest}."""


class ManifestFile(TypedDict):
    path: str
    size_bytes: int


class ManifestPart(TypedDict):
    id: int
    partition: Partition
    row_count: int
    size_bytes: int
    creation_tid: str | None
    creation_csn: int | None
    files: list[ManifestFile]
    columns: NotRequired[dict[str, str | None]]
    """Only for a part written under an older version of the table's schema that reading its files by column name
    would misread (a renamed or widened column, a default: docs/DESIGN.md, D27): {each column of the manifest: the
    name of the files' column holding it (cast it to the column's type), or None: not in the files (its default,
    `Warehouse.schema`'s field metadata, else null)}."""


class ManifestColumn(TypedDict):
    name: str
    type: str
    nullable: bool


class TableManifest(TypedDict):
    format: str
    version: int
    table: str
    csn: int
    schema: str
    columns: list[ManifestColumn]
    partition_by: list[str]
    row_count: int
    file_count: int
    parts: list[ManifestPart]
    tid: NotRequired[str]
    """Only in a transaction's view (Transaction.manifest): the transaction, whose staged parts are listed
    beside those its snapshot (`csn`) sees."""


class ManifestIndexEntry(TypedDict):
    table: str
    manifest: str
    row_count: int
    file_count: int


class ManifestIndex(TypedDict):
    format: str
    version: int
    csn: int
    tables: list[ManifestIndexEntry]
    warehouse_id: str
    """The warehouse that wrote it: vacuum removes or rewrites only its own (docs/DESIGN.md, invariant 11)."""


# -- the CLI ------------------------------------------------------------------------------------------------------
class DoctorCheck(TypedDict):
    name: str
    status: CheckStatus
    detail: str
    hint: str


class DoctorReport(TypedDict):
    ok: bool
    checks: list[DoctorCheck]


class InitResult(TypedDict):
    catalog: str
    root: str
    oracle: str
    readable_csn: int
    tables: int


class ColumnInfo(TypedDict):
    """One column of `airflow-txn schema`: its id is its Parquet field id in every part file (docs/DESIGN.md, D27)."""

    name: str
    type: str
    nullable: bool
    column_id: int | None
    default: object
    """What rows written before the column was added read (None: null)."""


class SchemaInfo(TypedDict):
    """`airflow-txn schema TABLE`: the table's columns at a snapshot."""

    table: str
    partition_by: list[str]
    columns: list[ColumnInfo]


class ReadResult(TypedDict):
    table: str
    csn: int
    num_rows: int
    rows: list[Row]
    tag: NotRequired[str]
    """The tag read at (`read --tag`)."""


class RollbackResult(TypedDict):
    tid: str
    state: TransactionState
    reason: str | None
    """The reason recorded (failed_reason): the one given, or an earlier failed statement's, which is kept."""
