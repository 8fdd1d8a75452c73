"""Schema version 6: write-audit-publish check reports as rows of their own, table txn_check_reports (a
transaction's tid, the check step's key, when, the report as JSON), one insert per report; older rows are
untouched.

Reports an older airflow_txn kept inside a transaction's metadata (`{"checks": {key: report}}`) stay where they
are: readers show them first, then the rows of this table in the order recorded (core/check_reports.py).
"""

from __future__ import annotations

import sqlalchemy as sa

from airflow_txn.catalog.migrate import ID, create_table_once, set_meta

revision: str = "schema_v6"
down_revision: str | None = "schema_v5"
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): yes, a table older code never reads: an older client records
# its check reports in the transaction's metadata, which newer readers show too; it just does not show the rows
# newer clients record.
older_clients_tolerate: bool = True


def upgrade() -> None:
    create_table_once(
        "txn_check_reports",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("tid", sa.String(64), nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("report_json", sa.Text, nullable=False),
        sa.Index("ix_txn_check_reports_tid", "tid", "id"),
    )
    set_meta("schema_version", "6")
