"""Index version 2: visible-part lookups use (table_id, removal_csn, creation_csn) instead of
(table_id, creation_csn) (docs/BENCHMARKS.md, B3).

Index changes need no schema version (older airflow_txn works with either index), so this revision
records `index_version` 2 in txn_meta and leaves `schema_version` alone. Historically it shipped with
schema version 2; it comes last in the chain so that a pre-Alembic catalog maps to one revision by its
two meta rows (airflow_txn.catalog.migrate), and it is idempotent on a catalog that has it already.
"""

from __future__ import annotations

from alembic import op

from airflow_txn.catalog.migrate import set_meta

revision: str = "indexes_v2"
down_revision: str | None = "schema_v3"
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): yes, an index: older statements work with either.
older_clients_tolerate: bool = True


def upgrade() -> None:
    op.create_index("ix_txn_parts_table_removal", "txn_parts", ["table_id", "removal_csn", "creation_csn"],
                    if_not_exists=True)
    op.drop_index("ix_txn_parts_table_creation", "txn_parts", if_exists=True)
    set_meta("index_version", "2")
