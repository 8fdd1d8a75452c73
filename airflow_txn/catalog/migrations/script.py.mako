"""${message}

Revision ${up_revision}, after ${down_revision | comma,n}.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}
revision: str = ${repr(up_revision)}
down_revision: str | None = ${repr(down_revision)}
branch_labels: str | None = None
depends_on: str | None = None
# Whether clients of the previous schema version may go on using a catalog this revision upgraded (additive: a
# table, column or index older code never reads, and nothing older code does breaks an invariant it keeps): say
# why (docs/DESIGN.md, D23). False raises MIN_CLIENT_VERSION to this revision's schema version.
older_clients_tolerate: bool = False


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}
