"""The ZooKeeper log's segments: creating the layout, which segments exist, which one is open, sealing it.

CSNs and the 32-bit sequence: a segment holds at most `segment_size` records (plus the few racing
commits that land while it is being sealed), far below 2^31; when a commit lands in the last slot
the segment is sealed (its data set with version 0, so later appends fail their check and move on)
and the next segment starts at base + last seq + 1. CSNs are therefore dense (2, 3, 4, ...) and
64-bit, whatever the sequence counters do.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from airflow_txn.errors import TxnError
from airflow_txn.oracle.zookeeper.layout import META_KEY, SEGMENT_PREFIX, Layout, Segment, record_seq
from airflow_txn.oracle.zookeeper.session import ZooKeeperSession
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)


class Segments:
    """The segments of one log; sealed ones are cached (they never change), the open one too (every
    append checks it is still open)."""

    def __init__(self, session: ZooKeeperSession, layout: Layout) -> None:
        self.session = session
        self.layout = layout
        self._lock = threading.RLock()
        self._open: Segment | None = None
        self._sealed: dict[int, Segment] = {}
        self.seals = 0
        """How many segments this process sealed (compaction has work when it grew)."""

    def ensure_layout(self, warehouse_id: str, first_base: Callable[[], int]) -> None:
        """Create the nodes that must exist (idempotent) and refuse a chroot of another warehouse."""
        def attempt(client: Any) -> None:
            for node in self.layout.parents:
                self.session.wait(client.ensure_path_async(node))
            self.session.create_quietly(client, self.layout.head, b"")
            self._check_owner(client, warehouse_id)
            if not self.session.wait(client.get_children_async(self.layout.log)):
                first = Segment(0, first_base(), False)
                self.session.create_quietly(client, self.layout.segment(first), first.encode())

        self.session.run("initialise the log", attempt)

    def _check_owner(self, client: Any, mine: str) -> None:
        self.session.create_quietly(client, self.layout.meta, json.dumps({META_KEY: mine}).encode())
        data, _ = self.session.wait(client.get_async(self.layout.meta))
        theirs = json.loads(data.decode() or "{}").get(META_KEY)
        if theirs != mine:
            raise TxnError(
                f"the ZooKeeper path {self.layout.chroot} holds the commit log of another warehouse ({theirs}); "
                f"this catalog is {mine}: give every warehouse its own chroot"
            )

    def all(self, client: Any) -> list[Segment]:
        """Every segment, oldest first (sealed ones from the cache)."""
        names = sorted(n for n in self.session.wait(client.get_children_async(self.layout.log))
                       if n.startswith(SEGMENT_PREFIX))
        out = []
        for name in names:
            index = Segment.index_of(name)
            cached = self._sealed.get(index)
            if cached is not None:
                out.append(cached)
                continue
            try:
                data, _ = self.session.wait(client.get_async(self.layout.path("log", name)))
            except NoNodeError:  # compacted meanwhile
                continue
            out.append(self._remember(Segment.decode(index, data)))
        return out

    def _remember(self, segment: Segment) -> Segment:
        if segment.sealed:
            self._sealed[segment.index] = segment
        return segment

    def forget(self, segment: Segment) -> None:
        """`segment` was removed (compaction)."""
        self._sealed.pop(segment.index, None)

    def open_segment(self, client: Any) -> Segment:
        """The open segment, from the cache when known."""
        with self._lock:
            cached = self._open
        return cached if cached is not None else self.read_open(client)[0]

    def moved(self) -> None:
        """An append found the cached open segment sealed or gone: read it again next time."""
        with self._lock:
            self._open = None

    def read_open(self, client: Any) -> tuple[Segment, int]:
        """The open segment read now, and its child counter (cversion): the next record's sequence number."""
        with self._lock:
            cached = self._open
        segment = cached or self.all(client)[-1]
        for _ in range(100):  # each step moves to a newer segment; a bound against a corrupt layout
            try:
                data, stat = self.session.wait(client.get_async(self.layout.segment(segment)))
            except NoNodeError:
                segment = self.all(client)[-1]
                continue
            segment = self._remember(Segment.decode(segment.index, data))
            if not segment.sealed:
                with self._lock:
                    self._open = segment
                return segment, int(stat.cversion)
            segment = self._finish_seal(client, segment)
        raise TxnError(f"the ZooKeeper log under {self.layout.chroot} has no open segment")

    def _finish_seal(self, client: Any, sealed: Segment) -> Segment:
        """Create the successor of a sealed segment (idempotent: every caller computes the same base)."""
        children = self.session.wait(client.get_children_async(self.layout.segment(sealed)))
        last_seq = max((record_seq(c) for c in children), default=-1)
        successor = Segment(sealed.index + 1, sealed.base + last_seq + 1, False)
        self.session.create_quietly(client, self.layout.segment(successor), successor.encode())
        return successor

    def seal(self, segment: Segment) -> None:
        """Stop appends to `segment` (set its data at version 0) and open the next one."""
        def attempt(client: Any) -> None:
            sealed = Segment(segment.index, segment.base, True)
            with contextlib.suppress(BadVersionError):  # sealed by someone else
                self.session.wait(client.set_async(self.layout.segment(segment), sealed.encode(), 0))
            self._finish_seal(client, sealed)

        self.session.run("seal a log segment", attempt)
        self.seals += 1
        self.moved()

    def seal_quietly(self, segment: Segment) -> None:
        try:
            self.seal(segment)
        except TxnError as exc:  # the next committer past the boundary seals it
            log.warning("could not seal log segment %s: %s", segment.name, exc)

    def reset_lock(self) -> None:
        """In a forked child: a parent's thread may have held the lock."""
        self._lock = threading.RLock()
