"""Commit sequence numbers: the reserved values (the prehistoric snapshot and the rollback marker)."""

from __future__ import annotations

from typing import Final

PREHISTORIC_CSN: Final = 1
"""The snapshot of data that predates transactions; the first commit gets CSN 2."""

ROLLBACK_CSN: Final = 2**63 - 1
"""Stamped on parts of rolled-back (or compensated) writes: greater than every snapshot, never visible."""
