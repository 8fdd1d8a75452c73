"""Index version 3: ix_txn_parts_span, (table_id, span level, creation_csn, removal_csn), so that a visible-part
lookup costs what the snapshot sees, not the table's history (docs/DESIGN.md, D31; docs/BENCHMARKS.md, B3).

The span level is an expression over the part's own columns (schema.SPAN_LEVEL_SQL), which the database computes on
every write of a row: no column is added and no writer sets anything, so the schema version stays 7 and older
airflow_txn keeps working on the catalog (it never reads the index; its writes keep it up to date). Building it
reads the whole txn_parts table once (10,000,000 parts: about a minute) and holds the table's write lock meanwhile.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from airflow_txn.catalog.migrate import set_meta
from airflow_txn.catalog.schema import SPAN_LEVEL_SQL

revision: str = "indexes_v3"
down_revision: str | None = "schema_v7"
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (catalog/
# migrate.py, MIN_CLIENT_VERSION; docs/DESIGN.md, D23): yes, an index: older statements work with it, and the
# database maintains it on their writes.
older_clients_tolerate: bool = True


def upgrade() -> None:
    op.create_index("ix_txn_parts_span", "txn_parts",
                    ["table_id", sa.text(SPAN_LEVEL_SQL), "creation_csn", "removal_csn"], if_not_exists=True)
    set_meta("index_version", "3")
