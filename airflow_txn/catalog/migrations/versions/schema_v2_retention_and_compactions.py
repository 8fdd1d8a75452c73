"""Schema version 2: per-table retention policies (txn_table_retention) and the record of background
compactions (txn_compactions), both new tables; older rows are untouched."""

from __future__ import annotations

import sqlalchemy as sa

from airflow_txn.catalog.migrate import ID, create_table_once, set_meta

revision: str = "schema_v2"
down_revision: str | None = "schema_v1"
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): no, an older vacuum would ignore a table's retention policy
# and delete files it keeps.
older_clients_tolerate: bool = False


def upgrade() -> None:
    create_table_once(
        "txn_table_retention",
        sa.Column("table_id", ID, sa.ForeignKey("txn_tables.id"), primary_key=True, autoincrement=False),
        sa.Column("seconds", sa.Float),
        sa.Column("versions", sa.BigInteger),
        sa.Column("horizon", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    create_table_once(
        "txn_compactions",
        sa.Column("tid", sa.String(64), primary_key=True),
        sa.Column("table_id", ID, sa.ForeignKey("txn_tables.id"), nullable=False),
        sa.Column("partition_key", sa.Text, nullable=False),
        sa.Column("merge_csn", sa.BigInteger, nullable=False),
        sa.Column("merged_part_id", ID, nullable=False),
        sa.Column("source_parts", sa.BigInteger, nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=False),
        sa.Column("source_bytes", sa.BigInteger, nullable=False),
        sa.Column("merged_bytes", sa.BigInteger, nullable=False),
        sa.Column("committed_at", sa.Float, nullable=False),
        sa.Index("ix_txn_compactions_table_time", "table_id", "committed_at"),
    )
    set_meta("schema_version", "2")
