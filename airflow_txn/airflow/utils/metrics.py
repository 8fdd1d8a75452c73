"""The engine's metrics inside Airflow: a sink forwarding airflow_txn.telemetry.metrics to Airflow's stats.

Airflow's `[metrics]` section decides where they end up (StatsD, Datadog, OpenTelemetry, or nowhere
when none is enabled); the names are those of airflow_txn.telemetry.metrics (`airflow_txn.commit.latency_ms`,
`airflow_txn.rollbacks`, `airflow_txn.conflicts`, `airflow_txn.watermark_lag`), plus Airflow's own
`[metrics] statsd_prefix` when StatsD adds one. TxnHook installs the sink the first time it opens a
warehouse in a process (operators, sensor, trigger, listener), unless `[airflow_txn] metrics` is
False or another sink was installed by hand.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from airflow_txn.airflow.version_compat import airflow_conf, airflow_stats
from airflow_txn.telemetry import metrics

_lock = threading.Lock()
_log = logging.getLogger(__name__)


class AirflowStatsSink:
    """Forwards to Airflow's Stats facade (resolved at each call: Airflow sets its backend up lazily)."""

    def __init__(self, stats: Any = None) -> None:
        self._stats = stats

    @property
    def stats(self) -> Any:
        return self._stats if self._stats is not None else airflow_stats()

    def incr(self, name: str, count: int = 1, tags: metrics.Tags | None = None) -> None:
        self.stats.incr(name, count, tags=dict(tags) if tags else None)

    def timing(self, name: str, ms: float, tags: metrics.Tags | None = None) -> None:
        self.stats.timing(name, ms, tags=dict(tags) if tags else None)

    def gauge(self, name: str, value: float, tags: metrics.Tags | None = None) -> None:
        self.stats.gauge(name, value, tags=dict(tags) if tags else None)


def metrics_enabled() -> bool:
    """`[airflow_txn] metrics` (env AIRFLOW__AIRFLOW_TXN__METRICS), default True."""
    value = str(airflow_conf().get("airflow_txn", "metrics", fallback="True")).strip().lower()
    return value not in ("false", "0", "no", "off")


def install() -> bool:
    """Install AirflowStatsSink for this process unless metrics are off or a sink is installed
    already (by this function before, or by hand); True when the Airflow sink is the one installed."""
    with _lock:
        current = metrics.get_sink()
        if isinstance(current, AirflowStatsSink):
            return True
        try:
            if metrics.enabled() or not metrics_enabled():
                return False
        except Exception:  # metrics never stop a hook from opening the warehouse
            _log.warning("airflow_txn metrics not installed: cannot read [airflow_txn] metrics", exc_info=True)
            return False
        metrics.set_sink(AirflowStatsSink())
        return True


__all__ = ["AirflowStatsSink", "install", "metrics_enabled"]
