"""Schema version 7: a table's schema is versioned like a part (docs/DESIGN.md, D27). Table txn_table_versions (one
row per version, with a part's four version columns and its staging key) and column txn_parts.schema_version (the
version a part was written under; NULL: version 1).

Every existing table gets its version 1, the schema txn_tables holds, committed at CSN 1 (the prehistoric snapshot)
by no transaction ("-"): a table made by `create_table` outside any transaction has always been read under its
schema at every snapshot, one older than the table included (an empty table), and CSN 1 keeps every such read as it
was. Its parts keep schema_version NULL: version 1.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from airflow_txn.catalog.migrate import ID, create_table_once, set_meta

revision: str = "schema_v7"
down_revision: str | None = "schema_v6"
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): no. Once a table changed, an older client would read every
# snapshot under the newest schema txn_tables caches (time travel and renamed columns misread), record parts written
# under a newer version as version 1, and commit across an incompatible change without the check D27 asks.
older_clients_tolerate: bool = False

PREHISTORIC_CSN = 1
NO_TRANSACTION = "-"


def upgrade() -> None:
    create_table_once(
        "txn_table_versions",
        sa.Column("table_id", ID, sa.ForeignKey("txn_tables.id"), primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("schema_ipc", sa.LargeBinary, nullable=False),
        sa.Column("partition_by", sa.Text, nullable=False),
        sa.Column("name", sa.String(130), nullable=False),
        sa.Column("dropped", sa.Boolean, nullable=False),
        sa.Column("change", sa.Text),
        sa.Column("compatible", sa.Boolean, nullable=False),
        sa.Column("creation_tid", sa.String(64), nullable=False),
        sa.Column("creation_csn", sa.BigInteger),
        sa.Column("removal_tid", sa.String(64)),
        sa.Column("removal_csn", sa.BigInteger),
        sa.Column("stage_key", sa.Text),
        sa.Column("stage_attempt", sa.BigInteger),
        sa.Column("removal_key", sa.Text),
        sa.Column("removal_attempt", sa.BigInteger),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Index("ix_txn_table_versions_creation_tid", "creation_tid"),
        sa.Index("ix_txn_table_versions_removal_tid", "removal_tid"),
    )
    bind = op.get_bind()
    columns = {c["name"] for c in sa.inspect(bind).get_columns("txn_parts")}
    if "schema_version" not in columns:  # idempotent, as every revision
        op.add_column("txn_parts", sa.Column("schema_version", sa.BigInteger))
    tables = sa.table("txn_tables", sa.column("id"), sa.column("name"), sa.column("schema_ipc"),
                      sa.column("partition_by"), sa.column("created_at"))
    versions = sa.table("txn_table_versions", *(sa.column(c) for c in (
        "table_id", "version", "schema_ipc", "partition_by", "name", "dropped", "change", "compatible",
        "creation_tid", "creation_csn", "created_at")))
    missing = sa.select(
        tables.c.id, sa.literal(1, sa.BigInteger), tables.c.schema_ipc, tables.c.partition_by, tables.c.name,
        sa.literal(False, sa.Boolean), sa.null(), sa.literal(True, sa.Boolean), sa.literal(NO_TRANSACTION),
        sa.literal(PREHISTORIC_CSN, sa.BigInteger), tables.c.created_at,
    ).where(tables.c.id.not_in(sa.select(versions.c.table_id)))
    bind.execute(sa.insert(versions).from_select(list(versions.c), missing))
    set_meta("schema_version", "7")
