"""Schema version 4: a transaction's metadata, column txn_transactions.metadata_json (a JSON object the
caller records with the transaction: e.g. the Airflow DAG run that wrote it); NULL for every older row.

A nullable column: older rows need no value, and the statements of older airflow_txn never name it
(yet an older airflow_txn refuses this catalog by its schema version, as it refuses any newer one).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from airflow_txn.catalog.migrate import set_meta

revision: str = "schema_v4"
down_revision: str | None = "indexes_v2"
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): yes, a nullable column older statements never name (their
# transactions simply have no metadata).
older_clients_tolerate: bool = True


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("txn_transactions")}
    if "metadata_json" not in columns:  # idempotent, as every revision
        op.add_column("txn_transactions", sa.Column("metadata_json", sa.Text))
    set_meta("schema_version", "4")
