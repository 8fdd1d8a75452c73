"""Checks of the numbers a user passes (CSNs, limits, counts, attempts, leases, timeouts, retentions, compaction
sizes) and of the filters (a transaction state) before anything runs, and of a transaction's metadata (a bounded
JSON object).

Every integer the catalog stores or compares lives in a signed 64-bit column (BIGINT), so an integer
argument must fit one: `catalog_int` is the one check for that (a larger value would otherwise reach
the driver and fail there raw). Failures are InvalidArgumentError naming the argument and its range.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Mapping
from typing import SupportsIndex, TypeGuard

from airflow_txn.catalog.txn_records import PRIVATE_KEY
from airflow_txn.core.config import MAX_LEASE_SECONDS
from airflow_txn.errors import InvalidArgumentError
from airflow_txn.model.csn import INT64_MAX
from airflow_txn.model.limits import MAX_RETENTION_SECONDS, MAX_TARGET_FILE_BYTES

TRANSACTION_STATES = ("active", "committing", "committed", "rolled_back")
"""The states `Warehouse.transactions(state=...)` filters on (catalog/txn_records.py's row states)."""

MAX_METADATA_BYTES = 64 * 1024
"""The largest metadata a transaction keeps, as JSON text (UTF-8): context, not data."""


def metadata_json(value: object) -> str:
    """A transaction's metadata as the catalog stores it: canonical JSON text of an object with string keys
    and JSON values (no NaN or infinity), at most MAX_METADATA_BYTES."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidArgumentError(f"metadata must be a JSON object (a dict with str keys), got {value!r:.200}")
    try:
        text = json.dumps(dict(value), sort_keys=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"metadata must hold JSON values only ({exc}), got {value!r:.200}") from exc
    if len(text.encode()) > MAX_METADATA_BYTES:
        raise InvalidArgumentError(f"metadata is {len(text.encode())} bytes as JSON, more than {MAX_METADATA_BYTES}: "
                                   "record context (ids, links), not data")
    return text


def user_metadata_json(value: object) -> str:
    """metadata_json of a caller's metadata, which may not use the key airflow_txn keeps its own values under."""
    if isinstance(value, Mapping) and PRIVATE_KEY in value:
        raise InvalidArgumentError(f"metadata key {PRIVATE_KEY!r} is airflow_txn's own: pick another key")
    return metadata_json(value)


MAX_PRIVATE_CHARS = 1024
"""The longest name or value Transaction.claim_private keeps (an id, not data)."""


def private_value(value: object, what: str) -> str:
    """A private value's name or value (Transaction.claim_private): a non-empty text of at most
    MAX_PRIVATE_CHARS."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_PRIVATE_CHARS:
        raise InvalidArgumentError(f"{what} must be a non-empty str of at most {MAX_PRIVATE_CHARS} characters, "
                                   f"got {value!r:.100}")
    return value


def catalog_int(value: object, what: str, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """`value` as an int from `minimum` to `maximum` (at most INT64_MAX; any integer type; not a bool, float or
    str)."""
    number = None if isinstance(value, bool) or not isinstance(value, SupportsIndex) else operator.index(value)
    if number is None or not minimum <= number <= maximum:
        raise InvalidArgumentError(f"{what} must be an integer from {minimum} to {maximum}, got {value!r:.100}")
    return number


def lease_seconds(value: object) -> float:
    """A lease: a positive, finite number of seconds up to MAX_LEASE_SECONDS."""
    if not _is_number(value) or not 0 < value <= MAX_LEASE_SECONDS:
        raise InvalidArgumentError(
            f"lease_seconds must be a positive number of seconds up to {MAX_LEASE_SECONDS:g} (7 days), got "
            f"{value!r}: renew a shorter lease during long work (Transaction.keep_alive)")
    return float(value)


def timeout_seconds(value: object, what: str = "timeout") -> float:
    """A wait: a number of seconds >= 0 (infinity waits for good; NaN is refused)."""
    if not _is_number(value) or value < 0:
        raise InvalidArgumentError(f"{what} must be a number of seconds >= 0, got {value!r}")
    return math.inf if value > 1e300 else float(value)  # an int too large for a float waits for good too


def retention_seconds(value: object, what: str = "retention_seconds") -> float:
    """A retention window: a finite number of seconds from 0 to MAX_RETENTION_SECONDS."""
    if not _is_number(value) or not 0 <= value <= MAX_RETENTION_SECONDS:
        raise InvalidArgumentError(f"{what} must be a number of seconds from 0 to {MAX_RETENTION_SECONDS:g} "
                                   f"(100 years), got {value!r}")
    return float(value)


def target_file_bytes(value: object) -> int:
    """A compaction's target size per merged part: an integer from 1 to MAX_TARGET_FILE_BYTES."""
    return catalog_int(value, "target_file_bytes", 1, MAX_TARGET_FILE_BYTES)


def min_parts(value: object) -> int:
    """How many parts a compaction merges at least: an integer from 2 (merging one part gains nothing)."""
    return catalog_int(value, "min_parts", 2)


def transaction_state(value: object) -> str | None:
    """A state filter: one of TRANSACTION_STATES, or None (every state)."""
    if value is not None and (not isinstance(value, str) or value not in TRANSACTION_STATES):
        raise InvalidArgumentError(f"state must be one of {list(TRANSACTION_STATES)} (or None: every state), "
                                   f"got {value!r:.100}")
    return value


def _is_number(value: object) -> TypeGuard[int | float]:
    """An int or a float that is not NaN (a bool is no number of seconds)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not (isinstance(value, float) and math.isnan(value))
