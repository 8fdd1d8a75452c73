"""Moments as JSON writes them: ISO 8601 in UTC, to the microsecond (`2026-11-24T21:10:05.250000Z`). The one
owner of that form for every JSON the package prints or serves (`airflow-txn --json`, the Transactions page's
JSON API): the engine's results hold moments as epoch seconds, in the fields TIME_FIELDS names."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final, overload

TIME_FIELDS: Final = frozenset({"created_at", "ended_at", "lease_deadline", "committed_at"})
"""The fields of the engine's results (airflow_txn/model/results.py) that hold a moment in epoch seconds."""


@overload
def utc(epoch: float) -> str: ...


@overload
def utc(epoch: None) -> None: ...


def utc(epoch: float | None) -> str | None:
    """An epoch (seconds) as ISO 8601 in UTC, to the microsecond: `2026-11-24T21:10:05.250000Z` (None stays None)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def utc_times(value: object, field: str | None = None) -> object:
    """`value` (dicts and lists of JSON values, at any depth) with every moment of a TIME_FIELDS field written
    by `utc`; everything else unchanged."""
    if isinstance(value, Mapping):
        return {k: utc_times(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [utc_times(v) for v in value]
    if field in TIME_FIELDS and isinstance(value, int | float) and not isinstance(value, bool):
        return utc(float(value))
    return value
