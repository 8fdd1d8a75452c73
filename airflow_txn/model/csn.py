"""Commit sequence numbers: the reserved values (the prehistoric snapshot and the rollback marker)."""

from __future__ import annotations

from typing import Final

PREHISTORIC_CSN: Final = 1
"""The snapshot of data that predates transactions; the first commit gets CSN 2."""

INT64_MAX: Final = 2**63 - 1
"""The largest integer the catalog's 64-bit columns hold (CSNs, ids, counts)."""

ROLLBACK_CSN: Final = INT64_MAX
"""Stamped on parts of rolled-back (or compensated) writes: greater than every snapshot, never visible."""
