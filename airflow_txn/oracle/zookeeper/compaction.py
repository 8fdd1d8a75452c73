"""Compaction of the ZooKeeper log: sealed, applied segments go with their commit decisions, old aborts after a day.

Records are never deleted from an open segment (a delete would advance its counter and leave a gap);
compaction removes whole sealed segments once every record in them is applied in the catalog, the
oldest remaining segment's base being the persistent low-water mark.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.exceptions import NoNodeError, NotEmptyError

from airflow_txn.oracle.zookeeper.layout import Layout, Segment
from airflow_txn.oracle.zookeeper.records import RecordReader
from airflow_txn.oracle.zookeeper.segments import Segments
from airflow_txn.oracle.zookeeper.session import ZooKeeperSession
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)

ABORT_DECISION_TTL = 24 * 3600.0
"""Abort decisions are kept this long after the rollback (a zombie committer's late append must still fail)."""
_DELETES_PER_MULTI = 200


class Compactor:
    """Due when this process sealed a segment since its last compaction."""

    def __init__(self, session: ZooKeeperSession, layout: Layout, segments: Segments, reader: RecordReader) -> None:
        self.session = session
        self.layout = layout
        self.segments = segments
        self.reader = reader
        self._seals_seen = 0

    def due(self) -> bool:
        return self.segments.seals != self._seals_seen

    def compact(self, applied_through: int, tids_between: Callable[[int, int], Sequence[str]],
                is_rolled_back: Callable[[str], bool]) -> int:
        """Drop sealed segments whose every record is applied (<= applied_through), oldest first, with
        their commit decisions; then abort decisions older than ABORT_DECISION_TTL."""
        self._seals_seen = self.segments.seals

        def attempt(client: Any) -> int:
            removed = 0
            for current, successor in itertools.pairwise(self.segments.all(client)):
                if not current.sealed or successor.base - 1 > applied_through:
                    break
                removed += self._drop_segment(client, current, tids_between(current.base, successor.base - 1))
            self._drop_old_aborts(client, is_rolled_back)
            return removed

        return self.session.run("compact the log", attempt)

    def _drop_segment(self, client: Any, segment: Segment, tids: Sequence[str]) -> int:
        records = self.reader.names(client, segment)
        paths = [self.layout.decision(t) for t in tids] + [self.layout.record(segment, r) for r in records]
        for start in range(0, len(paths), _DELETES_PER_MULTI):
            self._delete_all(client, paths[start:start + _DELETES_PER_MULTI])
        with contextlib.suppress(NoNodeError, NotEmptyError):
            self.session.wait(client.delete_async(self.layout.segment(segment)))
        self.segments.forget(segment)
        log.info("compacted log segment %s (%d records from CSN %d)", segment.name, len(records), segment.base,
                 extra=logs.fields(csn=segment.base))
        return len(records)

    def _delete_all(self, client: Any, paths: Sequence[str]) -> None:
        """One multi; if some are already gone, one by one."""
        tx = client.transaction()
        for path in paths:
            tx.delete(path)
        if any(isinstance(r, Exception) for r in self.session.wait(tx.commit_async())):
            for path in paths:
                self.session.delete_quietly(client, path)

    def _drop_old_aborts(self, client: Any, is_rolled_back: Callable[[str], bool]) -> None:
        cutoff_ms = (time.time() - ABORT_DECISION_TTL) * 1000
        for tid in self.session.wait(client.get_children_async(self.layout.aborts)):
            stat = self.session.wait(client.exists_async(self.layout.abort_index(tid)))
            if stat is not None and stat.ctime < cutoff_ms and is_rolled_back(tid):
                self.session.delete_quietly(client, self.layout.decision(tid))
                self.session.delete_quietly(client, self.layout.abort_index(tid))
