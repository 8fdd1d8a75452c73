"""Schema version 3: the staging keys' attempts and invalidations (txn_keys) and what each statement
scanned (txn_scans), both new tables; older rows are untouched."""

from __future__ import annotations

import sqlalchemy as sa

from airflow_txn.catalog.migrate import ID, create_table_once, set_meta

revision: str = "schema_v3"
down_revision: str | None = "schema_v2"
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): no, an older committer would not check the scans newer
# transactions record (missed conflicts) nor honour keyed retries' withdrawals.
older_clients_tolerate: bool = False


def upgrade() -> None:
    create_table_once(
        "txn_keys",
        sa.Column("tid", sa.String(64), primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("attempt", sa.BigInteger),
        sa.Column("invalidated_by", sa.Text),
        sa.Column("invalidated_attempt", sa.BigInteger),
    )
    create_table_once(
        "txn_scans",
        sa.Column("tid", sa.String(64), primary_key=True),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("table_id", ID, primary_key=True, autoincrement=False),
        sa.Column("partition_key", sa.Text, primary_key=True),
        sa.Column("key", sa.Text),
        sa.Column("attempt", sa.BigInteger),
        sa.Column("kind", sa.String(8), nullable=False),
    )
    set_meta("schema_version", "3")
