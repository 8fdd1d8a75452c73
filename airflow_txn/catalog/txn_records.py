"""Transaction rows in the catalog: the state machine active -> committed | rolled_back, leases, failure.

Every change of state is a compare-and-swap on the expected state checked by rowcount, so a commit
and a rollback (say, by recovery after a lease expired) can never both win. With an external commit
log (ZooKeeper) a transaction passes through `committing` (active -> committing -> committed |
rolled_back): from then on the log's per-transaction decision, not the catalog, says who won.
Lease deadlines are set and judged by the catalog's clock (catalog/clock.py), never by this machine's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Float,
    Select,
    String,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.sql.elements import ColumnElement

from airflow_txn.catalog import Catalog, schema
from airflow_txn.catalog.clock import catalog_now, wall_time
from airflow_txn.catalog.txn_states import ACTIVE as ACTIVE
from airflow_txn.catalog.txn_states import COMMITTED as COMMITTED
from airflow_txn.catalog.txn_states import COMMITTING as COMMITTING
from airflow_txn.catalog.txn_states import ENDED_STATES as ENDED_STATES
from airflow_txn.catalog.txn_states import OPEN_STATES as OPEN_STATES
from airflow_txn.catalog.txn_states import ROLLED_BACK as ROLLED_BACK
from airflow_txn.errors import LeaseExpiredError, TransactionClosedError, TransactionNotFoundError
from airflow_txn.model.results import IsolationName, JsonObject, TransactionRecord, TransactionState

PUBLIC_STATES: dict[str, TransactionState] = {ACTIVE: "active", COMMITTING: "active", COMMITTED: "committed",
                                              ROLLED_BACK: "rolled_back"}
"""The state a caller sees for each state of the row (committing: not committed until the record exists)."""

_t = schema.transactions.c

# The statements of the hot path (begin, every staging call, commit), built once with bound values:
# building one per call cost more than running it (docs/BENCHMARKS.md, B1).
_INSERT = insert(schema.transactions).values(lease_deadline=catalog_now() + bindparam("b_lease", type_=Float()))
_FETCH = (select(schema.transactions, catalog_now().label("catalog_now"))
          .where(_t.tid == bindparam("b_tid", type_=String())))
_FETCH_LOCKED = _FETCH.with_for_update()
_RENEW_USABLE = (
    update(schema.transactions)
    .where(_t.tid == bindparam("b_tid", type_=String()), _t.state == ACTIVE, _t.failed_reason.is_(None),
           _t.lease_deadline >= catalog_now())
    .values(lease_deadline=catalog_now() + _t.lease_seconds)
)
_RENEW = (
    update(schema.transactions)
    .where(_t.tid == bindparam("b_tid", type_=String()), _t.state == ACTIVE, _t.lease_deadline >= catalog_now())
    .values(lease_deadline=catalog_now() + bindparam("b_lease", type_=Float()))
)
_CAS_STATE = (
    update(schema.transactions)
    .where(_t.tid == bindparam("b_tid", type_=String()), _t.state == bindparam("b_from", type_=String()))
    .values(state=bindparam("b_state", type_=String()), ended_at=bindparam("b_ended", type_=Float()))
)
_CAS_STATE_CSN = _CAS_STATE.values(commit_csn=bindparam("b_csn"))


@dataclass(frozen=True, slots=True)
class TxnRow:
    tid: str
    label: str | None
    state: str
    isolation: str
    snapshot_csn: int
    commit_csn: int | None
    lease_seconds: float
    lease_deadline: float
    created_at: float
    ended_at: float | None
    failed_reason: str | None
    cleanup_done: bool
    catalog_now: float | None = None  # the catalog's clock when the row was read (None: not read with it)
    metadata_json: str | None = None  # the caller's metadata as stored (parsed only when shown)

    @property
    def metadata(self) -> JsonObject:
        """The caller's metadata ({} when none was recorded)."""
        return parse_metadata(self.metadata_json)

    def as_dict(self) -> TransactionRecord:
        """Public view: `committing` shows as state `active` (not committed until the record exists)
        with `commit_in_progress` true."""
        return TransactionRecord(
            tid=self.tid, label=self.label, state=PUBLIC_STATES[self.state],
            isolation=cast(IsolationName, self.isolation),  # the column holds Isolation values only
            snapshot_csn=self.snapshot_csn, commit_csn=self.commit_csn, lease_seconds=self.lease_seconds,
            lease_deadline=self.lease_deadline, created_at=self.created_at, ended_at=self.ended_at,
            failed_reason=self.failed_reason, cleanup_done=self.cleanup_done,
            commit_in_progress=self.state == COMMITTING, metadata=self.metadata,
        )

    def lease_expired(self, now: float | None = None) -> bool:
        """Whether the lease ran out, by the catalog's clock as read with the row (else `now`, else this
        machine's clock)."""
        at = now if now is not None else self.catalog_now if self.catalog_now is not None else time.time()
        return self.lease_deadline < at


PRIVATE_KEY = "_airflow_txn"
"""The metadata key under which airflow_txn keeps values for itself ({name: text}: the transaction's Spark
Connect session ids): never shown (parse_metadata leaves it out), never set by a caller's metadata."""


def parse_metadata(stored: str | None) -> JsonObject:
    """A transaction's metadata as shown ({} for NULL): without PRIVATE_KEY."""
    shown = stored_metadata(stored)
    shown.pop(PRIVATE_KEY, None)
    return shown


def stored_metadata(stored: str | None) -> JsonObject:
    """A transaction's metadata as stored in metadata_json, PRIVATE_KEY included ({} for NULL)."""
    return dict(json.loads(stored)) if stored else {}


def claim_private(conn: Connection, tid: str, name: str, value: str, replacing: str | None = None) -> str:
    """First writer wins: keep `value` as the transaction's private value `name` unless it holds one already
    (other than `replacing`: a value found stale, replaced only if no one replaced it meanwhile); return the
    value kept. The caller locked the row (lock_usable), so two callers at once agree on one value."""
    stored = stored_metadata(fetch(conn, tid).metadata_json)
    private = stored.get(PRIVATE_KEY)
    kept = dict(private) if isinstance(private, dict) else {}
    current = kept.get(name)
    if isinstance(current, str) and current != replacing:
        return current
    kept[name] = value
    stored[PRIVATE_KEY] = kept
    set_metadata(conn, tid, json.dumps(stored, sort_keys=True, allow_nan=False, separators=(",", ":")))
    return value


def insert_row(conn: Connection, tid: str, label: str | None, isolation: str, snapshot: int,
               lease_seconds: float, metadata_json: str | None = None) -> None:
    conn.execute(_INSERT, {
        "tid": tid, "label": label, "state": ACTIVE, "isolation": isolation, "snapshot_csn": snapshot,
        "lease_seconds": lease_seconds, "b_lease": lease_seconds, "created_at": wall_time(),
        "commit_csn": None, "ended_at": None, "failed_reason": None, "cleanup_done": False,
        "metadata_json": metadata_json,
    })


def set_metadata(conn: Connection, tid: str, metadata_json: str) -> None:
    """Store the transaction's metadata (the caller checked and locked the row: Transaction.annotate)."""
    conn.execute(update(schema.transactions).where(_t.tid == tid).values(metadata_json=metadata_json))


def _from_row(row: Any) -> TxnRow:
    return TxnRow(
        tid=row.tid, label=row.label, state=row.state, isolation=row.isolation,
        snapshot_csn=int(row.snapshot_csn), commit_csn=None if row.commit_csn is None else int(row.commit_csn),
        lease_seconds=float(row.lease_seconds), lease_deadline=float(row.lease_deadline),
        created_at=float(row.created_at), ended_at=row.ended_at, failed_reason=row.failed_reason,
        cleanup_done=bool(row.cleanup_done), catalog_now=row._mapping.get("catalog_now"),
        metadata_json=row.metadata_json,
    )


def fetch(conn: Connection, tid: str, catalog: Catalog | None = None) -> TxnRow:
    """The row of `tid` (locked FOR UPDATE when a catalog is given); TransactionNotFoundError if absent."""
    locked = catalog is not None and catalog.supports_for_update
    row = conn.execute(_FETCH_LOCKED if locked else _FETCH, {"b_tid": tid}).first()
    if row is None:
        raise TransactionNotFoundError(f"no transaction {tid} in this warehouse")
    return _from_row(row)


def require_usable(row: TxnRow, now: float | None = None) -> None:
    """Raise unless the transaction may run a statement: active, no failed statement, lease valid."""
    if row.state == COMMITTING:
        raise TransactionClosedError(
            f"transaction {row.tid} is being committed: call commit() again to finish it, or rollback()"
        )
    if row.state != ACTIVE:
        raise TransactionClosedError(f"transaction {row.tid} is {row.state}: start a new transaction")
    if row.failed_reason is not None:
        raise TransactionClosedError(
            f"transaction {row.tid} failed a statement ({row.failed_reason}): only rollback() is allowed"
        )
    if row.lease_expired(now):
        raise LeaseExpiredError(
            f"the lease of transaction {row.tid} expired at {row.lease_deadline:.0f}: it is being rolled back"
        )


def lock_usable(conn: Connection, catalog: Catalog, tid: str) -> None:
    """Lock the row, check it is usable, and renew its lease (a statement is a heartbeat).

    The usual case is one statement: an UPDATE that renews only a usable row (active, no failed
    statement, lease valid; the UPDATE locks the row as FOR UPDATE would). When it matches nothing
    the row is read to raise the error saying why."""
    result = conn.execute(_RENEW_USABLE, {"b_tid": tid})
    if result.rowcount == 1:
        return
    row = fetch(conn, tid, catalog)
    require_usable(row)
    renew(conn, tid, row.lease_seconds)


def renew(conn: Connection, tid: str, lease_seconds: float) -> bool:
    """Extend the lease of an active transaction whose lease has not run out (an expired lease is final)."""
    return conn.execute(_RENEW, {"b_tid": tid, "b_lease": lease_seconds}).rowcount == 1


def mark_failed(conn: Connection, tid: str, reason: str) -> None:
    conn.execute(
        update(schema.transactions)
        .where(_t.tid == tid, _t.state == ACTIVE, _t.failed_reason.is_(None))
        .values(failed_reason=reason[:2000])
    )


def cas_state(conn: Connection, tid: str, new_state: str, from_state: str = ACTIVE, **values: Any) -> bool:
    """from_state (default active) -> new_state; False when the transaction was no longer in from_state."""
    if not values or set(values) == {"commit_csn"}:  # the usual cases: a statement built once
        params = {"b_tid": tid, "b_from": from_state, "b_state": new_state, "b_ended": wall_time()}
        if values:
            params["b_csn"] = values["commit_csn"]
        return conn.execute(_CAS_STATE_CSN if values else _CAS_STATE, params).rowcount == 1
    result = conn.execute(
        update(schema.transactions)
        .where(_t.tid == tid, _t.state == from_state)
        .values(state=new_state, ended_at=wall_time(), **values)
    )
    return result.rowcount == 1


def set_cleanup_done(conn: Connection, tid: str) -> None:
    conn.execute(update(schema.transactions).where(_t.tid == tid).values(cleanup_done=True))


def expired_active(conn: Connection) -> list[str]:
    """Open transactions (active, or committing with an external log) whose lease ran out (catalog's clock)."""
    stmt = select(_t.tid).where(_t.state.in_(OPEN_STATES), _t.lease_deadline < catalog_now())
    return [str(r.tid) for r in conn.execute(stmt)]


def unfinished_rollbacks(conn: Connection) -> list[str]:
    stmt = select(_t.tid).where(_t.state == ROLLED_BACK, _t.cleanup_done.is_(False))
    return [str(r.tid) for r in conn.execute(stmt)]


def oldest_active_snapshot(conn: Connection) -> int | None:
    value = conn.execute(select(func.min(_t.snapshot_csn)).where(_t.state.in_(OPEN_STATES))).scalar()
    return None if value is None else int(value)


def oldest_open_created_at(conn: Connection) -> float | None:
    """When the oldest open transaction began (this machine's clock, as `created_at`), None if none is open."""
    value = conn.execute(select(func.min(_t.created_at)).where(_t.state.in_(OPEN_STATES))).scalar()
    return None if value is None else float(value)


def state_and_expiry(conn: Connection, tid: str) -> tuple[str, bool] | None:
    """(state, whether its lease ran out by the catalog's clock) of `tid`; None when it has no row."""
    row = conn.execute(
        select(_t.state, (_t.lease_deadline < catalog_now()).label("expired")).where(_t.tid == tid)
    ).first()
    return None if row is None else (str(row.state), bool(row.expired))


def count_expired(conn: Connection, now: float | None = None) -> int:
    """How many open transactions' leases ran out by `now` (None: the catalog's clock)."""
    at = catalog_now() if now is None else now
    return int(conn.execute(
        select(func.count()).where(_t.state.in_(OPEN_STATES), _t.lease_deadline < at)
    ).scalar_one())


def count_unfinished_rollbacks(conn: Connection) -> int:
    """How many rolled-back transactions still have rollback stamps to finish."""
    return int(conn.execute(
        select(func.count()).where(_t.state == ROLLED_BACK, _t.cleanup_done.is_(False))
    ).scalar_one())


def list_rows(conn: Connection, state: str | None = None, limit: int = 100,
              labels: LabelFilter | None = None) -> list[TxnRow]:
    """The newest transactions first, of one state and kept by `labels`, filtered before the limit."""
    stmt = select(schema.transactions)
    if state is not None:
        stmt = stmt.where(_t.state.in_(OPEN_STATES) if state == ACTIVE else _t.state == state)
    if labels is not None:
        stmt = stmt.where(labels.clause(conn))
    return [_from_row(r) for r in conn.execute(stmt.order_by(_t.created_at.desc()).limit(limit))]


def tids_starting(conn: Connection, prefix: str, limit: int) -> list[str]:
    """Up to `limit` tids that begin with `prefix`, in order (a short tid's candidates)."""
    stmt = select(_t.tid).where(_t.tid.startswith(prefix, autoescape=True)).order_by(_t.tid).limit(limit)
    return [str(r.tid) for r in conn.execute(stmt)]


# -- listing by the DAG a label names --------------------------------------------------------------------
def _label_parts(conn: Connection) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """SQL for (DAG, run) of a label `<dag>/<run>`: what precedes and follows its first '/', both NULL
    for a label with no '/', an empty DAG or an empty run (as the plugin page reads labels)."""
    find = func.strpos if conn.dialect.name == "postgresql" else func.instr
    slash = find(_t.label, "/")
    named = and_(slash > 1, func.length(_t.label) > slash)
    return (case((named, func.substr(_t.label, 1, slash - 1)), else_=None),
            case((named, func.substr(_t.label, slash + 1)), else_=None))


@dataclass(frozen=True)
class LabelFilter:
    """Which transactions a listing keeps, by the DAG and run their label names (`<dag_id>/<run_id>`),
    applied in SQL before the listing's limit."""

    dags: frozenset[str] | None = None  # labels naming one of these DAGs (None: any DAG)
    no_dag: bool = True  # also labels naming no DAG (None, no '/')
    run_id: str | None = None  # only labels `<dag>/<run_id>` (then never a label naming no DAG)
    tids: frozenset[str] = field(default_factory=frozenset)  # kept whatever their label

    def clause(self, conn: Connection) -> ColumnElement[bool]:
        dag, run = _label_parts(conn)
        by_dag = dag.in_(sorted(self.dags)) if self.dags is not None else dag.is_not(None)
        kept = [and_(by_dag, run == self.run_id) if self.run_id is not None else by_dag]
        if self.no_dag and self.run_id is None:
            kept.append(dag.is_(None))
        if self.tids:
            kept.append(_t.tid.in_(sorted(self.tids)))
        return or_(*kept)


def label_dags(conn: Connection) -> list[str | None]:
    """The distinct DAGs the transactions' labels name (None: some label names none)."""
    dag, _run = _label_parts(conn)
    return [r[0] for r in conn.execute(select(dag).distinct())]


# -- history vacuum may purge (vacuum.py) -------------------------------------------------------------
_p = schema.parts.c
_rs = schema.read_set.c


def purgeable(keep_csn: int, ended_before: float) -> Select[Any]:
    """Rows of transactions that ended before `ended_before` (a rollback with its stamps done) whose commit,
    if any, is below `keep_csn`, with no part row and no read-set row left: no snapshot, recovery or
    retry needs them any more."""
    return select(_t.tid).where(
        _t.state.in_(ENDED_STATES),
        or_(_t.state == COMMITTED, _t.cleanup_done.is_(True)),
        _t.ended_at < ended_before,
        or_(_t.commit_csn.is_(None), _t.commit_csn < keep_csn),
        ~exists(select(_p.id).where(_p.creation_tid == _t.tid)),
        ~exists(select(_p.id).where(_p.removal_tid == _t.tid)),
        ~exists(select(_rs.tid).where(_rs.tid == _t.tid)),
    )


def purge(conn: Connection, tids: list[str]) -> int:
    return int(conn.execute(delete(schema.transactions).where(and_(_t.tid.in_(tids), _t.state.in_(ENDED_STATES))))
               .rowcount)
