"""Per-transaction decisions in the ZooKeeper log: the commit (decision + record in ONE multi-op, the
commit point) and the abort; at most one of the two ever exists for a transaction.

The commit point is ONE multi-op: check the segment is open (version 0), bump /head, create
/decisions/<tid> = "commit" and the sequential record. A rollback of a transaction that may be
committing creates /decisions/<tid> = "abort" instead; exactly one of the two can succeed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
)

from airflow_txn.errors import OracleUnavailableError, TxnError
from airflow_txn.oracle.base import AbortDecidedError, LogEntry, LogMovedError
from airflow_txn.oracle.zookeeper_layout import ABORT, COMMIT, Layout, Segment, record_seq
from airflow_txn.oracle.zookeeper_records import RecordReader
from airflow_txn.oracle.zookeeper_segments import Segments
from airflow_txn.oracle.zookeeper_session import ZooKeeperSession

_NOT_THE_CAUSE = (RolledBackError, RuntimeInconsistency)
"""What the other operations of a failed multi report: the failing one is the cause."""


class _SegmentMoved(Exception):
    """The cached open segment was sealed (or removed): refresh it and try again."""


class _DecisionExists(Exception):
    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


class Decisions:
    """Writes and reads the decisions; `append_batch` is group commit's flush."""

    def __init__(self, session: ZooKeeperSession, layout: Layout, segments: Segments, reader: RecordReader,
                 segment_size: int) -> None:
        self.session = session
        self.layout = layout
        self.segments = segments
        self.reader = reader
        self.segment_size = segment_size

    def head_version(self) -> int:
        """/head's data version: it changes whenever a record is appended."""
        def attempt(client: Any) -> int:
            _, stat = self.session.wait(client.get_async(self.layout.head))
            return int(stat.version)

        return self.session.run("read the log version", attempt)

    def append_batch(self, entries: Sequence[LogEntry]) -> list[int | Exception]:
        """One multi for all; if one entry is already decided, each on its own."""
        if len(entries) > 1:
            try:
                return list(self._append_many(entries, None))
            except _DecisionExists:
                pass
            except Exception as exc:
                return [exc] * len(entries)
        out: list[int | Exception] = []
        for entry in entries:
            try:
                out.append(self.append(entry, None))
            except Exception as exc:
                out.append(exc)
        return out

    def append(self, entry: LogEntry, expect_version: int | None) -> int:
        """The commit decision and record of `entry` (idempotent); see ExternalLog.append."""
        try:
            return self._append_many([entry], expect_version)[0]
        except _DecisionExists:
            if self.read(entry.tid) == ABORT:
                raise AbortDecidedError(entry.tid) from None
            csn = self.commit_csn(entry.tid)  # an earlier attempt (lost reply, or another process) won
            if csn is None:
                raise TxnError(f"transaction {entry.tid} has a commit decision but no record in the log") from None
            return csn

    def _append_many(self, entries: Sequence[LogEntry], expect_version: int | None) -> list[int]:
        """ONE multi: segment open? + bump /head + (decision, record) per entry. Returns the CSNs."""
        for _ in range(20):
            try:
                segment, csns = self.session.run("write the commit record",
                                                 lambda c: self._multi(c, entries, expect_version))
            except _SegmentMoved:
                self.segments.moved()
                continue
            if csns[-1] - segment.base >= self.segment_size - 1:
                self.segments.seal_quietly(segment)
            return csns
        raise OracleUnavailableError(f"the ZooKeeper log under {self.layout.chroot} kept moving to new segments")

    def _multi(self, client: Any, entries: Sequence[LogEntry], expect_version: int | None) -> tuple[Segment, list[int]]:
        segment = self.segments.open_segment(client)
        tx = client.transaction()
        tx.check(self.layout.segment(segment), 0)
        tx.set_data(self.layout.head, b"", -1 if expect_version is None else expect_version)
        for entry in entries:
            tx.create(self.layout.decision(entry.tid), COMMIT)
            tx.create(self.layout.record(segment), entry.encode(), sequence=True)
        results = self.session.wait(tx.commit_async())
        failed = [(i, r) for i, r in enumerate(results)
                  if isinstance(r, Exception) and not isinstance(r, _NOT_THE_CAUSE)]
        if not failed:
            return segment, [segment.base + record_seq(results[3 + 2 * i]) for i in range(len(entries))]
        raise _cause(*failed[0])

    def read(self, tid: str) -> bytes | None:
        """`tid`'s decision (COMMIT or ABORT), or None."""
        def attempt(client: Any) -> bytes | None:
            try:
                data, _ = self.session.wait(client.get_async(self.layout.decision(tid)))
            except NoNodeError:
                return None
            return bytes(data)

        return self.session.run("read a decision", attempt)

    def abort(self, tid: str) -> bool:
        """Record an abort decision; True if `tid` is (now or already) aborted, False if committed."""
        def attempt(client: Any) -> bool:
            tx = client.transaction()
            tx.create(self.layout.decision(tid), ABORT)
            tx.create(self.layout.abort_index(tid), b"")
            results = self.session.wait(tx.commit_async())
            if not any(isinstance(r, Exception) for r in results):
                return True
            try:
                data, _ = self.session.wait(client.get_async(self.layout.decision(tid)))
            except NoNodeError:  # no decision yet the multi failed: a stale abort index; drop it and retry
                self.session.delete_quietly(client, self.layout.abort_index(tid))
                raise OperationTimeoutError() from None
            return bytes(data) == ABORT

        return self.session.run("record an abort decision", attempt)

    def commit_csn(self, tid: str) -> int | None:
        """The CSN of `tid`'s record if it has a commit decision (a read; decides nothing)."""
        if self.read(tid) != COMMIT:
            return None
        return self.reader.find(tid)


def _cause(position: int, error: Exception) -> Exception:
    """What a failed multi's first failing operation means (positions: 0 check, 1 head, then pairs)."""
    if position == 0 or (position >= 2 and position % 2 == 1 and isinstance(error, NoNodeError)):
        return _SegmentMoved()
    if position == 1 and isinstance(error, BadVersionError):
        return LogMovedError()
    if position >= 2 and isinstance(error, NodeExistsError):
        return _DecisionExists((position - 2) // 2)
    return error
