"""The ranges of the numbers a user passes that are no catalog integer (core/bounds.py checks them; the cli
bounds its options with them, without loading the engine)."""

from __future__ import annotations

MAX_RETENTION_SECONDS = 100 * 365 * 24 * 3600
"""The longest retention window (vacuum's retention_seconds, a table's own seconds): 100 years; a longer one
names no moment the commit log could hold (and 1e300 is a typo, not a policy)."""

MAX_TARGET_FILE_BYTES = 2**40
"""The largest size a compaction aims for per merged part: 1 TiB (a Parquet file larger than that is a typo)."""
