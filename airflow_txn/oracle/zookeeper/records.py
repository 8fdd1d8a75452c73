"""Reading the ZooKeeper log's commit records: the last CSN, a CSN range, the record of one transaction."""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import NoNodeError

from airflow_txn.oracle.base import LogEntry, LogRecord
from airflow_txn.oracle.zookeeper.layout import RECORD_PREFIX, Layout, Segment, record_seq
from airflow_txn.oracle.zookeeper.segments import Segments
from airflow_txn.oracle.zookeeper.session import ZooKeeperSession


class RecordReader:
    """Reads records segment by segment; a record's CSN is its segment's base + its sequence number."""

    def __init__(self, session: ZooKeeperSession, layout: Layout, segments: Segments) -> None:
        self.session = session
        self.layout = layout
        self.segments = segments

    def last_csn(self) -> int:
        def attempt(client: Any) -> int:
            segment, counter = self.segments.read_open(client)
            return segment.base + counter - 1

        return self.session.run("read the last CSN", attempt)

    def between(self, after: int, up_to: int | None = None, limit: int = 10_000) -> list[LogRecord]:
        """Records with after < csn <= up_to, in CSN order, at most `limit`."""
        if up_to is None and self.last_csn() <= after:
            return []
        return self.session.run("read commit records", lambda client: self._between(client, after, up_to, limit))

    def _between(self, client: Any, after: int, up_to: int | None, limit: int) -> list[LogRecord]:
        segments = self.segments.all(client)
        out: list[LogRecord] = []
        for current, successor in zip(segments, [*segments[1:], None], strict=True):
            if successor is not None and successor.base - 1 <= after:
                continue
            if up_to is not None and current.base > up_to:
                break
            for name in sorted(self.names(client, current), key=record_seq):
                csn = current.base + record_seq(name)
                if csn <= after or (up_to is not None and csn > up_to) or len(out) >= limit:
                    continue
                entry = self._entry(client, current, name)
                if entry is not None:
                    out.append(LogRecord(csn, entry))
        return out

    def find(self, tid: str) -> int | None:
        """The CSN of `tid`'s record, searched newest first (the record is recent), or None."""
        def attempt(client: Any) -> int | None:
            for segment in reversed(self.segments.all(client)):
                for name in sorted(self.names(client, segment), key=record_seq, reverse=True):
                    entry = self._entry(client, segment, name)
                    if entry is not None and entry.tid == tid:
                        return segment.base + record_seq(name)
            return None

        return self.session.run("find a commit record", attempt)

    def names(self, client: Any, segment: Segment) -> list[str]:
        """The record nodes of `segment` (none if it was compacted meanwhile)."""
        try:
            names = self.session.wait(client.get_children_async(self.layout.segment(segment)))
        except NoNodeError:
            return []
        return [n for n in names if n.startswith(RECORD_PREFIX)]

    def _entry(self, client: Any, segment: Segment, name: str) -> LogEntry | None:
        try:
            data, _ = self.session.wait(client.get_async(self.layout.record(segment, name)))
        except NoNodeError:
            return None
        return LogEntry.decode(data)
