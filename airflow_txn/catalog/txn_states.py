"""The states of a transaction's row (txn_records.py re-exports them): apart, so that table_versions.py
reads them without importing txn_records (which imports the catalog package, hence table_versions)."""

from __future__ import annotations

ACTIVE = "active"
COMMITTING = "committing"  # external log only: the record may be being written; ask the log's decision
COMMITTED = "committed"
ROLLED_BACK = "rolled_back"
OPEN_STATES = (ACTIVE, COMMITTING)
ENDED_STATES = (COMMITTED, ROLLED_BACK)
