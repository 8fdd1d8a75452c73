"""Commit sequence numbers: the reserved values and the small helpers that talk about them."""

from __future__ import annotations

from typing import Final

UNKNOWN_CSN: Final = 0
"""No CSN yet (the column is NULL in the catalog; 0 only where an int is required)."""

PREHISTORIC_CSN: Final = 1
"""The snapshot of data that predates transactions; the first commit gets CSN 2."""

ROLLBACK_CSN: Final = 2**63 - 1
"""Stamped on parts of rolled-back (or compensated) writes: greater than every snapshot, never visible."""


def is_real_csn(csn: int | None) -> bool:
    """True for a CSN a commit can have (not unknown, not the rollback marker)."""
    return csn is not None and PREHISTORIC_CSN <= csn < ROLLBACK_CSN
