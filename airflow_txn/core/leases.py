"""Keeping a transaction's lease alive while long work (a Spark job) runs in this process."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)


class LeaseKeeper:
    """A daemon thread calling `renew()` every `interval` seconds until the block exits.

    `renew` returns False once the transaction is no longer active; the keeper then stops.
    """

    def __init__(self, renew: Callable[[], bool], interval: float, tid: str | None = None) -> None:
        self._renew = renew
        self._tid = tid
        self._interval = max(0.5, interval)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="airflow-txn-lease", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if not self._renew():
                    return
            except Exception:  # keep trying: a passing catalog hiccup must not drop the lease
                log.warning("renewing the transaction lease failed; will retry", exc_info=True,
                            extra=logs.fields(self._tid))

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
