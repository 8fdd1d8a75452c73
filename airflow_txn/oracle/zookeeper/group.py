"""Group commit: the concurrent commits of one process share one ZooKeeper round trip.

Leader/follower batching with no added delay: the first committer to find no write in flight becomes
the leader and writes every queued record in one multi-op; committers arriving meanwhile queue up
and the next leader takes them all. Each record still gets its own CSN (consecutive ones, assigned
atomically by the multi), so CSN order stays commit order and the catalog keeps one record per CSN.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_txn.oracle.base import LogEntry

Flush = Callable[[Sequence[LogEntry]], Sequence[int | Exception]]


@dataclass(slots=True)
class _Request:
    entry: LogEntry
    result: int | Exception | None = None
    finished: bool = False


class GroupCommitter:
    """`submit(entry)` -> CSN; batches of at most `max_batch` records go to `flush` one at a time."""

    def __init__(self, flush: Flush, max_batch: int) -> None:
        self._flush = flush
        self._max_batch = max_batch
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._leader = False
        self.batches = 0  # statistics, for the benchmark and tests
        self.records = 0

    def submit(self, entry: LogEntry) -> int:
        request = _Request(entry)
        with self._cond:
            self._queue.append(request)
        while True:
            with self._cond:
                while self._leader and not request.finished:
                    self._cond.wait(timeout=1.0)
                if request.finished:
                    break
                # no leader and our request unfinished: it is still queued, so the batch holds it
                self._leader = True
                batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch:]
            self._write(batch)
        if isinstance(request.result, Exception):
            raise request.result
        assert request.result is not None
        return request.result

    def _write(self, batch: list[_Request]) -> None:
        try:
            results: Sequence[int | Exception] = self._flush([r.entry for r in batch])
        except Exception as exc:
            results = [exc] * len(batch)
        with self._cond:
            for request, result in zip(batch, results, strict=True):
                request.result = result
                request.finished = True
            self._leader = False
            self.batches += 1
            self.records += len(batch)
            self._cond.notify_all()

    def reset(self) -> None:
        """After fork: forget the parent's queue and leader (their threads do not exist here)."""
        self._cond = threading.Condition()
        self._queue = []
        self._leader = False
