"""Engine metrics: one process-wide sink the core reports to; a no-op unless one is installed.

The core calls `incr`, `timing` and `gauge` with the names below; `set_sink(sink)` installs where they
go (the Airflow layer installs one that forwards to Airflow's stats, hence StatsD or OpenTelemetry,
whatever Airflow's `[metrics]` section configures). A sink that raises never fails the engine.

    airflow_txn.commit.latency_ms   timing  commit() from its start until the commit is applied (ms)
    airflow_txn.rollbacks           counter transactions rolled back (by anyone: caller, task, lease)
    airflow_txn.conflicts           counter serialization errors (write-write conflict, serializable
                                            validation) that doomed a transaction
    airflow_txn.watermark_lag       gauge   committed CSNs not yet readable (last CSN - watermark),
                                            measured after each commit record is applied
    airflow_txn.publish.lag_ms      timing  from a commit to its Iceberg snapshot or Delta version (ms), for
                                            each commit a publishing run published (airflow_txn/publish)
    airflow_txn.publish.failures    counter tables a publishing run could not publish

Tags: `oracle` (the oracle kind's name, oracle/registry.py: "sql" or "zookeeper") on commit latency; `format`
("iceberg", "delta") on the publishing metrics.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

COMMIT_LATENCY = "airflow_txn.commit.latency_ms"
ROLLBACKS = "airflow_txn.rollbacks"
CONFLICTS = "airflow_txn.conflicts"
WATERMARK_LAG = "airflow_txn.watermark_lag"
PUBLISH_LAG = "airflow_txn.publish.lag_ms"
PUBLISH_FAILURES = "airflow_txn.publish.failures"
NAMES = (COMMIT_LATENCY, ROLLBACKS, CONFLICTS, WATERMARK_LAG, PUBLISH_LAG, PUBLISH_FAILURES)

Tags = Mapping[str, str]

_log = logging.getLogger(__name__)


class MetricsSink(Protocol):
    """Where metrics go. Implement the three methods; install with set_sink()."""

    def incr(self, name: str, count: int = 1, tags: Tags | None = None) -> None: ...

    def timing(self, name: str, ms: float, tags: Tags | None = None) -> None: ...

    def gauge(self, name: str, value: float, tags: Tags | None = None) -> None: ...


class NullSink:
    """The default: drops everything."""

    def incr(self, name: str, count: int = 1, tags: Tags | None = None) -> None:
        return None

    def timing(self, name: str, ms: float, tags: Tags | None = None) -> None:
        return None

    def gauge(self, name: str, value: float, tags: Tags | None = None) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Sample:
    kind: str  # "incr" | "timing" | "gauge"
    name: str
    value: float
    tags: dict[str, str]


@dataclass
class RecordingSink:
    """Keeps every sample in memory (tests, scripts, a quick look at what the engine reports)."""

    samples: list[Sample] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _add(self, kind: str, name: str, value: float, tags: Tags | None) -> None:
        with self._lock:
            self.samples.append(Sample(kind, name, float(value), dict(tags or {})))

    def incr(self, name: str, count: int = 1, tags: Tags | None = None) -> None:
        self._add("incr", name, count, tags)

    def timing(self, name: str, ms: float, tags: Tags | None = None) -> None:
        self._add("timing", name, ms, tags)

    def gauge(self, name: str, value: float, tags: Tags | None = None) -> None:
        self._add("gauge", name, value, tags)

    def of(self, name: str) -> list[Sample]:
        """The samples of one metric, oldest first."""
        with self._lock:
            return [s for s in self.samples if s.name == name]

    def total(self, name: str) -> float:
        """The sum of a counter's increments."""
        return sum(s.value for s in self.of(name))


_NULL = NullSink()
_sink: MetricsSink = _NULL


def set_sink(sink: MetricsSink | None) -> MetricsSink:
    """Install `sink` for this process (None: the no-op sink); returns the one it replaces."""
    global _sink
    previous, _sink = _sink, (sink if sink is not None else _NULL)
    return previous


def get_sink() -> MetricsSink:
    return _sink


def enabled() -> bool:
    """False while the no-op sink is installed: callers skip work that only feeds a metric."""
    return _sink is not _NULL


def incr(name: str, count: int = 1, tags: Tags | None = None) -> None:
    try:
        _sink.incr(name, count, tags)
    except Exception:  # metrics must never fail a commit or a rollback
        _log.debug("metrics sink failed on %s", name, exc_info=True)


def timing(name: str, ms: float, tags: Tags | None = None) -> None:
    try:
        _sink.timing(name, ms, tags)
    except Exception:
        _log.debug("metrics sink failed on %s", name, exc_info=True)


def gauge(name: str, value: float, tags: Tags | None = None) -> None:
    try:
        _sink.gauge(name, value, tags)
    except Exception:
        _log.debug("metrics sink failed on %s", name, exc_info=True)


__all__ = [
    "COMMIT_LATENCY",
    "CONFLICTS",
    "NAMES",
    "ROLLBACKS",
    "WATERMARK_LAG",
    "MetricsSink",
    "NullSink",
    "RecordingSink",
    "Sample",
    "enabled",
    "gauge",
    "get_sink",
    "incr",
    "set_sink",
    "timing",
]
