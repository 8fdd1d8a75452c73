"""The catalog's tables (SQLAlchemy Core) and the schema version that migrations key on.

meta            key/value facts about the catalog itself (schema_version)
counters        named 64-bit counters: last_csn (the SQL oracle), vacuum_horizon, snapshot_gate
tables          one row per table: name, Arrow schema (IPC bytes), partition columns, directory
transactions    one row per transaction: state machine active -> committed | rolled_back, and the caller's
                metadata (a JSON object: e.g. the Airflow run that wrote it)
parts           one row per part: the four version columns (docs/DESIGN.md) plus files and staging keys
commit_log      (csn, tid, tables, time, applied): the record is the commit point (invariant 3)
table_commits   (table_id, csn) for every table a commit touched: last_commit_csn, serializable checks
read_set        (tid, table_id, partition_key) read by serializable transactions (vacuum purges ended ones)
table_retention per-table retention policy (seconds, versions) and the table's stored vacuum horizon
compactions     one row per background merge that swapped (compaction.py): its tid, CSN, time
keys            (tid, key): the newest attempt started under a staging key (the zombie fence) and, when
                a retry of another key withdrew this key's work, which key did (it must run again)
scans           (tid, seq, table, partition): what each statement of a transaction scanned, in order, so
                a retry can tell which later statements saw what it withdraws (retries.py)
tags            named snapshots: a name, a CSN and (tag_tables) the tables it holds; vacuum keeps every
                part a tag can see (core/tags.py)
check_reports   one row per report a write-audit-publish check step recorded on a transaction (its tid, the
                step's key, when, the report as JSON), appended: steps recording at once never overwrite
table_versions  one row per version of a table's schema (docs/DESIGN.md, D27), with a part's four version
                columns: staged by the DDL statement of a transaction, stamped by its commit's apply like its
                parts, so the schema a read at CSN c uses is the one version visible at c (invariant 2)
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ColumnElement,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    and_,
    or_,
    text,
)

from airflow_txn.model.csn import ROLLBACK_CSN

SCHEMA_VERSION = 7
# 1 -> 2: tables txn_table_retention and txn_compactions added; 2 -> 3: tables txn_keys and txn_scans added;
# 3 -> 4: column txn_transactions.metadata_json added; 4 -> 5: tables txn_tags and txn_tag_tables added;
# 5 -> 6: table txn_check_reports added; 6 -> 7: table txn_table_versions and column txn_parts.schema_version added.
# Each step is an Alembic revision in catalog/migrations/versions/ (catalog/migrate.py runs them); a change
# here needs a new revision, and tests/catalog/test_migrations.py checks that the two agree.
MIN_CATALOG_VERSION = 5
"""The oldest catalog schema version this code works on (docs/DESIGN.md, D23); an older catalog raises
CatalogUpgradeRequiredError (opening never upgrades one). On a schema-5 catalog (no txn_check_reports) it reads
and writes as usual, shows the check reports kept in transactions' metadata, and refuses to record a check report
(CatalogUpgradeRequiredError): `Catalog.at_least` tells which schema the catalog is at. On a schema-5 or 6 catalog
(no txn_table_versions) a table's only schema is the one txn_tables holds (its version 1) and a table change
(add_column, ...) raises CatalogUpgradeRequiredError before anything is staged."""
VERSIONED_SINCE = 7
"""The schema version that brought txn_table_versions and txn_parts.schema_version (table changes, D27)."""

SPAN_LEVELS = 40
"""A part that ended (removal_csn set) lived d = removal_csn - creation_csn CSNs; its span level is floor(log2(d)) for
1 <= d < 2**SPAN_LEVELS (and 0 for d < 1: never visible), SPAN_LEVELS for longer lives (2**40 commits: 35 years at 1,000
commits a second), NULL while it lives (docs/DESIGN.md, D31)."""


def _span_level_sql() -> str:
    d = "removal_csn - creation_csn"
    whens = " ".join(f"WHEN {d} < {2 ** (k + 1)} THEN {k}" for k in range(SPAN_LEVELS))
    return f"(CASE {whens} WHEN {d} >= {2 ** SPAN_LEVELS} THEN {SPAN_LEVELS} END)"


SPAN_LEVEL_SQL = _span_level_sql()
"""The span level as SQL over txn_parts' own columns, the expression of index ix_txn_parts_span: a lookup names it
in this very text (unqualified, constants inline) so that SQLite and PostgreSQL match it to the index. The
database computes it on every write of the row: no writer sets it, older airflow_txn included."""

metadata = MetaData()

# BigInteger primary keys do not autoincrement on SQLite; INTEGER does (and is 64-bit there).
_Id = BigInteger().with_variant(Integer(), "sqlite")

meta = Table(
    "txn_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

counters = Table(
    "txn_counters",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", BigInteger, nullable=False),
)

tables = Table(
    "txn_tables",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("name", String(130), nullable=False, unique=True),
    Column("schema_ipc", LargeBinary, nullable=False),
    Column("partition_by", Text, nullable=False),  # JSON list of column names
    Column("directory", Text, nullable=False),  # relative to the storage root
    Column("created_at", Float, nullable=False),
)

transactions = Table(
    "txn_transactions",
    metadata,
    Column("tid", String(64), primary_key=True),
    Column("label", Text),
    Column("state", String(16), nullable=False),  # active | committed | rolled_back
    Column("isolation", String(16), nullable=False),
    Column("snapshot_csn", BigInteger, nullable=False),
    Column("commit_csn", BigInteger),
    Column("lease_seconds", Float, nullable=False),
    Column("lease_deadline", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("failed_reason", Text),  # set when a statement failed: only rollback is allowed then
    Column("cleanup_done", Boolean, nullable=False, default=False),  # rollback stamps finished
    Column("metadata_json", Text),  # the caller's metadata, a JSON object (NULL: none); since schema version 4
    Index("ix_txn_transactions_state", "state"),
)

parts = Table(
    "txn_parts",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("table_id", _Id, ForeignKey("txn_tables.id"), nullable=False),
    Column("partition_key", Text, nullable=False),  # canonical JSON of {column: value-as-text}
    Column("path", Text, nullable=False),  # part directory, relative to the table directory
    Column("files", Text, nullable=False),  # JSON list of file names inside the part directory
    Column("row_count", BigInteger, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("creation_tid", String(64), nullable=False),
    Column("creation_csn", BigInteger),
    Column("removal_tid", String(64)),
    Column("removal_csn", BigInteger),
    Column("stage_key", Text),  # the key a statement staged this part under (invariant 7)
    Column("stage_attempt", BigInteger),  # attempt number of that key (Airflow's try number), or NULL
    Column("removal_key", Text),
    Column("removal_attempt", BigInteger),
    Column("created_at", Float, nullable=False),
    Column("schema_version", BigInteger),  # the table version the part was written under; NULL: 1 (schema 7)
    # Visible-part lookups (visibility_sql): live parts are the removal_csn IS NULL range of the first index (with
    # creation_csn <= S checked in it); parts that ended after the snapshot are found by their span level in the
    # second, one creation_csn range per level (docs/DESIGN.md, D31). The first also serves vacuum's removal_csn
    # ranges.
    Index("ix_txn_parts_table_removal", "table_id", "removal_csn", "creation_csn"),
    Index("ix_txn_parts_span", "table_id", text(SPAN_LEVEL_SQL), "creation_csn", "removal_csn"),
    Index("ix_txn_parts_creation_tid", "creation_tid"),
    Index("ix_txn_parts_removal_tid", "removal_tid"),
    Index("ix_txn_parts_removal_csn", "removal_csn"),
)


def written_by(tid: Any) -> ColumnElement[bool]:
    """The txn_parts rows transaction `tid` created or removed (along the two tid indexes), a part a keyed retry
    withdrew excluded (ROLLBACK_CSN, removal_tid = tid to hide it from tid itself): no write of the transaction."""
    written: ColumnElement[bool] = and_(or_(parts.c.creation_tid == tid, parts.c.removal_tid == tid),
                                        or_(parts.c.creation_csn.is_(None), parts.c.creation_csn != ROLLBACK_CSN))
    return written


def of_table_along_tid(table_id: Any) -> ColumnElement[bool]:
    """txn_parts.table_id = `table_id` as a filter only, never an index range: for a statement finding one transaction's
    parts of one table, which should walk ix_txn_parts_creation_tid / removal_tid (the transaction's own rows). SQLite
    keeps no statistics on the catalog and otherwise takes ix_txn_parts_table_removal's table_id range: every part of
    the table, read for a rollback or an apply of one part (tests/core/test_table_change_cost.py). `+ 0` is the
    expression both databases leave unindexed."""
    unindexed: ColumnElement[bool] = (parts.c.table_id + 0) == table_id
    return unindexed


commit_log = Table(
    "txn_commit_log",
    metadata,
    Column("csn", BigInteger, primary_key=True, autoincrement=False),
    Column("tid", String(64), nullable=False, unique=True),
    Column("tables", Text, nullable=False),  # JSON list of table names
    Column("committed_at", Float, nullable=False),
    Column("applied", Boolean, nullable=False),
    Index("ix_txn_commit_log_applied", "applied", "csn"),
    Index("ix_txn_commit_log_time", "committed_at"),
)

table_commits = Table(
    "txn_table_commits",
    metadata,
    Column("table_id", _Id, ForeignKey("txn_tables.id"), primary_key=True, autoincrement=False),
    Column("csn", BigInteger, primary_key=True, autoincrement=False),
)

read_set = Table(
    "txn_read_set",
    metadata,
    Column("tid", String(64), primary_key=True),
    Column("table_id", _Id, primary_key=True, autoincrement=False),
    Column("partition_key", Text, primary_key=True),  # "*" = the whole table
)

table_retention = Table(
    "txn_table_retention",
    metadata,
    Column("table_id", _Id, ForeignKey("txn_tables.id"), primary_key=True, autoincrement=False),
    Column("seconds", Float),  # keep snapshots of the last `seconds` readable (NULL: no time rule)
    Column("versions", BigInteger),  # keep the table's last `versions` commits readable (NULL: no rule)
    Column("horizon", BigInteger, nullable=False),  # the table's stored vacuum horizon (never lowered)
    Column("updated_at", Float, nullable=False),
)

compactions = Table(
    "txn_compactions",
    metadata,
    Column("tid", String(64), primary_key=True),  # the merge transaction (its row in txn_transactions)
    Column("table_id", _Id, ForeignKey("txn_tables.id"), nullable=False),
    Column("partition_key", Text, nullable=False),
    Column("merge_csn", BigInteger, nullable=False),  # max CSN of the sources: the merged part's CSN
    Column("merged_part_id", _Id, nullable=False),
    Column("source_parts", BigInteger, nullable=False),
    Column("rows", BigInteger, nullable=False),
    Column("source_bytes", BigInteger, nullable=False),
    Column("merged_bytes", BigInteger, nullable=False),
    Column("committed_at", Float, nullable=False),  # wall time of the swap: vacuum keeps sources past it
    Index("ix_txn_compactions_table_time", "table_id", "committed_at"),
)

keys = Table(
    "txn_keys",
    metadata,
    Column("tid", String(64), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("attempt", BigInteger),  # the newest attempt started under the key (NULL: explicit keys)
    Column("invalidated_by", Text),  # the key whose retry withdrew this key's work; NULL: nothing to re-run
    Column("invalidated_attempt", BigInteger),  # the attempt that was current then: it may not go on
)

scans = Table(
    "txn_scans",
    metadata,
    Column("tid", String(64), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),  # statement order in the transaction
    Column("table_id", _Id, primary_key=True, autoincrement=False),
    Column("partition_key", Text, primary_key=True),  # "*" = the whole table; "" = nothing scanned (an append)
    Column("key", Text),  # the statement's staging key; NULL: a write with no key
    Column("attempt", BigInteger),
    Column("kind", String(8), nullable=False),  # write | read
)

tags = Table(
    "txn_tags",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("csn", BigInteger, nullable=False),  # the snapshot it names (<= the watermark when it was made)
    Column("created_at", Float, nullable=False),
    Column("note", Text),  # the caller's words (e.g. the Airflow run that made it); NULL: none
)

tag_tables = Table(
    "txn_tag_tables",
    metadata,
    Column("tag", String(128), ForeignKey("txn_tags.name"), primary_key=True),
    Column("table_id", _Id, ForeignKey("txn_tables.id"), primary_key=True, autoincrement=False),
    Index("ix_txn_tag_tables_table", "table_id"),  # vacuum: the tags of one table
)

check_reports = Table(
    "txn_check_reports",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),  # the order reports were recorded in
    Column("tid", String(64), nullable=False),  # the transaction checked (no foreign key: purged after its row)
    Column("key", Text, nullable=False),  # the check step's key (in Airflow: task_id or task_id[map_index])
    Column("recorded_at", Float, nullable=False),
    Column("report_json", Text, nullable=False),  # the CheckReport, a JSON object
    Index("ix_txn_check_reports_tid", "tid", "id"),
)

table_versions = Table(
    "txn_table_versions",
    metadata,
    Column("table_id", _Id, ForeignKey("txn_tables.id"), primary_key=True, autoincrement=False),
    Column("version", BigInteger, primary_key=True, autoincrement=False),  # 1, 2, ... (gaps: rolled back)
    Column("schema_ipc", LargeBinary, nullable=False),  # the Arrow schema, column ids in its fields' metadata
    Column("partition_by", Text, nullable=False),  # JSON list of column names
    Column("name", String(130), nullable=False),  # the table's qualified name in this version
    Column("dropped", Boolean, nullable=False),  # a tombstone: the table was dropped in this version
    Column("change", Text),  # what the DDL did, for messages (NULL: the table's first version)
    Column("compatible", Boolean, nullable=False),  # concurrent writers of the version before may still commit
    Column("creation_tid", String(64), nullable=False),
    Column("creation_csn", BigInteger),
    Column("removal_tid", String(64)),
    Column("removal_csn", BigInteger),
    Column("stage_key", Text),
    Column("stage_attempt", BigInteger),
    Column("removal_key", Text),
    Column("removal_attempt", BigInteger),
    Column("created_at", Float, nullable=False),
    Index("ix_txn_table_versions_creation_tid", "creation_tid"),
    Index("ix_txn_table_versions_removal_tid", "removal_tid"),
)

INDEX_VERSION = 3
"""Bumped when indexes change (index changes need no schema version: older code works with them); the
revision indexes_v2 created ix_txn_parts_table_removal and dropped (table_id, creation_csn)'s index, indexes_v3
created ix_txn_parts_span (docs/DESIGN.md, D31)."""
SPAN_INDEX_SINCE = 3
"""The index version that brought ix_txn_parts_span: below it, lookups use the removal_csn ranges alone."""

COUNTER_LAST_CSN = "last_csn"
COUNTER_VACUUM_HORIZON = "vacuum_horizon"
COUNTER_SNAPSHOT_GATE = "snapshot_gate"
