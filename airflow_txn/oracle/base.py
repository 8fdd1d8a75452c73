"""What every CSN oracle provides to the commit protocol and to readers, what an external log adds, and
what a kind of oracle provides to configuration (oracle/registry.py lists the kinds)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from airflow_txn.catalog import Catalog, commit_log
from airflow_txn.errors import TxnError


class CsnOracle(ABC):
    """Allocates CSNs at commit and tells the readable watermark (invariant 4)."""

    name: str
    """Its kind's name (OracleKind.name): the spec's scheme, the `oracle` metric tag."""

    def next_csn(self, conn: Connection) -> int:
        """Allocate the next CSN inside the catalog transaction that writes the commit record.

        Holds a lock until that transaction ends, so records appear in CSN order. Only an oracle whose
        record is a catalog row has this; one with an external log allocates in `ExternalLog.append`.
        """
        raise TxnError(f"the {self.name} oracle allocates CSNs in its external commit log, not in a catalog "
                       "transaction: commit through `external_log.append` (commit_external.py)")

    @abstractmethod
    def last_csn(self, conn: Connection) -> int:
        """The largest CSN allocated so far (PREHISTORIC_CSN before any commit).

        With an external log: the largest CSN up to which every record is mirrored into the catalog.
        """

    def readable_csn(self, conn: Connection) -> int:
        """The readable watermark (invariant 4): this oracle's last CSN, below the oldest record not applied yet
        (commit_log.readable_csn, which takes the number: the catalog does not know the oracle)."""
        return commit_log.readable_csn(conn, self.last_csn(conn))

    @property
    def external_log(self) -> ExternalLog | None:
        """The commit log outside the catalog (ZooKeeper), or None when the record is a catalog row."""
        return None

    @abstractmethod
    def probe(self) -> str:
        """Reach the oracle now (`airflow-txn doctor`): one line saying what it found, or TxnError."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (ZooKeeper sessions); the SQL oracle has none of its own."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What the doctor's oracle check found: ok or not, a one-line detail, and what to do if not."""

    ok: bool
    detail: str
    hint: str = ""


class OracleKind(ABC):
    """One kind of oracle as configuration sees it: the scheme of its spec, how the spec is parsed and
    opened, and the doctor's check. Its `name` is also the `name` of the oracles it opens, so the
    `oracle` metric tag and `watermark`'s "oracle" come from here."""

    name: str
    """The spec's scheme (`sql`, `zookeeper://...`); the oracles it opens have the same `name`."""
    form: str
    """How a spec is written, for messages."""
    probe_hint: str
    """What to do when the oracle opens but does not answer."""

    def accepts(self, spec: str) -> bool:
        """Whether `spec` names this kind (its scheme only; `parse` checks the rest)."""
        return spec.startswith(f"{self.name}://")

    @abstractmethod
    def parse(self, spec: str) -> object:
        """The spec's settings; TxnError naming what is wrong."""

    @abstractmethod
    def open(self, spec: str, catalog: Catalog, timeout: float | None = None) -> CsnOracle:
        """The oracle `spec` describes (not connected yet); `timeout` caps how long one call may wait.
        A bad spec raises TxnError, a missing client library OracleUnavailableError saying what to install."""

    def doctor_check(self, spec: str, catalog: Catalog, timeout: float) -> tuple[Diagnosis, CsnOracle | None]:
        """Open and probe within `timeout`; the open oracle comes back for the next checks (close it)."""
        try:
            oracle = self.open(spec, catalog, timeout)
        except TxnError as exc:
            return Diagnosis(False, str(exc), "fix --oracle / AIRFLOW_TXN_ORACLE, or install what it names"), None
        try:
            detail = oracle.probe()
        except TxnError as exc:
            oracle.close()
            return Diagnosis(False, str(exc), self.probe_hint), None
        return Diagnosis(True, detail), oracle


@dataclass(frozen=True, slots=True)
class LogTag:
    """The tag a commit names (`Transaction.commit(tag=)`): its name is claimed in the same multi-op as the
    commit decision, and whoever mirrors the record makes the tag (docs/DESIGN.md D18)."""

    name: str
    note: str | None = None


@dataclass(frozen=True, slots=True)
class LogEntry:
    """What a commit record says: which transaction committed, which tables it wrote, when, and the tag it
    names (holding those tables). The tag is an optional key of the record: decoders before it ignore it. So are
    `table_ids`, the ids of `tables` in their order (a name may be given to another table before the record is
    mirrored: docs/DESIGN.md D27); None in a record written before them."""

    tid: str
    tables: tuple[str, ...]
    committed_at: float
    tag: LogTag | None = None
    table_ids: tuple[int, ...] | None = None

    def encode(self) -> bytes:
        raw: dict[str, object] = {"tid": self.tid, "tables": list(self.tables), "at": self.committed_at}
        if self.tag is not None:
            raw["tag"] = {"name": self.tag.name, "note": self.tag.note}
        if self.table_ids is not None:
            raw["ids"] = list(self.table_ids)
        return json.dumps(raw).encode()

    @classmethod
    def decode(cls, data: bytes) -> LogEntry:
        raw = json.loads(data.decode())
        tag = raw.get("tag")
        named = None if tag is None else LogTag(str(tag["name"]), None if tag.get("note") is None else str(tag["note"]))
        found = raw.get("ids")
        table_ids = None if found is None else tuple(int(i) for i in found)
        return cls(str(raw["tid"]), tuple(str(t) for t in raw["tables"]), float(raw["at"]), named, table_ids)


@dataclass(frozen=True, slots=True)
class TagClaim:
    """A claimed tag name in the log: the commit (`tid`) that named it, or None (`Warehouse.tag`), and when."""

    tid: str | None
    at: float

    def encode(self) -> bytes:
        return json.dumps({"tid": self.tid, "at": self.at}).encode()

    @classmethod
    def decode(cls, data: bytes) -> TagClaim:
        raw = json.loads(data.decode() or "{}")
        return cls(None if raw.get("tid") is None else str(raw["tid"]), float(raw.get("at", 0.0)))


@dataclass(frozen=True, slots=True)
class LogRecord:
    csn: int
    entry: LogEntry


class LogMovedError(Exception):
    """Internal: a record was appended since `version()` was read (serializable commits re-validate)."""


class AbortDecidedError(Exception):
    """Internal: the transaction has an abort decision, so it can never commit."""


class ExternalLog(ABC):
    """A commit log outside the catalog: the append is the commit point, the catalog mirrors it later.

    Per transaction exactly one decision can ever exist, `commit` (written atomically with the record)
    or `abort` (written by a rollback of a transaction that may have been committing).
    """

    @abstractmethod
    def check_available(self) -> None:
        """Raise OracleUnavailableError unless the log can be written right now."""

    @abstractmethod
    def version(self) -> int:
        """A number that changes whenever a record is appended."""

    @abstractmethod
    def append(self, entry: LogEntry, expect_version: int | None = None) -> int:
        """Append the record of `entry` with its commit decision (THE COMMIT POINT); return its CSN.

        Idempotent: if `entry.tid` already has a commit record, its CSN is returned. Raises
        AbortDecidedError if it has an abort decision, LogMovedError if `expect_version` is given and
        the log moved past it, OracleUnavailableError if the outcome cannot be known. With `entry.tag` the
        name is claimed in the same multi-op: TagExistsError when it is claimed already (nothing decided).
        """

    @abstractmethod
    def decide_abort(self, tid: str) -> bool:
        """Record an abort decision for `tid`; True if it is (now or already) aborted, False if committed."""

    @abstractmethod
    def commit_csn(self, tid: str) -> int | None:
        """The CSN of `tid`'s commit record if it has one (a read; decides nothing)."""

    @abstractmethod
    def last_logged_csn(self) -> int:
        """The largest CSN in the log (PREHISTORIC_CSN or the last catalog CSN when it is still empty)."""

    @abstractmethod
    def records(self, after: int, up_to: int | None = None, limit: int = 10_000) -> list[LogRecord]:
        """Records with after < csn <= up_to, in CSN order."""

    @abstractmethod
    def claim_tag(self, name: str, tid: str | None = None) -> None:
        """Claim the tag name `name` (for a commit of `tid`, or None: `Warehouse.tag`); TagExistsError when it is
        claimed already. A commit with a tag claims it in its append instead (the same multi-op)."""

    @abstractmethod
    def tag_claim(self, name: str) -> TagClaim | None:
        """Who claims the tag name `name`, or None when nobody does."""

    @abstractmethod
    def release_tag(self, name: str) -> None:
        """Release the claim on `name` (nothing when there is none)."""

    def compaction_due(self) -> bool:
        """True when compact() has work (e.g. a segment was sealed since the last compaction)."""
        return False

    @abstractmethod
    def compact(self, applied_through: int, tids_between: Callable[[int, int], Sequence[str]],
                is_rolled_back: Callable[[str], bool]) -> int:
        """Remove records (and their decisions) with CSN <= applied_through; return how many went."""
