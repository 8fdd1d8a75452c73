"""The bound on waiting for a server that does not answer (catalog, object store, Spark Connect): its
default, its limit, and the precedence of its settings (an argument, else $AIRFLOW_TXN_CONNECT_TIMEOUT,
else the default). Here, below the catalog and storage, so that both read it without importing the
configuration (core/config.py re-exports these names)."""

from __future__ import annotations

import math

from airflow_txn import environment
from airflow_txn.errors import InvalidArgumentError

ENV_CONNECT_TIMEOUT = environment.CONNECT_TIMEOUT
DEFAULT_CONNECT_TIMEOUT = 20.0
"""Seconds a server that does not answer (catalog, object store, Spark Connect) is waited for, retries
included, before the call fails with a typed error naming its address (the ZooKeeper oracle has its own
`timeout`, docs/ORACLES.md)."""
MAX_CONNECT_TIMEOUT = 3600.0


def connect_timeout_seconds(value: float | str | None = None, source: str = "connect_timeout") -> float:
    """The bound on waiting for an unreachable server: `value` when given, else $AIRFLOW_TXN_CONNECT_TIMEOUT,
    else DEFAULT_CONNECT_TIMEOUT. InvalidArgumentError (naming `source`) unless 0 < seconds <= 3600."""
    if value is None or value == "":
        value, source = environment.given(ENV_CONNECT_TIMEOUT), f"${ENV_CONNECT_TIMEOUT}"
    if value is None:
        return DEFAULT_CONNECT_TIMEOUT
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_CONNECT_TIMEOUT):
        raise InvalidArgumentError(f"{source} must be a number of seconds > 0 and <= {MAX_CONNECT_TIMEOUT:g}, "
                                   f"got {value!r}")
    return seconds
