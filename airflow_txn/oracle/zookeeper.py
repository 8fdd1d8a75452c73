"""The ZooKeeper CSN oracle (kazoo): the commit log as sequential znodes, the record holds the tid (docs/DESIGN.md, D4).

Layout under the chroot; /log, /decisions, /aborts and /head are created once and never deleted:
  /meta                  {"warehouse_id": ...}: the catalog this log belongs to (checked at connect)
  /head                  its data version grows with every append; serializable commits append only
                         if it did not move since they validated (a versioned set_data in the multi)
  /decisions/<tid>       "commit" | "abort": at most one ever exists per transaction
  /aborts/<tid>          index of the abort decisions, for their clean-up
  /log/seg-<k>           a segment {"base": CSN of its first slot, "sealed": bool}; data version 0 = open
  /log/seg-<k>/r-<seq>   a commit record {"tid", "tables", "at"}; its CSN is base + seq

The commit point is ONE multi-op: check the segment is open (version 0), bump /head, create
/decisions/<tid> = "commit" and the sequential record. A rollback of a transaction that may be
committing creates /decisions/<tid> = "abort" instead; exactly one of the two can succeed.

CSNs and the 32-bit sequence: a segment holds at most `segment_size` records (plus the few racing
commits that land while it is being sealed), far below 2^31; when a commit lands in the last slot
the segment is sealed (its data set with version 0, so later appends fail their check and move on)
and the next segment starts at base + last seq + 1. CSNs are therefore dense (2, 3, 4, ...) and
64-bit, whatever the sequence counters do. Records are never deleted from an open segment (a delete
would advance its counter and leave a gap); compaction removes whole sealed segments once every
record in them is applied in the catalog, the oldest remaining segment's base being the persistent
low-water mark.

Every ZooKeeper call goes through an explicit KazooRetry (connection loss, operation timeout and
session expiry are retried until `timeout`), with asynchronous calls waited on with a timeout:
kazoo's synchronous calls would block while the client is disconnected. Giving up raises
OracleUnavailableError.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry, RetryFailedError
from sqlalchemy import Connection, insert, select
from sqlalchemy.exc import IntegrityError

from airflow_txn import logs
from airflow_txn.catalog import Catalog, schema
from airflow_txn.errors import OracleUnavailableError, TxnError
from airflow_txn.oracle.base import AbortDecidedError, CsnOracle, ExternalLog, LogEntry, LogMovedError, LogRecord
from airflow_txn.oracle.zookeeper_group import GroupCommitter
from airflow_txn.oracle.zookeeper_spec import ZooKeeperSpec

log = logs.get_logger(__name__)
T = TypeVar("T")

COMMIT = b"commit"
ABORT = b"abort"
ABORT_DECISION_TTL = 24 * 3600.0
"""Abort decisions are kept this long after the rollback (a zombie committer's late append must still fail)."""
_SEGMENT = "seg-"
_RECORD = "r-"
_META_KEY = "warehouse_id"
_NOT_THE_CAUSE = (RolledBackError, RuntimeInconsistency)


@dataclass(frozen=True, slots=True)
class Segment:
    index: int
    base: int
    sealed: bool

    @property
    def name(self) -> str:
        return f"{_SEGMENT}{self.index:010d}"


class _SegmentMoved(Exception):
    """The cached open segment was sealed (or removed): refresh it and try again."""


class _DecisionExists(Exception):
    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


class ZooKeeperOracle(CsnOracle, ExternalLog):
    """CSNs from sequential znodes; see the module documentation for the protocol."""

    name = "zookeeper"

    def __init__(self, spec: ZooKeeperSpec, catalog: Catalog) -> None:
        self.spec = spec
        self.catalog = catalog
        self._lock = threading.RLock()
        self._client: Any = None
        self._open: Segment | None = None
        self._sealed: dict[int, Segment] = {}  # sealed segments never change: cache them
        self._compaction_due = False
        self._group = GroupCommitter(self._append_batch, spec.max_batch) if spec.group_commit else None
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forget_client_in_child(ref))

    def __repr__(self) -> str:
        return f"ZooKeeperOracle({self.spec.url!r})"

    @property
    def group(self) -> GroupCommitter | None:
        return self._group

    # -- CsnOracle ------------------------------------------------------------------------------------
    @property
    def external_log(self) -> ExternalLog:
        return self

    def next_csn(self, conn: Connection) -> int:
        raise AssertionError("the ZooKeeper oracle allocates CSNs in append(), never in a catalog transaction")

    def last_csn(self, conn: Connection) -> int:
        """The mirrored prefix (the catalog's last_csn counter): readers never need ZooKeeper."""
        stmt = select(schema.counters.c.value).where(schema.counters.c.name == schema.COUNTER_LAST_CSN)
        return int(conn.execute(stmt).scalar_one())

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            _stop(client)

    # -- paths ----------------------------------------------------------------------------------------
    def _path(self, *parts: str) -> str:
        return "/".join([self.spec.chroot, *parts])

    def _decision(self, tid: str) -> str:
        return self._path("decisions", tid)

    # -- the client, retries and time limits ------------------------------------------------------------
    def _connected_client(self) -> Any:
        with self._lock:
            if self._client is not None:
                return self._client
            client = KazooClient(
                hosts=self.spec.hosts, timeout=self.spec.session_timeout,
                connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
                logger=logging.getLogger("airflow_txn.kazoo"),
            )
            try:
                client.start(timeout=self.spec.timeout)
                self._client = client
                self._init_layout()
            except Exception as exc:
                self._client = None
                _stop(client)
                if isinstance(exc, TxnError):
                    raise
                raise self._unavailable("connect", exc) from exc
            return client

    def _unavailable(self, what: str, exc: BaseException) -> OracleUnavailableError:
        return OracleUnavailableError(
            f"ZooKeeper at {self.spec.hosts} did not answer ({what}) within {self.spec.timeout:g}s: "
            f"{type(exc).__name__}: {exc}; the transaction is not committed unless its record was written "
            "(commit() again resumes safely, recovery settles it once ZooKeeper is back)"
        )

    def _wait(self, async_result: Any) -> Any:
        """The result of one asynchronous call; a timeout becomes a retryable OperationTimeoutError."""
        try:
            return async_result.get(timeout=min(self.spec.timeout, max(1.0, self.spec.session_timeout / 2)))
        except KazooTimeoutError as exc:  # the timeout of kazoo's (default) threading handler
            raise OperationTimeoutError() from exc

    def _retry(self, what: str, attempt: Callable[[Any], T]) -> T:
        """Run `attempt(client)` under an explicit KazooRetry bounded by spec.timeout."""
        client = self._connected_client()
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=self.spec.timeout,
                           ignore_expire=True)
        try:
            result: T = retry(attempt, client)
            return result
        except (RetryFailedError, ConnectionClosedError) as exc:
            raise self._unavailable(what, exc) from exc

    def _create_quietly(self, client: Any, path: str, value: bytes) -> None:
        with contextlib.suppress(NodeExistsError):
            self._wait(client.create_async(path, value))

    def _delete_quietly(self, client: Any, path: str) -> None:
        with contextlib.suppress(NoNodeError):
            self._wait(client.delete_async(path))

    def check_available(self) -> None:
        client = self._connected_client()
        deadline = time.monotonic() + self.spec.timeout
        while not client.connected:
            if time.monotonic() >= deadline:
                raise self._unavailable("connection check", ConnectionError("not connected"))
            time.sleep(0.05)

    # -- layout ---------------------------------------------------------------------------------------
    def _init_layout(self) -> None:
        def attempt(client: Any) -> None:
            for node in ("decisions", "aborts", "log"):
                self._wait(client.ensure_path_async(self._path(node)))
            self._create_quietly(client, self._path("head"), b"")
            self._check_owner(client)
            if not self._wait(client.get_children_async(self._path("log"))):
                base = self._catalog_prefix() + 1
                first = Segment(0, base, False)
                self._create_quietly(client, self._path("log", first.name), _segment_data(first))

        self._retry("initialise the log", attempt)

    def _check_owner(self, client: Any) -> None:
        mine = self._warehouse_id()
        self._create_quietly(client, self._path("meta"), json.dumps({_META_KEY: mine}).encode())
        data, _ = self._wait(client.get_async(self._path("meta")))
        theirs = json.loads(data.decode() or "{}").get(_META_KEY)
        if theirs != mine:
            raise TxnError(
                f"the ZooKeeper path {self.spec.chroot} holds the commit log of another warehouse ({theirs}); "
                f"this catalog is {mine}: give every warehouse its own chroot"
            )

    def _warehouse_id(self) -> str:
        meta = schema.meta.c
        with self.catalog.write() as conn:
            found = conn.execute(select(meta.value).where(meta.key == _META_KEY)).scalar()
            if found is not None:
                return str(found)
            value = uuid.uuid4().hex
            try:
                with conn.begin_nested():
                    conn.execute(insert(schema.meta).values(key=_META_KEY, value=value))
            except IntegrityError:
                return str(conn.execute(select(meta.value).where(meta.key == _META_KEY)).scalar_one())
            return value

    def _catalog_prefix(self) -> int:
        with self.catalog.read() as conn:
            return self.last_csn(conn)

    # -- segments -------------------------------------------------------------------------------------
    def _segments(self, client: Any) -> list[Segment]:
        """Every segment, oldest first (sealed ones from the cache)."""
        names = sorted(n for n in self._wait(client.get_children_async(self._path("log"))) if n.startswith(_SEGMENT))
        out = []
        for name in names:
            index = int(name[len(_SEGMENT):])
            cached = self._sealed.get(index)
            if cached is not None:
                out.append(cached)
                continue
            try:
                data, _ = self._wait(client.get_async(self._path("log", name)))
            except NoNodeError:  # compacted meanwhile
                continue
            out.append(self._remember(_parse_segment(index, data)))
        return out

    def _remember(self, segment: Segment) -> Segment:
        if segment.sealed:
            self._sealed[segment.index] = segment
        return segment

    def _open_segment(self, client: Any) -> Segment:
        """The open segment, from the cache when known (every append checks it is still open)."""
        with self._lock:
            cached = self._open
        return cached if cached is not None else self._read_open_segment(client)[0]

    def _read_open_segment(self, client: Any) -> tuple[Segment, int]:
        """The open segment read now, and its child counter (cversion): the next record's sequence number."""
        with self._lock:
            cached = self._open
        segment = cached or self._segments(client)[-1]
        for _ in range(100):  # each step moves to a newer segment; a bound against a corrupt layout
            try:
                data, stat = self._wait(client.get_async(self._path("log", segment.name)))
            except NoNodeError:
                segment = self._segments(client)[-1]
                continue
            segment = self._remember(_parse_segment(segment.index, data))
            if not segment.sealed:
                with self._lock:
                    self._open = segment
                return segment, int(stat.cversion)
            segment = self._finish_seal(client, segment)
        raise TxnError(f"the ZooKeeper log under {self.spec.chroot} has no open segment")

    def _finish_seal(self, client: Any, sealed: Segment) -> Segment:
        """Create the successor of a sealed segment (idempotent: every caller computes the same base)."""
        children = self._wait(client.get_children_async(self._path("log", sealed.name)))
        last_seq = max((_seq(c) for c in children), default=-1)
        successor = Segment(sealed.index + 1, sealed.base + last_seq + 1, False)
        self._create_quietly(client, self._path("log", successor.name), _segment_data(successor))
        return successor

    def _seal(self, segment: Segment) -> None:
        """Stop appends to `segment` (set its data at version 0) and open the next one."""
        def attempt(client: Any) -> None:
            sealed = Segment(segment.index, segment.base, True)
            with contextlib.suppress(BadVersionError):  # sealed by someone else
                self._wait(client.set_async(self._path("log", segment.name), _segment_data(sealed), 0))
            self._finish_seal(client, sealed)

        self._retry("seal a log segment", attempt)
        self._compaction_due = True
        with self._lock:
            self._open = None

    # -- append: the commit point -----------------------------------------------------------------------
    def version(self) -> int:
        def attempt(client: Any) -> int:
            _, stat = self._wait(client.get_async(self._path("head")))
            return int(stat.version)

        return self._retry("read the log version", attempt)

    def append(self, entry: LogEntry, expect_version: int | None = None) -> int:
        if self._group is not None and expect_version is None:
            return self._group.submit(entry)
        return self._append_alone(entry, expect_version)

    def _append_batch(self, entries: Sequence[LogEntry]) -> list[int | Exception]:
        """Group commit's flush: one multi for all; if one entry is already decided, each on its own."""
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
                out.append(self._append_alone(entry, None))
            except Exception as exc:
                out.append(exc)
        return out

    def _append_alone(self, entry: LogEntry, expect_version: int | None) -> int:
        try:
            return self._append_many([entry], expect_version)[0]
        except _DecisionExists:
            decision = self._read_decision(entry.tid)
            if decision == ABORT:
                raise AbortDecidedError(entry.tid) from None
            csn = self.commit_csn(entry.tid)  # an earlier attempt (lost reply, or another process) won
            if csn is None:
                raise TxnError(f"transaction {entry.tid} has a commit decision but no record in the log") from None
            return csn

    def _append_many(self, entries: Sequence[LogEntry], expect_version: int | None) -> list[int]:
        """ONE multi: segment open? + bump /head + (decision, record) per entry. Returns the CSNs."""
        for _ in range(20):
            try:
                segment, csns = self._retry("write the commit record",
                                            lambda c: self._multi(c, entries, expect_version))
            except _SegmentMoved:
                with self._lock:
                    self._open = None
                continue
            if csns[-1] - segment.base >= self.spec.segment_size - 1:
                self._seal_quietly(segment)
            return csns
        raise OracleUnavailableError(f"the ZooKeeper log under {self.spec.chroot} kept moving to new segments")

    def _multi(self, client: Any, entries: Sequence[LogEntry], expect_version: int | None) -> tuple[Segment, list[int]]:
        segment = self._open_segment(client)
        tx = client.transaction()
        tx.check(self._path("log", segment.name), 0)
        tx.set_data(self._path("head"), b"", -1 if expect_version is None else expect_version)
        for entry in entries:
            tx.create(self._decision(entry.tid), COMMIT)
            tx.create(self._path("log", segment.name, _RECORD), entry.encode(), sequence=True)
        results = self._wait(tx.commit_async())
        failed = [(i, r) for i, r in enumerate(results)
                  if isinstance(r, Exception) and not isinstance(r, _NOT_THE_CAUSE)]
        if not failed:
            return segment, [segment.base + _seq(results[3 + 2 * i]) for i in range(len(entries))]
        position, error = failed[0]
        if position == 0 or (position >= 2 and position % 2 == 1 and isinstance(error, NoNodeError)):
            raise _SegmentMoved()
        if position == 1 and isinstance(error, BadVersionError):
            raise LogMovedError()
        if position >= 2 and isinstance(error, NodeExistsError):
            raise _DecisionExists((position - 2) // 2)
        raise error

    def _seal_quietly(self, segment: Segment) -> None:
        try:
            self._seal(segment)
        except TxnError as exc:  # the next committer past the boundary seals it
            log.warning("could not seal log segment %s: %s", segment.name, exc)

    # -- decisions --------------------------------------------------------------------------------------
    def _read_decision(self, tid: str) -> bytes | None:
        def attempt(client: Any) -> bytes | None:
            try:
                data, _ = self._wait(client.get_async(self._decision(tid)))
            except NoNodeError:
                return None
            return bytes(data)

        return self._retry("read a decision", attempt)

    def decide_abort(self, tid: str) -> bool:
        def attempt(client: Any) -> bool:
            tx = client.transaction()
            tx.create(self._decision(tid), ABORT)
            tx.create(self._path("aborts", tid), b"")
            results = self._wait(tx.commit_async())
            if not any(isinstance(r, Exception) for r in results):
                return True
            try:
                data, _ = self._wait(client.get_async(self._decision(tid)))
            except NoNodeError:  # no decision yet the multi failed: a stale abort index; drop it and retry
                self._delete_quietly(client, self._path("aborts", tid))
                raise OperationTimeoutError() from None
            return bytes(data) == ABORT

        return self._retry("record an abort decision", attempt)

    def commit_csn(self, tid: str) -> int | None:
        if self._read_decision(tid) != COMMIT:
            return None

        def attempt(client: Any) -> int | None:
            for segment in reversed(self._segments(client)):  # newest first: the record is recent
                for name in sorted(self._children(client, segment), key=_seq, reverse=True):
                    entry = self._entry(client, segment, name)
                    if entry is not None and entry.tid == tid:
                        return segment.base + _seq(name)
            return None

        return self._retry("find a commit record", attempt)

    # -- reading the log ----------------------------------------------------------------------------------
    def last_logged_csn(self) -> int:
        def attempt(client: Any) -> int:
            segment, counter = self._read_open_segment(client)
            return segment.base + counter - 1

        return self._retry("read the last CSN", attempt)

    def records(self, after: int, up_to: int | None = None, limit: int = 10_000) -> list[LogRecord]:
        def attempt(client: Any) -> list[LogRecord]:
            segments = self._segments(client)
            out: list[LogRecord] = []
            for current, successor in zip(segments, [*segments[1:], None], strict=True):
                if successor is not None and successor.base - 1 <= after:
                    continue
                if up_to is not None and current.base > up_to:
                    break
                for name in sorted(self._children(client, current), key=_seq):
                    csn = current.base + _seq(name)
                    if csn <= after or (up_to is not None and csn > up_to) or len(out) >= limit:
                        continue
                    entry = self._entry(client, current, name)
                    if entry is not None:
                        out.append(LogRecord(csn, entry))
            return out

        if up_to is None and self.last_logged_csn() <= after:
            return []
        return self._retry("read commit records", attempt)

    def _children(self, client: Any, segment: Segment) -> list[str]:
        try:
            names = self._wait(client.get_children_async(self._path("log", segment.name)))
        except NoNodeError:
            return []
        return [n for n in names if n.startswith(_RECORD)]

    def _entry(self, client: Any, segment: Segment, name: str) -> LogEntry | None:
        try:
            data, _ = self._wait(client.get_async(self._path("log", segment.name, name)))
        except NoNodeError:
            return None
        return LogEntry.decode(data)

    # -- compaction ---------------------------------------------------------------------------------------
    def compaction_due(self) -> bool:
        return self._compaction_due

    def compact(self, applied_through: int, tids_between: Callable[[int, int], Sequence[str]],
                is_rolled_back: Callable[[str], bool]) -> int:
        """Drop sealed segments whose every record is applied (<= applied_through), oldest first, with
        their commit decisions; then abort decisions older than ABORT_DECISION_TTL."""
        self._compaction_due = False

        def attempt(client: Any) -> int:
            removed = 0
            segments = self._segments(client)
            for current, successor in itertools.pairwise(segments):
                if not current.sealed or successor.base - 1 > applied_through:
                    break
                removed += self._drop_segment(client, current, tids_between(current.base, successor.base - 1))
            self._drop_old_aborts(client, is_rolled_back)
            return removed

        return self._retry("compact the log", attempt)

    def _drop_segment(self, client: Any, segment: Segment, tids: Sequence[str]) -> int:
        records = self._children(client, segment)
        paths = [self._decision(t) for t in tids] + [self._path("log", segment.name, r) for r in records]
        for start in range(0, len(paths), 200):
            tx = client.transaction()
            for path in paths[start:start + 200]:
                tx.delete(path)
            results = self._wait(tx.commit_async())
            if any(isinstance(r, Exception) for r in results):  # some already gone: one by one
                for path in paths[start:start + 200]:
                    self._delete_quietly(client, path)
        with contextlib.suppress(NoNodeError, NotEmptyError):
            self._wait(client.delete_async(self._path("log", segment.name)))
        self._sealed.pop(segment.index, None)
        log.info("compacted log segment %s (%d records from CSN %d)", segment.name, len(records), segment.base,
                 extra=logs.fields(csn=segment.base))
        return len(records)

    def _drop_old_aborts(self, client: Any, is_rolled_back: Callable[[str], bool]) -> None:
        cutoff_ms = (time.time() - ABORT_DECISION_TTL) * 1000
        for tid in self._wait(client.get_children_async(self._path("aborts"))):
            stat = self._wait(client.exists_async(self._path("aborts", tid)))
            if stat is not None and stat.ctime < cutoff_ms and is_rolled_back(tid):
                self._delete_quietly(client, self._decision(tid))
                self._delete_quietly(client, self._path("aborts", tid))


# -- helpers --------------------------------------------------------------------------------------------
def _seq(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def _segment_data(segment: Segment) -> bytes:
    return json.dumps({"base": segment.base, "sealed": segment.sealed}).encode()


def _parse_segment(index: int, data: bytes) -> Segment:
    raw = json.loads(data.decode())
    return Segment(index, int(raw["base"]), bool(raw["sealed"]))


def _stop(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception:  # closing a client whose server is gone must not hide the real problem
        log.debug("closing the ZooKeeper client failed", exc_info=True)


def _forget_client_in_child(ref: weakref.ReferenceType[ZooKeeperOracle]) -> None:
    """A forked child cannot use the parent's kazoo threads: it connects again on first use."""
    oracle = ref()
    if oracle is not None:
        oracle._client = None
        oracle._lock = threading.RLock()
        if oracle._group is not None:
            oracle._group.reset()
