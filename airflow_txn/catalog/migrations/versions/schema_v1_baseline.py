"""Schema version 1, the baseline: the catalog's first tables, as airflow_txn created them before Alembic.

A catalog made by that code (txn_meta says schema_version 1, no txn_alembic_version table) is stamped at
this revision by airflow_txn.catalog.migrate, not created again. Like every revision here it is frozen
history: it never follows later changes to catalog/schema.py (later revisions make those), and it is
idempotent (a table that exists is left alone). There are no downgrades: an older airflow_txn refuses a
newer catalog instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from airflow_txn.catalog.migrate import ID, create_table_once, set_meta

revision: str = "schema_v1"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): no, the baseline: there is no older client.
older_clients_tolerate: bool = False


def upgrade() -> None:
    create_table_once(
        "txn_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    create_table_once(
        "txn_counters",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
    )
    create_table_once(
        "txn_tables",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(130), nullable=False, unique=True),
        sa.Column("schema_ipc", sa.LargeBinary, nullable=False),
        sa.Column("partition_by", sa.Text, nullable=False),
        sa.Column("directory", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    create_table_once(
        "txn_transactions",
        sa.Column("tid", sa.String(64), primary_key=True),
        sa.Column("label", sa.Text),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("isolation", sa.String(16), nullable=False),
        sa.Column("snapshot_csn", sa.BigInteger, nullable=False),
        sa.Column("commit_csn", sa.BigInteger),
        sa.Column("lease_seconds", sa.Float, nullable=False),
        sa.Column("lease_deadline", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float),
        sa.Column("failed_reason", sa.Text),
        sa.Column("cleanup_done", sa.Boolean, nullable=False),
        sa.Index("ix_txn_transactions_state", "state"),
    )
    create_table_once(
        "txn_parts",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("table_id", ID, sa.ForeignKey("txn_tables.id"), nullable=False),
        sa.Column("partition_key", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("files", sa.Text, nullable=False),
        sa.Column("row_count", sa.BigInteger, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("creation_tid", sa.String(64), nullable=False),
        sa.Column("creation_csn", sa.BigInteger),
        sa.Column("removal_tid", sa.String(64)),
        sa.Column("removal_csn", sa.BigInteger),
        sa.Column("stage_key", sa.Text),
        sa.Column("stage_attempt", sa.BigInteger),
        sa.Column("removal_key", sa.Text),
        sa.Column("removal_attempt", sa.BigInteger),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Index("ix_txn_parts_table_creation", "table_id", "creation_csn"),  # replaced in indexes_v2
        sa.Index("ix_txn_parts_creation_tid", "creation_tid"),
        sa.Index("ix_txn_parts_removal_tid", "removal_tid"),
        sa.Index("ix_txn_parts_removal_csn", "removal_csn"),
    )
    create_table_once(
        "txn_commit_log",
        sa.Column("csn", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("tid", sa.String(64), nullable=False, unique=True),
        sa.Column("tables", sa.Text, nullable=False),
        sa.Column("committed_at", sa.Float, nullable=False),
        sa.Column("applied", sa.Boolean, nullable=False),
        sa.Index("ix_txn_commit_log_applied", "applied", "csn"),
        sa.Index("ix_txn_commit_log_time", "committed_at"),
    )
    create_table_once(
        "txn_table_commits",
        sa.Column("table_id", ID, sa.ForeignKey("txn_tables.id"), primary_key=True, autoincrement=False),
        sa.Column("csn", sa.BigInteger, primary_key=True, autoincrement=False),
    )
    create_table_once(
        "txn_read_set",
        sa.Column("tid", sa.String(64), primary_key=True),
        sa.Column("table_id", ID, primary_key=True, autoincrement=False),
        sa.Column("partition_key", sa.Text, primary_key=True),
    )
    _seed()


def _seed() -> None:
    """The first rows: the schema version and the counters (last_csn and vacuum_horizon start at the
    prehistoric CSN 1, the snapshot gate at 0)."""
    if set_meta("schema_version", "1", only_if_missing=True):
        counters = sa.table("txn_counters", sa.column("name", sa.String), sa.column("value", sa.BigInteger))
        op.bulk_insert(counters, [{"name": "last_csn", "value": 1}, {"name": "vacuum_horizon", "value": 1},
                                  {"name": "snapshot_gate", "value": 0}])
