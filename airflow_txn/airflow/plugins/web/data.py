"""What the plugin page shows, computed from a Warehouse: transaction summaries with their DAG run,
one transaction's parts grouped by task and by table, the tables with their readable commit, and the
watermark. Plain dicts of JSON types, each shaped by a TypedDict below (the JSON API's response types,
built on airflow_txn/model/results.py); imports neither FastAPI nor Airflow.

Moments are ISO 8601 in UTC, as `airflow-txn --json` writes them (airflow_txn/model/moments.py:
`2026-11-24T21:10:05.250000Z`), not the engine's epoch seconds.

A transaction's DAG and run come from its label (`<dag_id>/<run_id>`, BeginTransactionOperator's
default) and its DAG(s) also from its parts' staging keys (`<dag_id>/<task_id>/<map_index>`). The
listing keeps the DAGs a permission check allows in the catalog's query, before its limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

from typing_extensions import TypedDict  # pydantic (FastAPI's response types) needs this one before Python 3.12

from airflow_txn.core.adapter import ACTIVE, COMMITTED, ROLLED_BACK, LabelFilter
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import InvalidArgumentError
from airflow_txn.model.csn import ROLLBACK_CSN
from airflow_txn.model.moments import utc
from airflow_txn.model.results import (
    CommitLogEntry,
    IsolationName,
    JsonObject,
    PartInfo,
    TagInfo,
    TransactionInfo,
    TransactionRecord,
    TransactionState,
)

STATES = (ACTIVE, COMMITTED, ROLLED_BACK)
MAX_LIMIT = 1000
_DAG_ID = re.compile(r"^[\w.-]{1,250}$")  # Airflow's key pattern
NO_KEY = "(no key)"

PartStatus = Literal["staged", "committed", "withdrawn", "superseded", "removing", "removed"]


class TaskRef(TypedDict):
    """The task a staging key `<dag_id>/<task_id>/<map_index>` names."""

    dag_id: str
    task_id: str
    map_index: int


class TransactionSummary(TypedDict):
    """A transaction as the listing shows it, with the DAG run its label names."""

    tid: str
    label: str | None
    state: TransactionState
    commit_in_progress: bool
    isolation: IsolationName
    snapshot_csn: int
    commit_csn: int | None
    created_at: str
    """When it began: ISO 8601 in UTC (module docstring), as every moment below."""
    ended_at: str | None
    lease_deadline: str
    failed_reason: str | None
    dag_id: str | None
    run_id: str | None


class PagePart(PartInfo):
    status: PartStatus


class Counts(TypedDict):
    """What a group of parts adds and removes."""

    parts: int
    statuses: dict[str, int]
    """{PartStatus: how many parts}."""
    rows_added: int
    bytes_added: int
    rows_removed: int


class TaskGroup(Counts):
    key: str
    task: TaskRef | None
    attempts: list[int]
    tables: list[str]


class TableGroup(Counts):
    table: str
    tasks: list[str]


class PageCheck(TypedDict):
    """One write-audit-publish check's result, as a check task recorded it (airflow_txn.checks)."""

    task: str
    name: str
    value: int | None
    bounds: str
    passed: bool


class TransactionDetail(TransactionSummary):
    """One transaction with every part, grouped by task and by table, and its checks' results."""

    checks: list[PageCheck]
    metadata: JsonObject
    """What the transaction recorded of itself (Warehouse.begin(metadata=), Transaction.annotate: the Airflow
    run, task and try that began and committed it), the checks' reports left out (`checks` shows them)."""
    tables: list[str]
    owner_dags: list[str]
    parts: list[PagePart]
    by_task: list[TaskGroup]
    by_table: list[TableGroup]


class TransactionView(TransactionDetail):
    """TransactionDetail as one user sees it (GET /api/transactions/{tid}, the rollback's answer)."""

    can_roll_back: bool
    """Whether this user may roll it back now."""


class TableRow(TypedDict):
    table: str
    last_commit_csn: int | None
    readable_csn: int
    pending_commit_csn: int | None
    """A newer commit whose record is written but not applied yet."""


class PageCommit(TypedDict):
    """A commit record (CommitLogEntry) with its moment in ISO 8601."""

    csn: int
    tid: str
    tables: list[str]
    committed_at: str
    applied: bool


class PageWatermark(TypedDict):
    readable_csn: int
    latest_commit: PageCommit | None
    unapplied_commits: int | None


class PageTag(TypedDict):
    """A tag (TagInfo) with its moment in ISO 8601: GET /api/tags."""

    name: str
    csn: int
    tables: list[str]
    created_at: str
    note: str | None


class TransactionList(TypedDict):
    """GET /api/transactions."""

    readable_csn: int
    transactions: list[TransactionSummary]


class TableList(TypedDict):
    """GET /api/tables."""

    tables: list[TableRow]


def dag_run_of(label: str | None) -> tuple[str | None, str | None]:
    """(dag_id, run_id) of a label `<dag_id>/<run_id>`; (None, None) for any other label."""
    if not label or "/" not in label:
        return None, None
    dag_id, run_id = label.split("/", 1)
    if not _DAG_ID.match(dag_id) or not run_id:
        return None, None
    return dag_id, run_id


def task_of(key: str | None) -> TaskRef | None:
    """{dag_id, task_id, map_index} of a task's staging key `<dag_id>/<task_id>/<map_index>`, else None."""
    if not key:
        return None
    fields = key.split("/")
    if len(fields) != 3 or not _DAG_ID.match(fields[0]) or not fields[1]:
        return None
    try:
        map_index = int(fields[2])
    except ValueError:
        return None
    return TaskRef(dag_id=fields[0], task_id=fields[1], map_index=map_index)


def summary(row: TransactionRecord) -> TransactionSummary:
    """The listing fields of a transaction (a row of wh.transactions() or wh.transaction_info())."""
    dag_id, run_id = dag_run_of(row["label"])
    return TransactionSummary(
        tid=row["tid"], label=row["label"], state=row["state"], commit_in_progress=row["commit_in_progress"],
        isolation=row["isolation"], snapshot_csn=row["snapshot_csn"], commit_csn=row["commit_csn"],
        created_at=utc(row["created_at"]), ended_at=utc(row["ended_at"]), lease_deadline=utc(row["lease_deadline"]),
        failed_reason=row["failed_reason"], dag_id=dag_id, run_id=run_id)


def part_status(part: PartInfo) -> PartStatus:
    """staged | committed | withdrawn (rolled back, or replaced by a retry) | superseded (overwritten in
    the same transaction) for a part it created; removing | removed for a part it deletes."""
    if part["role"] == "removed":
        return "removing" if part["removal_csn"] is None else "removed"
    creation = part["creation_csn"]
    if creation is None:
        return "staged"
    if creation == ROLLBACK_CSN:
        return "withdrawn"
    return "superseded" if part["removal_csn"] == creation else "committed"


def _task_key(part: PartInfo) -> str:
    key = part.get("removal_key") if part["role"] == "removed" else part.get("key")
    return str(key or part.get("key") or NO_KEY)


def _counts(parts: Iterable[PagePart]) -> Counts:
    parts = list(parts)
    live = [p for p in parts if p["status"] in ("staged", "committed")]
    gone = [p for p in parts if p["status"] in ("removing", "removed")]
    statuses: dict[str, int] = {}
    for p in parts:
        statuses[p["status"]] = statuses.get(p["status"], 0) + 1
    return Counts(parts=len(parts), statuses=statuses, rows_added=sum(int(p["rows"]) for p in live),
                  bytes_added=sum(int(p["bytes"]) for p in live), rows_removed=sum(int(p["rows"]) for p in gone))


def by_task(parts: Sequence[PagePart]) -> list[TaskGroup]:
    """The parts grouped by the staging key of the task that wrote them (created) or removed them."""
    groups: dict[str, list[PagePart]] = {}
    for part in parts:
        groups.setdefault(_task_key(part), []).append(part)
    out = []
    for key in sorted(groups):
        members = groups[key]
        attempts = sorted({int(a) for p in members
                           for a in [p.get("removal_attempt") if p["role"] == "removed" else p.get("attempt")]
                           if a is not None})
        out.append(TaskGroup(key=key, task=task_of(key), attempts=attempts,
                             tables=sorted({p["table"] for p in members}), **_counts(members)))
    return out


def by_table(parts: Sequence[PagePart]) -> list[TableGroup]:
    """The parts grouped by table."""
    groups: dict[str, list[PagePart]] = {}
    for part in parts:
        groups.setdefault(part["table"], []).append(part)
    return [TableGroup(table=table, tasks=sorted({_task_key(p) for p in groups[table]}), **_counts(groups[table]))
            for table in sorted(groups)]


def detail(info: TransactionInfo) -> TransactionDetail:
    """One transaction (wh.transaction_info()) with every part, grouped by task and by table."""
    parts = [PagePart(**p, status=part_status(p)) for p in info["parts"]]
    metadata = {k: v for k, v in info.get("metadata", {}).items() if k != "checks"}
    return TransactionDetail(**summary(info), checks=checks_of(info), metadata=metadata, tables=list(info["tables"]),
                             owner_dags=owner_dags(info),
                             parts=parts, by_task=by_task(parts), by_table=by_table(parts))


def checks_of(info: TransactionInfo) -> list[PageCheck]:
    """The checks' results recorded in the transaction's metadata ({"checks": {task: report}}: the
    CheckReport of each check task), in task order; whatever does not look like a report is skipped."""
    recorded = info.get("metadata", {}).get("checks")
    found = []
    for task, report in sorted(recorded.items()) if isinstance(recorded, dict) else []:
        for result in report.get("checks", []) if isinstance(report, dict) else []:
            if isinstance(result, dict):
                low, high = result.get("min"), result.get("max")
                value = result.get("value")
                found.append(PageCheck(task=str(task), name=str(result.get("name")),
                                       value=value if isinstance(value, int) else None,
                                       bounds=f"{'' if low is None else low}..{'' if high is None else high}",
                                       passed=result.get("passed") is True))
    return found


def owner_dags(info: TransactionInfo) -> list[str]:
    """The DAGs a transaction belongs to: its label's and its staging keys' (empty: no DAG known)."""
    dags = {dag_run_of(info.get("label"))[0]}
    for part in info.get("parts") or []:
        for key in (part.get("key"), part.get("removal_key")):
            task = task_of(key)
            dags.add(task["dag_id"] if task else None)
    return sorted(d for d in dags if d)


def check_filters(state: str | None, limit: int) -> None:
    if state not in (None, "", *STATES):
        raise InvalidArgumentError(f"state must be one of {list(STATES)}, got {state!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")


class DagAccess(Protocol):
    """A user's permission on DAGs (auth.DagPermission)."""

    def on(self, dag_id: str | None) -> bool:
        """On DAG `dag_id` (None: on DAGs in general)."""

    def among(self, dag_ids: Iterable[str]) -> set[str]:
        """Those of `dag_ids` it allows."""


class EveryDag:
    """No permission check (the CLI's and the tests' view)."""

    def on(self, dag_id: str | None) -> bool:
        return True

    def among(self, dag_ids: Iterable[str]) -> set[str]:
        return set(dag_ids)


def label_filter(wh: Warehouse, readable: DagAccess, dag_id: str | None, run_id: str | None,
                 run_tids: Iterable[str] = ()) -> LabelFilter:
    """The transactions of DAGs `readable` allows (of `dag_id` and `run_id` when given; `run_tids`
    are kept as the run's whatever their label), as a filter the catalog applies before the limit.
    A label whose DAG part is no DAG id names no DAG: it needs the permission on DAGs in general."""
    if dag_id:
        allowed = bool(_DAG_ID.match(dag_id)) and readable.on(dag_id)
        return LabelFilter(dags=frozenset({dag_id} if allowed else ()), no_dag=False, run_id=run_id or None,
                           tids=frozenset(run_tids if allowed and run_id else ()))
    named = {d for d in wh.label_dags() if d is not None}
    dag_ids = {d for d in named if _DAG_ID.match(d)}
    general = readable.on(None)
    dags = readable.among(dag_ids) | (named - dag_ids if general else set())
    return LabelFilter(dags=frozenset(dags), no_dag=general, run_id=run_id or None)


def list_transactions(wh: Warehouse, *, state: str | None = None, dag_id: str | None = None,
                      run_id: str | None = None, limit: int = 50, run_tids: Iterable[str] = (),
                      readable: DagAccess | None = None) -> list[TransactionSummary]:
    """The newest transactions first, optionally of one state, DAG or DAG run, of the DAGs `readable`
    allows (None: every DAG; one naming no DAG: `readable.on(None)`), filtered before the limit. `run_tids` are
    the tids the run's begin tasks pushed (found even when the label is not `<dag_id>/<run_id>`)."""
    check_filters(state, limit)
    run_tids = set(run_tids)
    labels = label_filter(wh, readable or EveryDag(), dag_id, run_id, run_tids)
    rows = [summary(r) for r in wh.transactions(state=state or None, limit=limit, labels=labels)]
    for row in rows:
        if row["tid"] in run_tids:
            row["dag_id"], row["run_id"] = dag_id, run_id  # known from the run's XCom
    return rows


def tables(wh: Warehouse, recent_commits: int = 50) -> list[TableRow]:
    """Each table with the CSN of its latest readable commit and, if any, a newer commit whose record
    is written but not applied yet (readable once applied)."""
    readable = wh.readable_csn()
    pending: dict[str, int] = {}
    for record in wh.commit_log(limit=recent_commits):
        if int(record["csn"]) > readable:
            for table in record["tables"]:
                pending[table] = max(pending.get(table, 0), int(record["csn"]))
    return [TableRow(table=name, last_commit_csn=wh.last_commit_csn(name), readable_csn=readable,
                     pending_commit_csn=pending.get(name)) for name in wh.tables()]


def watermark(wh: Warehouse, warehouse_wide: bool = True) -> PageWatermark:
    """The readable watermark and, `warehouse_wide`, the newest commit record (its tid and tables)
    and how many recent records are not applied (else None: they name any DAG's transaction)."""
    readable = wh.readable_csn()
    if not warehouse_wide:
        return PageWatermark(readable_csn=readable, latest_commit=None, unapplied_commits=None)
    log = wh.commit_log(limit=50)
    return PageWatermark(readable_csn=readable, latest_commit=commit(log[0]) if log else None,
                         unapplied_commits=sum(1 for r in log if r["csn"] > readable))


def commit(entry: CommitLogEntry) -> PageCommit:
    return PageCommit(csn=entry["csn"], tid=entry["tid"], tables=list(entry["tables"]),
                      committed_at=utc(entry["committed_at"]), applied=entry["applied"])


def tags(wh: Warehouse) -> list[PageTag]:
    """The tags (named snapshots), the newest CSN first."""
    return [tag(t) for t in wh.tags()]


def tag(info: TagInfo) -> PageTag:
    return PageTag(name=info["name"], csn=info["csn"], tables=list(info["tables"]), created_at=utc(info["created_at"]),
                   note=info["note"])
