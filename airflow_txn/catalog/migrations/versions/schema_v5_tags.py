"""Schema version 5: named snapshots (tags), two new tables: txn_tags (a name, its CSN, when it was made,
a note) and txn_tag_tables (the tables each tag holds); older rows are untouched."""

from __future__ import annotations

import sqlalchemy as sa

from airflow_txn.catalog.migrate import ID, create_table_once, set_meta

revision: str = "schema_v5"
down_revision: str | None = "schema_v4"
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): no, an older vacuum would delete the parts a tag pins.
older_clients_tolerate: bool = False


def upgrade() -> None:
    create_table_once(
        "txn_tags",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("csn", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("note", sa.Text),
    )
    create_table_once(
        "txn_tag_tables",
        sa.Column("tag", sa.String(128), sa.ForeignKey("txn_tags.name"), primary_key=True),
        sa.Column("table_id", ID, sa.ForeignKey("txn_tables.id"), primary_key=True, autoincrement=False),
        sa.Index("ix_txn_tag_tables_table", "table_id"),
    )
    set_meta("schema_version", "5")
