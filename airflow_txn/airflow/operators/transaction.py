"""The operators that begin, commit, roll back and judge one warehouse transaction of a DAG run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from airflow_txn.airflow.assets.lineage import LineageMixin, TxnLineage, committed_outputs, described, transaction_reads
from airflow_txn.airflow.assets.tables import (
    asset_partition_keys,
    commit_alias,
    event_extra,
    table_asset,
    table_of,
)
from airflow_txn.airflow.assets.uris import SCHEME
from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, coerce_tag, default_lease_seconds
from airflow_txn.airflow.operators.base import (
    RERUN_HINT,
    TxnBaseOperator,
    airflow_metadata,
    is_last_try,
    is_template,
    require_tid,
    run_ids,
)
from airflow_txn.airflow.plugins.links import TransactionLink
from airflow_txn.airflow.version_compat import (
    AirflowFailException,
    AirflowSkipException,
    Asset,
    AssetAlias,
    Context,
    add_outlet_partitions,
    mapped_group_ids,
)
from airflow_txn.core.adapter import ACTIVE, COMMITTED, ROLLED_BACK, Isolation, check_lease_seconds, masked_url
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import (
    InvalidArgumentError,
    LeaseExpiredError,
    SerializationError,
    TagExistsError,
    TagNotFoundError,
    TransactionClosedError,
    TransactionNotFoundError,
    TxnError,
)
from airflow_txn.model.partitioning import Partition, partition_key
from airflow_txn.model.results import TransactionInfo

ENDED = (COMMITTED, ROLLED_BACK)  # any other state (active, committing) is still open

# Commit errors after which the transaction can only roll back: retrying the commit is pointless.
_FINAL_COMMIT_ERRORS = (SerializationError, LeaseExpiredError, TransactionClosedError)


def isolation_value(value: object) -> str:
    """An isolation argument as the level's name (a rendered template's text too); InvalidArgumentError
    names the levels otherwise."""
    return Isolation.parse(value.strip() if isinstance(value, str) else value, "isolation").value


def lease_value(value: object) -> float | None:
    """A lease_seconds argument as seconds (a rendered template's text too: "7200"); None (or empty
    text) for the configured default. InvalidArgumentError when it is no lease (check_lease_seconds)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError as exc:
            raise InvalidArgumentError(f"lease_seconds must be a number of seconds, got {value!r}") from exc
    return check_lease_seconds(value)


class BeginTransactionOperator(LineageMixin, TxnBaseOperator):
    """Begin a transaction; its tid is the task's XCom return value.

    :param label: shown by `airflow-txn list`; defaults to `<dag_id>/<run_id>`.
    :param isolation: "snapshot" (default) or "serializable". Templated: a value known when the DAG is
        parsed is checked then (InvalidArgumentError names the allowed values), a template once
        rendered (a bad value fails the task without retry).
    :param lease_seconds: how long the transaction lives without a heartbeat; statements and
        SparkTransactionOperator renew it, so it only has to outlast the gaps between tasks.
        None (default): `[airflow_txn] lease_seconds` of Airflow's configuration, else one hour.
        Templated, checked as `isolation` is (a positive number of seconds up to 7 days).
    :param conn_id: the airflow_txn connection.
    """

    template_fields: Sequence[str] = ("transaction_label", "isolation", "lease_seconds", "conn_id")
    ui_color = "#d8f0d2"
    operator_extra_links = (TransactionLink(),)

    def __init__(self, *, label: str | None = None, isolation: str | Isolation = Isolation.SNAPSHOT,
                 lease_seconds: float | str | None = None, **kwargs: Any) -> None:
        checked_isolation = isolation if is_template(isolation) else isolation_value(isolation)
        checked_lease = lease_seconds if is_template(lease_seconds) else lease_value(lease_seconds)
        super().__init__(**kwargs)  # after the checks: a refused task is not added to the DAG
        self.transaction_label = label
        self.isolation: Any = checked_isolation
        self.lease_seconds: Any = checked_lease

    def execute(self, context: Context) -> str:
        dag_id, run_id, _task, _map, _try = run_ids(context)
        label = self.transaction_label or f"{dag_id}/{run_id}"
        try:  # the rendered values (a template's text, an XCom)
            isolation, lease = isolation_value(self.isolation), lease_value(self.lease_seconds)
        except InvalidArgumentError as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc
        if lease is None:
            lease = default_lease_seconds()
        with self.hook.warehouse() as wh:
            txn = wh.begin(label=label, isolation=Isolation(isolation), lease_seconds=lease,
                           metadata=airflow_metadata(context))
        self.linked_tid = txn.tid
        self.record_lineage(context, TxnLineage(txn.tid, state=ACTIVE, snapshot_csn=txn.snapshot_csn))
        self.log.info("began transaction %s (%s, lease %gs) at snapshot %d (label %r)", txn.tid, isolation, lease,
                      txn.snapshot_csn, label)
        return txn.tid


class CommitTransactionOperator(LineageMixin, TxnBaseOperator):
    """Commit the transaction `tid`; the commit CSN is the XCom return value.

    Before committing it records the Airflow context in the transaction's metadata (`{"airflow":
    {dag_id, run_id, task_id, try_number, url}}`, over what the begin task recorded). After the commit
    (never before) it emits one Asset event per table the commit wrote, with `{"table", "csn", "tid",
    "metadata", "warehouse_id"}` (and `"tag"` with `tag`) in the event extra. A table with a concrete outlet
    (`table_asset(...)`, made for each of `tables`) gets its event there, with one partition key per partition
    the commit wrote (`add_partitions`; the event extra also says `"written": false` when the commit left the
    table alone, since Airflow emits an event for each declared outlet); every other table written gets its
    event through the alias `commit_alias(conn_id)` (the default outlet; an alias event takes no partition
    keys). A commit that can no longer succeed (conflict, expired lease, failed statement) rolls back and
    fails without retrying; a commit that fails on its last try rolls back too. A retry after a successful
    commit returns the same CSN.

    :param tables: the tables the transaction writes, when known as the DAG is written: their Assets
        become outlets (next to `commit_alias(conn_id)`, for any other table written), so readers of
        partitioned Assets see the partitions. The warehouse id is read through `conn_id` as the DAG is
        parsed (assets.table_asset); a templated conn_id needs `outlets` instead.

    Lineage (OpenLineage provider, assets/lineage.py): on the COMPLETE event only, the tables the commit changed as
    outputs, version the commit CSN, with the rows and bytes it added; what the transaction's tasks read as
    inputs. START and FAIL events (a rollback, a failed commit) list no output, declared outlets included.

    :param tag: name the commit's snapshot (Warehouse.tag) with the commit, e.g. `backfill-{{ ds }}`
        (templated; `Transaction.commit(tag=)`): the tag holds the tables the commit wrote (every table when it
        wrote none), readable by that name whatever vacuum's retention. A malformed name fails the task without
        retry and commits nothing; one taken by another snapshot rolls the transaction back and fails without
        retry (the name is taken in the commit's own catalog transaction, or with ZooKeeper in the multi-op that
        decides the commit, so no other run can take it in between: docs/DESIGN.md D18). A retry after a
        successful commit finds its own tag (or makes it, if the commit stands without it).
    """

    template_fields: Sequence[str] = ("tid", "tag", "conn_id")
    ui_color = "#a6e3a1"
    operator_extra_links = (TransactionLink(),)

    def __init__(self, *, tid: Any, tag: str | None = None, tables: Sequence[str] | None = None,
                 **kwargs: Any) -> None:
        checked_tag = tag if tag is None or is_template(tag) else coerce_tag(tag)
        if "outlets" not in kwargs:
            kwargs["outlets"] = default_outlets(kwargs.get("conn_id") or DEFAULT_CONN_ID, tables, kwargs.get("task_id"))
        elif tables:
            raise InvalidArgumentError(f"{kwargs.get('task_id') or 'CommitTransactionOperator'}: pass `tables` or "
                                       "`outlets`, not both (tables=[...] makes the outlets)")
        super().__init__(**kwargs)
        self.tid = tid
        self.tag: Any = checked_tag

    def execute(self, context: Context) -> int:
        if self.tid in (None, "", "None"):  # begin skipped (a branch skipped the whole group): nothing to commit
            raise AirflowSkipException("no transaction began (the begin task was skipped or did not run)")
        tid = self.linked_tid = require_tid(self.tid, self.task_id)
        try:
            tag = coerce_tag(self.tag)  # the rendered name
        except TxnError as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}; nothing was committed") from exc
        with self.hook.warehouse() as wh:
            warehouse_id = wh.warehouse_id
            self._check_outlets(warehouse_id)
            csn = self._commit(wh, tid, context, tag)
            info = wh.transaction_info(tid)
            self.record_lineage(context, lambda: self._commit_lineage(wh, info, csn, warehouse_id))
            written = committed_partitions(info, csn)
            if tag is not None:  # made with the commit; a retry after a commit without its tag makes it here
                self._ensure_tag(wh, tag, csn, list(written))
            published = self._published(wh, csn, list(written))
        self.log.info("committed %s at CSN %d: %s", tid, csn, ", ".join(written) or "no table written")
        self._emit_asset_events(context, warehouse_id, tid, csn, written, info["metadata"], tag, published)
        return csn

    def _published(self, wh: Warehouse, csn: int, tables: Sequence[str]) -> Mapping[str, Mapping[str, Any]]:
        """With publishing on (the connection's `publish`): what other engines read for this commit, per table
        written (its Iceberg snapshot id, Delta version), publishing caught up first. A failure to publish is
        logged and leaves the events without them: the commit stands (docs/INTEROP.md)."""
        if not wh.config.publish or not tables:
            return {}
        try:
            return wh.published(csn=csn, tables=list(tables))
        except TxnError as exc:
            self.log.warning("the commit at CSN %d stands, but publishing it failed (the Asset events carry no "
                             "snapshot ids; the next publish catches it up): %s", csn, exc)
            return {}

    def _commit_lineage(self, wh: Warehouse, info: TransactionInfo, csn: int, warehouse_id: str) -> TxnLineage:
        """The commit's lineage: what it made visible, and what the transaction read to make it."""
        return TxnLineage(info["tid"], state=COMMITTED, snapshot_csn=info["snapshot_csn"], commit_csn=csn,
                          inputs=transaction_reads(wh, info["tid"], info["snapshot_csn"], warehouse_id),
                          outputs=described(wh, committed_outputs(info, csn, warehouse_id)))

    def _tag_taken(self, wh: Warehouse, tid: str, exc: TagExistsError) -> NoReturn:
        """The commit named a tag someone else holds: nothing was committed (the name is taken in the commit's own
        catalog transaction or ZooKeeper multi-op, D18), so the transaction is rolled back; a commit that stands
        all the same (a record mirrored by an older airflow_txn) is reported as it is."""
        if wh.transaction_info(tid)["state"] == COMMITTED:
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc
        roll_back_quietly(wh, tid, f"commit refused: {exc}", self.log)
        raise AirflowFailException(f"{self.task_id}: {exc}; transaction {tid} was rolled back") from exc

    def _ensure_tag(self, wh: Warehouse, tag: str, csn: int, tables: Sequence[str]) -> None:
        """After the commit: the tag names it (made with it, or by an earlier try), else it is made now."""
        try:
            found = wh.tag_info(tag)
        except TagNotFoundError:
            found = None
        if found is not None and found["csn"] == csn:
            return
        try:
            made = wh.tag(tag, csn=csn, tables=list(tables) or None, note=self._tag_note())
        except TagExistsError as exc:
            raise AirflowFailException(f"{self.task_id}: the commit at CSN {csn} stands, but tagging it failed: "
                                       f"{exc}") from exc
        self.log.info("tagged CSN %d as %r (%s)", csn, tag, ", ".join(made["tables"]))

    def _tag_note(self) -> str:
        return f"committed by {self.dag_id}.{self.task_id}"

    def _commit(self, wh: Warehouse, tid: str, context: Context, tag: str | None = None) -> int:
        info = wh.transaction_info(tid)
        if info["state"] == COMMITTED:
            self.log.info("transaction %s was already committed by an earlier try", tid)
            return committed_csn(info)
        if info["state"] == ROLLED_BACK:
            self.record_lineage(context, TxnLineage(tid, state=ROLLED_BACK, snapshot_csn=info["snapshot_csn"]))
            raise AirflowFailException(f"transaction {tid} was rolled back ({info['failed_reason']}); "
                                       f"nothing to commit. {RERUN_HINT}")
        try:
            txn = wh.attach(tid)
            if not info["commit_in_progress"]:  # a commit an earlier try started is finished as it was
                txn.annotate(airflow_metadata(context))
            return txn.commit(tag=tag, tag_note=None if tag is None else self._tag_note())
        except TagExistsError as exc:
            self._tag_taken(wh, tid, exc)
        except _FINAL_COMMIT_ERRORS as exc:
            state = roll_back_quietly(wh, tid, f"commit failed: {exc}", self.log)
            self.record_lineage(context, TxnLineage(tid, state=state, snapshot_csn=info["snapshot_csn"]))
            raise AirflowFailException(f"transaction {tid} cannot commit and was rolled back: {exc}") from exc
        except Exception as exc:
            if is_last_try(context):
                roll_back_quietly(wh, tid, f"commit failed on its last try: {exc}", self.log)
            raise

    def _check_outlets(self, warehouse_id: str) -> None:
        """Refuse (before committing) airflow-txn Assets that are no table of the warehouse the connection
        reaches (another warehouse's, a commit-log Asset): Airflow would emit an event for each with no commit
        of that table behind it."""
        foreign = [o.uri for o in self.outlets if isinstance(o, Asset) and o.uri.startswith(f"{SCHEME}://")
                   and table_of(o, warehouse_id) is None]
        if foreign:
            raise AirflowFailException(
                f"{self.task_id}: outlets {foreign} are no table Assets of the warehouse connection {self.conn_id!r} "
                f"reaches (warehouse id {warehouse_id}); nothing was committed. Make them with table_asset(table, "
                "conn_id), or with the warehouse_id `airflow-txn doctor` shows")

    def _emit_asset_events(self, context: Context, warehouse_id: str, tid: str, csn: int,
                           written: Mapping[str, list[Partition]], metadata: Mapping[str, object],
                           tag: str | None = None, published: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """A concrete event (with partition keys) for each table with a table_asset outlet, an alias event
        for each other table written (module docstring of assets/tables.py: tables named by warehouse id); with
        publishing on, each carries the table's Iceberg snapshot id / Delta version of this commit."""
        published = published or {}
        events = context["outlet_events"]
        concrete = set()
        for outlet in self.outlets:
            table = table_of(outlet, warehouse_id) if isinstance(outlet, Asset) else None
            if table is None:
                continue
            concrete.add(table)
            extra = event_extra(table, csn, tid, metadata, warehouse_id, tag, published.get(table))
            if table not in written:
                extra["written"] = False
            events[outlet].extra.update(extra)
            keys = asset_partition_keys(written.get(table, []))
            if keys and not add_outlet_partitions(events[outlet], keys):
                self.log.info("%s: this Airflow release cannot put partition keys on an Asset event (Airflow 3.3 "
                              "can); the event carries none (partitions written: %s)", table, ", ".join(keys))
        for outlet in self.outlets:
            if isinstance(outlet, AssetAlias):
                for table in written:
                    if table not in concrete:
                        events[outlet].add(table_asset(table, warehouse_id=warehouse_id),
                                           extra=event_extra(table, csn, tid, metadata, warehouse_id, tag,
                                                             published.get(table)))


class RollbackTransactionOperator(LineageMixin, TxnBaseOperator):
    """Roll back the transaction `tid` (compensating every part it staged); idempotent.

    Nothing to do when no transaction began (tid missing) or it already ended; a committed
    transaction is left alone (it cannot roll back) and reported. XCom: the final state.
    """

    template_fields: Sequence[str] = ("tid", "conn_id")
    ui_color = "#f7c6c5"

    def __init__(self, *, tid: Any, reason: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tid = tid
        self.reason = reason

    def execute(self, context: Context) -> str | None:
        if self.tid in (None, "", "None"):
            self.log.info("no transaction began: nothing to roll back")
            return None
        tid = require_tid(self.tid, self.task_id)
        dag_id, run_id, task_id, _map, _try = run_ids(context)
        reason = self.reason or f"rolled back by {dag_id}/{task_id} in run {run_id} after a task failed"
        with self.hook.warehouse() as wh:
            state = roll_back_quietly(wh, tid, reason, self.log, quiet=False)
        self.record_lineage(context, TxnLineage(tid, state=state))
        return state


class TransactionOutcomeOperator(LineageMixin, TxnBaseOperator):
    """The verdict of a transaction: succeeds with the commit CSN when `tid` committed, fails the
    task (and so the DAG run) when it rolled back. A transaction still active here never reached
    its commit: it is rolled back first. Used by transaction_group as its last task, so that a
    rollback that itself succeeded does not turn the run green.

    :param begin_task_id: the task that began the transaction. When no transaction began and that task
        was SKIPPED (a branch or short-circuit upstream skipped the whole group), the verdict is a skip,
        not a failure; when it failed, the verdict fails.
    """

    template_fields: Sequence[str] = ("tid", "conn_id")
    ui_color = "#e0e0e0"

    def __init__(self, *, tid: Any, begin_task_id: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.tid = tid
        self.begin_task_id = begin_task_id

    def execute(self, context: Context) -> int:
        if self.tid in (None, "", "None"):
            # the group's begin: in a mapped task group, the one of this task's map index
            same_index = run_ids(context)[3] if mapped_group_ids(self) else None
            if self.begin_task_id is not None and task_state(context, self.begin_task_id, same_index) == "skipped":
                raise AirflowSkipException(f"{self.begin_task_id} was skipped: no transaction began, nothing to judge")
            raise AirflowFailException("no transaction began (the begin task did not succeed)")
        tid = require_tid(self.tid, self.task_id)
        with self.hook.warehouse() as wh:
            info = wh.transaction_info(tid)
            if info["state"] not in ENDED:
                roll_back_quietly(wh, tid, "the commit task never ran", self.log)
                info = wh.transaction_info(tid)
        self.record_lineage(context, TxnLineage(tid, state=info["state"], snapshot_csn=info["snapshot_csn"],
                                                commit_csn=info["commit_csn"]))
        if info["state"] == COMMITTED:
            self.log.info("transaction %s committed at CSN %s", tid, info["commit_csn"])
            return committed_csn(info)
        raise AirflowFailException(f"transaction {tid} was rolled back: {info['failed_reason'] or 'see the log'}; "
                                   "no table changed")


def default_outlets(conn_id: Any, tables: Sequence[str] | None, task_id: object = None) -> list[Any]:
    """CommitTransactionOperator's outlets when it is given none: `table_asset(t, conn_id)` for each of
    `tables` (the warehouse id read as the DAG is parsed), then `commit_alias(conn_id)`."""
    alias = default_outlet(conn_id, task_id)
    return [*(table_asset(table, conn_id) for table in tables or ()), alias]


def default_outlet(conn_id: Any, task_id: object = None) -> AssetAlias:
    """CommitTransactionOperator's default outlet, `commit_alias(conn_id)`.

    An AssetAlias outlet is registered when the DAG is parsed (its name is how the scheduler links the
    events emitted through it to the DAGs scheduled on it), so it cannot take a name known only when
    the task runs: an alias named after a templated conn_id would be named after the template's text.
    The events' table Assets do take the rendered conn_id, so a templated conn_id works with outlets
    the DAG names itself, e.g. `outlets=[AssetAlias("shop-commits")]` (docs/OPERATORS.md)."""
    if is_template(conn_id):
        raise InvalidArgumentError(
            f"{task_id or 'CommitTransactionOperator'}: conn_id {conn_id!r} is known only when the task runs, and the "
            "default outlet commit_alias(conn_id) needs its name when the DAG is parsed (an AssetAlias is "
            "registered then); pass the outlets yourself, e.g. outlets=[AssetAlias(\"my-commits\")] (the "
            "events it carries name each table with the rendered conn_id) or outlets=[] for no events")
    return commit_alias(conn_id)


def task_state(context: Context, task_id: str, map_index: int | None = None) -> str | None:
    """The state of task `task_id` in this DAG run, of its map index `map_index` when given (None when the task
    runner cannot say)."""
    ti = context["ti"]
    ask = getattr(ti, "get_task_states", None)
    if ask is None:  # pragma: no cover - a task runner without the Task SDK's state queries
        return None
    dag_id, run_id, _task, _map, _try = run_ids(context)
    by_index = {} if map_index is None else {"map_index": map_index}
    states = ask(dag_id=dag_id, task_ids=[task_id], run_ids=[run_id], **by_index)
    key = task_id if map_index is None or map_index < 0 else f"{task_id}_{map_index}"  # the API's key of a map index
    found = (states or {}).get(run_id, {}).get(key)
    return None if found is None else str(found)


def committed_csn(info: TransactionInfo) -> int:
    """The commit CSN of a committed transaction (which always has one)."""
    csn = info["commit_csn"]
    if csn is None:
        raise AirflowFailException(f"transaction {info['tid']} is committed but has no commit CSN")
    return csn


def committed_partitions(info: TransactionInfo, csn: int) -> dict[str, list[Partition]]:
    """{table: the partitions whose content the commit at `csn` changed}, the tables sorted."""
    found: dict[str, dict[str, Partition]] = {}
    for p in info["parts"]:
        changed = p["creation_csn"] if p["role"] == "created" else p["removal_csn"]
        if changed == csn:
            found.setdefault(p["table"], {}).setdefault(partition_key(p["partition"]), p["partition"])
    return {table: list(found[table].values()) for table in sorted(found)}


def roll_back_quietly(wh: Warehouse, tid: str, reason: str, log: Any, quiet: bool = True) -> str:
    """Roll `tid` back if it is still active; returns its final state. With quiet=True a failure is
    logged (recovery finishes the rollback later), not raised."""
    try:
        info = wh.transaction_info(tid)
        if info["state"] not in ENDED:
            wh.attach(tid).rollback(reason=reason)
            log.warning("rolled back transaction %s: %s", tid, reason)
            return ROLLED_BACK
        if info["state"] == COMMITTED:
            log.warning("transaction %s is committed (CSN %s): nothing to roll back", tid, info["commit_csn"])
        else:
            log.info("transaction %s was already rolled back", tid)
        return str(info["state"])
    except TransactionNotFoundError:
        if not quiet:
            raise
        log.error("transaction %s is unknown to the warehouse this process reaches (%r, catalog %s): is the Airflow "
                  "connection defined where this runs? Its lease (or `airflow-txn recover` on its warehouse) ends it",
                  tid, wh, masked_url(wh.config.catalog_url))
        return ACTIVE
    except Exception:
        if not quiet:
            raise
        log.exception("rollback of %s failed; `airflow-txn recover` (or the lease) will finish it", tid)
        return ACTIVE

