"""The ZooKeeper CSN oracle (kazoo): the commit log as sequential znodes, the record holds the tid (docs/DESIGN.md, D4).

`ZooKeeperOracle` is the facade the engine uses (CsnOracle + ExternalLog); each job is a recipe-sized module
of this package (its map is the package's docstring), wired together here. This module sits on top: it
imports the recipes, none of them imports it back (a recipe calls back through the callables it is given).
"""
from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection

from airflow_txn.catalog import Catalog, commit_log, counters, meta_records
from airflow_txn.oracle.base import CsnOracle, ExternalLog, LogEntry, LogRecord, TagClaim
from airflow_txn.oracle.zookeeper.compaction import ABORT_DECISION_TTL, Compactor
from airflow_txn.oracle.zookeeper.decisions import Decisions
from airflow_txn.oracle.zookeeper.group import GroupCommitter
from airflow_txn.oracle.zookeeper.layout import Layout
from airflow_txn.oracle.zookeeper.records import RecordReader
from airflow_txn.oracle.zookeeper.segments import Segments
from airflow_txn.oracle.zookeeper.session import ZooKeeperSession
from airflow_txn.oracle.zookeeper.spec import NAME, ZooKeeperSpec

__all__ = ["ABORT_DECISION_TTL", "ZooKeeperOracle"]


class ZooKeeperOracle(CsnOracle, ExternalLog):
    """CSNs from sequential znodes; see the parts' modules for the protocol."""

    name = NAME

    def __init__(self, spec: ZooKeeperSpec, catalog: Catalog) -> None:
        self.spec = spec
        self.catalog = catalog
        layout = Layout(spec.chroot)
        self.session = ZooKeeperSession(spec, on_connect=self._on_connect)
        self.segments = Segments(self.session, layout)
        self.reader = RecordReader(self.session, layout, self.segments)
        self.decisions = Decisions(self.session, layout, self.segments, self.reader, spec.segment_size)
        self.compactor = Compactor(self.session, layout, self.segments, self.reader)
        self.group = GroupCommitter(self.decisions.append_batch, spec.max_batch) if spec.group_commit else None
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forget_in_child(ref))

    def __repr__(self) -> str:
        return f"ZooKeeperOracle({self.spec.url!r})"

    @property
    def _client(self) -> Any:
        """The session's live kazoo client, or None (tests expire its session)."""
        return self.session.client

    # -- CsnOracle: CSNs are allocated by append(), the catalog holds the mirrored prefix ----------------
    @property
    def external_log(self) -> ExternalLog:
        return self

    def last_csn(self, conn: Connection) -> int:
        """The mirrored prefix (the catalog's last_csn counter): readers never need ZooKeeper."""
        return counters.last_csn(conn)

    def readable_csn(self, conn: Connection) -> int:
        return commit_log.readable_csn_of_counter(conn)  # the mirrored prefix is the catalog's counter: one statement

    def probe(self) -> str:
        self.check_available()
        return f"zookeeper {self.spec.hosts}{self.spec.chroot}: last logged CSN {self.last_logged_csn()}"

    def close(self) -> None:
        self.session.close()

    # -- ExternalLog ----------------------------------------------------------------------------------
    def check_available(self) -> None:
        self.session.check_available()

    def version(self) -> int:
        return self.decisions.head_version()

    def append(self, entry: LogEntry, expect_version: int | None = None) -> int:
        if self.group is not None and expect_version is None:
            return self.group.submit(entry)
        return self.decisions.append(entry, expect_version)

    def decide_abort(self, tid: str) -> bool:
        return self.decisions.abort(tid)

    def commit_csn(self, tid: str) -> int | None:
        return self.decisions.commit_csn(tid)

    def claim_tag(self, name: str, tid: str | None = None) -> None:
        self.decisions.claim_tag(name, tid, time.time())

    def tag_claim(self, name: str) -> TagClaim | None:
        return self.decisions.tag_claim(name)

    def release_tag(self, name: str) -> None:
        self.decisions.release_tag(name)

    def last_logged_csn(self) -> int:
        return self.reader.last_csn()

    def records(self, after: int, up_to: int | None = None, limit: int = 10_000) -> list[LogRecord]:
        return self.reader.between(after, up_to, limit)

    def compaction_due(self) -> bool:
        return self.compactor.due()

    def compact(self, applied_through: int, tids_between: Callable[[int, int], Sequence[str]],
                is_rolled_back: Callable[[str], bool]) -> int:
        return self.compactor.compact(applied_through, tids_between, is_rolled_back)

    # -- wiring ---------------------------------------------------------------------------------------
    def _on_connect(self) -> None:
        """A new session: the log's nodes exist and belong to this warehouse; the first segment starts
        after the catalog's last CSN (so an SQL history continues)."""
        self.segments.ensure_layout(self._warehouse_id(), first_base=self._catalog_prefix_plus_one)

    def _catalog_prefix_plus_one(self) -> int:
        with self.catalog.read() as conn:
            return self.last_csn(conn) + 1

    def _warehouse_id(self) -> str:
        """This catalog's warehouse id (meta_records.warehouse_id), written to the log's /meta to claim the chroot."""
        with self.catalog.write() as conn:
            return meta_records.warehouse_id(conn)

    def _after_fork(self) -> None:
        self.session.forget()
        self.segments.reset_lock()
        if self.group is not None:
            self.group.reset()


def _forget_in_child(ref: weakref.ReferenceType[ZooKeeperOracle]) -> None:
    """A forked child cannot use the parent's kazoo threads: it connects again on first use."""
    oracle = ref()
    if oracle is not None:
        oracle._after_fork()
