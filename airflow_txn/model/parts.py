"""What the storage root says of parts, as values: what a write left (WrittenPart, which staging registers in
the catalog) and what a listing found below a table (StoredEntry, which vacuum and recovery judge).

    WrittenPart   the files one staging call wrote for one partition: its path, files, rows and bytes
    StoredEntry   a write dir or plain part file found below a table (Storage.stored_parts), with its age

The storage root (airflow_txn/storage/root.py) makes them; the catalog, the core and the engines' adapters
pass them on. Pure values: nothing here touches storage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WrittenPart:
    """Files one staging call wrote for one partition, not yet registered in the catalog."""

    path: str
    """Relative to the table directory: the part file (D8), or the part directory (a write dir's)."""
    files: tuple[str, ...]
    row_count: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One write dir or plain part file `Storage.stored_parts` found below a table."""

    relative: str
    """Its path relative to the table directory."""
    path: str
    """Its path on the root's filesystem."""
    is_file: bool
    mtime: float | None
    """Last modification (seconds since the epoch), None if unknown (gone meanwhile)."""

    def age_seconds(self) -> float:
        return 0.0 if self.mtime is None else time.time() - self.mtime
