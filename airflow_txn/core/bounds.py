"""Checks of the numbers a user passes (CSNs, limits, counts, attempts, leases, timeouts) before anything runs,
and of a transaction's metadata (a bounded JSON object).

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

from airflow_txn.core.config import MAX_LEASE_SECONDS
from airflow_txn.errors import InvalidArgumentError
from airflow_txn.model.csn import INT64_MAX

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


def catalog_int(value: object, what: str, minimum: int = 0) -> int:
    """`value` as an int from `minimum` to INT64_MAX (any integer type; not a bool, float or str)."""
    number = None if isinstance(value, bool) or not isinstance(value, SupportsIndex) else operator.index(value)
    if number is None or not minimum <= number <= INT64_MAX:
        raise InvalidArgumentError(f"{what} must be an integer from {minimum} to {INT64_MAX}, got {value!r}")
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


def _is_number(value: object) -> TypeGuard[int | float]:
    """An int or a float that is not NaN (a bool is no number of seconds)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not (isinstance(value, float) and math.isnan(value))
