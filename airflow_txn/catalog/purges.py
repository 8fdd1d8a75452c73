"""Batched deletes of history rows (vacuum's last step): a `Purge` pairs the SELECT of candidate keys,
built by the row module that owns the table (`txn_records.purgeable`, `read_sets.of_ended_transactions`,
...), with that module's delete of a batch of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, func, select


@dataclass(frozen=True)
class Purge:
    """One kind of history row: which keys may go (`candidates`) and how to delete some (`remove`,
    returning how many rows it deleted)."""

    kind: str
    candidates: Select[Any]
    remove: Callable[[Connection, list[Any]], int]

    def count(self, conn: Connection) -> int:
        """How many candidates there are now (a dry run's figure)."""
        return int(conn.execute(select(func.count()).select_from(self.candidates.subquery())).scalar_one())

    def take(self, conn: Connection, batch: int) -> list[Any]:
        """Up to `batch` candidate keys (tuples where the SELECT has several columns: a composite key)."""
        found = conn.execute(self.candidates.limit(batch))
        if len(self.candidates.selected_columns) > 1:
            return [tuple(row) for row in found]
        return list(found.scalars())
