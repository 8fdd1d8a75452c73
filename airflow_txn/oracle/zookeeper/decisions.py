"""Per-transaction decisions in the ZooKeeper log: the commit (decision + record in ONE multi-op, the
commit point) and the abort; at most one of the two ever exists for a transaction.

The commit point is ONE multi-op: check the segment is open (version 0), bump /head, create
/decisions/<tid> = "commit" and the sequential record, and, for a commit that names a tag, /tags/<name>:
a name claimed already fails the whole multi-op (TagExistsError, nothing decided). A rollback of a
transaction that may be committing creates /decisions/<tid> = "abort" instead; exactly one of the two
can succeed. `Warehouse.tag` claims /tags/<name> on its own (`claim_tag`), untag releases it.
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

from airflow_txn.errors import OracleUnavailableError, TagExistsError, TxnError
from airflow_txn.oracle.base import AbortDecidedError, LogEntry, LogMovedError, TagClaim
from airflow_txn.oracle.zookeeper.layout import ABORT, COMMIT, Layout, Segment, record_seq
from airflow_txn.oracle.zookeeper.records import RecordReader
from airflow_txn.oracle.zookeeper.segments import Segments
from airflow_txn.oracle.zookeeper.session import ZooKeeperSession

_NOT_THE_CAUSE = (RolledBackError, RuntimeInconsistency)
"""What the other operations of a failed multi report: the failing one is the cause."""


class _SegmentMoved(Exception):
    """The cached open segment was sealed (or removed): refresh it and try again."""


class _DecisionExists(Exception):
    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


class _TagTaken(Exception):
    """Entry `position`'s tag name is claimed already: the multi-op decided nothing."""

    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


def tag_taken(name: str, committing: bool) -> TagExistsError:
    return TagExistsError(f"tag {name!r} exists already (a tag never moves): untag it first or pick another name"
                          + ("; nothing was committed" if committing else ""))


_CHECK, _HEAD, _DECISION, _RECORD, _TAG = "check", "head", "decision", "record", "tag"


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
        """One multi for all; an entry whose tag name is taken fails alone (TagExistsError) and the others go
        in one multi again; if one entry is already decided, each on its own."""
        out: list[int | Exception | None] = [None] * len(entries)
        left = list(range(len(entries)))
        while len(left) > 1:
            try:
                for i, csn in zip(left, self._append_many([entries[i] for i in left], None), strict=True):
                    out[i] = csn
                return _all(out)
            except _TagTaken as taken:
                failed = left.pop(taken.position)
                tag = entries[failed].tag
                out[failed] = tag_taken(tag.name if tag is not None else "?", committing=True)
            except _DecisionExists:
                break
            except Exception as exc:
                return [exc if r is None else r for r in out]
        for i in left:
            try:
                out[i] = self.append(entries[i], None)
            except Exception as exc:
                out[i] = exc
        return _all(out)

    def append(self, entry: LogEntry, expect_version: int | None) -> int:
        """The commit decision and record of `entry` (idempotent); see ExternalLog.append."""
        try:
            return self._append_many([entry], expect_version)[0]
        except _TagTaken:
            assert entry.tag is not None
            raise tag_taken(entry.tag.name, committing=True) from None
        except _DecisionExists:
            if self.read(entry.tid) == ABORT:
                raise AbortDecidedError(entry.tid) from None
            csn = self.commit_csn(entry.tid)  # an earlier attempt (lost reply, or another process) won
            if csn is None:
                raise TxnError(f"transaction {entry.tid} has a commit decision but no record in the log") from None
            return csn

    def _append_many(self, entries: Sequence[LogEntry], expect_version: int | None) -> list[int]:
        """ONE multi: segment open? + bump /head + (decision, record, tag claim?) per entry. Returns the CSNs."""
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
        ops: list[tuple[str, int]] = [(_CHECK, -1), (_HEAD, -1)]
        tx.check(self.layout.segment(segment), 0)
        tx.set_data(self.layout.head, b"", -1 if expect_version is None else expect_version)
        for i, entry in enumerate(entries):
            tx.create(self.layout.decision(entry.tid), COMMIT)
            tx.create(self.layout.record(segment), entry.encode(), sequence=True)
            ops += [(_DECISION, i), (_RECORD, i)]
            if entry.tag is not None:
                tx.create(self.layout.tag(entry.tag.name), TagClaim(entry.tid, entry.committed_at).encode())
                ops.append((_TAG, i))
        results = self.session.wait(tx.commit_async())
        failed = [(ops[i], r) for i, r in enumerate(results)
                  if isinstance(r, Exception) and not isinstance(r, _NOT_THE_CAUSE)]
        if not failed:
            records = [results[i] for i, (kind, _) in enumerate(ops) if kind == _RECORD]
            return segment, [segment.base + record_seq(name) for name in records]
        (kind, position), error = failed[0]
        raise _cause(kind, position, error)

    def claim_tag(self, name: str, tid: str | None, at: float) -> None:
        """Create /tags/<name> (Warehouse.tag, or a commit that wrote nothing); TagExistsError when it exists."""
        def attempt(client: Any) -> None:
            try:
                self.session.wait(client.create_async(self.layout.tag(name), TagClaim(tid, at).encode()))
            except NodeExistsError:
                existing = self._claim(client, name)
                if existing is None or existing != TagClaim(tid, at):  # ours when a lost reply is retried
                    raise tag_taken(name, committing=tid is not None) from None

        self.session.run("claim a tag name", attempt)

    def tag_claim(self, name: str) -> TagClaim | None:
        return self.session.run("read a tag claim", lambda client: self._claim(client, name))

    def _claim(self, client: Any, name: str) -> TagClaim | None:
        try:
            data, _ = self.session.wait(client.get_async(self.layout.tag(name)))
        except NoNodeError:
            return None
        return TagClaim.decode(bytes(data))

    def release_tag(self, name: str) -> None:
        path = self.layout.tag(name)
        self.session.run("release a tag name", lambda client: self.session.delete_quietly(client, path))

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


def _all(results: Sequence[int | Exception | None]) -> list[int | Exception]:
    done = [r for r in results if r is not None]
    assert len(done) == len(results), "an entry of the batch got no result"
    return done


def _cause(kind: str, position: int, error: Exception) -> Exception:
    """What a failed multi's first failing operation (of entry `position`) means."""
    if kind == _CHECK or (kind == _RECORD and isinstance(error, NoNodeError)):
        return _SegmentMoved()
    if kind == _HEAD and isinstance(error, BadVersionError):
        return LogMovedError()
    if kind == _DECISION and isinstance(error, NodeExistsError):
        return _DecisionExists(position)
    if kind == _TAG and isinstance(error, NodeExistsError):
        return _TagTaken(position)
    return error
