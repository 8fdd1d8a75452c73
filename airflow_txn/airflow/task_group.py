"""transaction_group: a TaskGroup whose tasks form ONE warehouse transaction.

    with transaction_group("backfill") as txn:    # the operators made inside take the group's tid
        SparkTransactionOperator(task_id="load_orders", python_callable=load_orders)
        SparkTransactionOperator(task_id="load_items", python_callable=load_items)

wires, inside the group:

    begin ──► body tasks ──► [check] ──► commit ──► rollback (one_failed) ──► outcome (all_done)
                    └──────────────┴───────────────────┘

With `checks=[...]` (airflow_txn.checks) a TransactionCheckOperator `check` runs them between the body and
the commit, against the transaction's own view: a failed check rolls everything back and fails the run
(write-audit-publish across every table of the transaction).

`rollback` runs as soon as a body task fails for good (or the commit does) and compensates every
staged part. `outcome` is the group's only leaf: it succeeds with the commit CSN, or fails when the
transaction rolled back, so the DAG run ends `failed` even though the rollback itself succeeded.
Rollback and outcome read the tid from XCom (a template), so they run even if `begin` failed.

A skipped body task (a short-circuit, a branch, a task that raises AirflowSkipException on "no new
data") is not a failure: with on_skip="commit" (the default) the commit runs when no task failed
(trigger rule none_failed) and makes visible what the other tasks staged; with on_skip="rollback" a
skip leaves the commit unrun and `outcome` rolls the transaction back and fails the run. When `begin`
itself was skipped (a branch skipped the whole group), commit and outcome skip: nothing began.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, ClassVar

import attrs

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID
from airflow_txn.airflow.operators.base import is_template
from airflow_txn.airflow.operators.check import TransactionCheckOperator
from airflow_txn.airflow.operators.transaction import (
    BeginTransactionOperator,
    CommitTransactionOperator,
    RollbackTransactionOperator,
    TransactionOutcomeOperator,
    default_outlet,
    isolation_value,
)
from airflow_txn.airflow.version_compat import TaskGroup, TriggerRule, XComArg, mapped_group_ids
from airflow_txn.checks import Check, check_list
from airflow_txn.core.adapter import Isolation
from airflow_txn.errors import InvalidArgumentError
from airflow_txn.model.options import CheckEngine, CheckEngineName


def _check_engine_value(value: object) -> CheckEngine:
    """The group's check_engine, checked when the DAG is parsed (InvalidOptionError names the engines)."""
    return CheckEngine.parse(value, "check_engine")


def _isolation_value(value: object) -> Any:
    """The group's isolation, checked when the DAG is parsed (InvalidArgumentError names the levels),
    unless it is a template: then its begin task checks the rendered value."""
    return value if is_template(value) else isolation_value(value)


ON_SKIP = ("commit", "rollback")
"""What a transaction_group does when a task of its body is skipped (module docstring)."""


def _on_skip_value(value: object) -> str:
    """The group's on_skip, checked when the DAG is parsed."""
    if value not in ON_SKIP:
        raise InvalidArgumentError(f"on_skip must be one of {', '.join(map(repr, ON_SKIP))}, got {value!r}")
    return str(value)


def _checks_value(value: object) -> list[Check] | None:
    """The group's checks, validated when the DAG is parsed (InvalidArgumentError names the bad one)."""
    return None if value is None else check_list(value)


@attrs.define(kw_only=True, repr=False)
class TransactionTaskGroup(TaskGroup):
    """The TaskGroup made by transaction_group(); `tid` and `csn` are XComArgs for the tasks."""

    is_transaction_group: ClassVar[bool] = True
    """What operators/base.py group_tid looks for (it does not import this module, which imports the operators)."""
    conn_id: str = DEFAULT_CONN_ID
    label: str | None = None
    isolation: str = attrs.field(default=Isolation.SNAPSHOT.value, converter=_isolation_value)
    lease_seconds: float | str | None = None
    on_skip: str = attrs.field(default="commit", converter=_on_skip_value)
    commit_outlets: list[Any] | None = None
    tables: list[str] | None = None
    checks: list[Check] | None = attrs.field(default=None, converter=_checks_value)
    check_engine: CheckEngine = attrs.field(default=CheckEngine.DUCKDB, converter=_check_engine_value)
    tag: str | None = None
    """The name the commit's snapshot gets (CommitTransactionOperator's `tag`: templated)."""
    begin: BeginTransactionOperator | None = attrs.field(default=None, init=False)
    check: TransactionCheckOperator | None = attrs.field(default=None, init=False)
    commit: CommitTransactionOperator | None = attrs.field(default=None, init=False)
    rollback: RollbackTransactionOperator | None = attrs.field(default=None, init=False)
    outcome: TransactionOutcomeOperator | None = attrs.field(default=None, init=False)

    def __enter__(self) -> TransactionTaskGroup:
        if self.commit_outlets is None:  # a templated conn_id is refused before the group opens
            default_outlet(self.conn_id, f"transaction_group {self.group_id!r}")
        super().__enter__()
        if self.begin is None:
            self.begin = BeginTransactionOperator(task_id="begin", label=self.label, isolation=self.isolation,
                                                  lease_seconds=self.lease_seconds, conn_id=self.conn_id)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if exc_type is None and self.commit is None:
                self._wire()
        finally:
            super().__exit__(exc_type, exc, tb)  # type: ignore[no-untyped-call]

    @property
    def tid(self) -> XComArg:
        """The transaction id (the begin task's XCom). The body's transaction operators take the group's on
        their own (tid_template); pass this where a task of the group needs the tid as an argument."""
        if self.begin is None:
            raise RuntimeError("use transaction_group(...) as a context manager: `with ... as txn:`")
        return self.begin.output

    @property
    def tid_template(self) -> str:
        """The transaction id as a template pulling the begin task's XCom (no task dependency): what the
        group's own rollback and outcome use, and a body task given no `tid` (operators/base.py group_tid).
        Inside a mapped task group it pulls the XCom of the task's own map index."""
        if self.begin is None:
            raise RuntimeError("use transaction_group(...) as a context manager: `with ... as txn:`")
        # in a mapped task group each map index has its own begin; a pull naming no map index gets all of them
        same_index = ", map_indexes=ti.map_index" if mapped_group_ids(self.begin) else ""
        return "{{ ti.xcom_pull(task_ids='" + self.begin.task_id + "'" + same_index + ") }}"

    @property
    def csn(self) -> XComArg:
        """The commit CSN (the commit task's XCom), e.g. for a CommitCSNSensor after the group."""
        if self.commit is None:
            raise RuntimeError("the commit task exists once the `with transaction_group(...)` block has ended")
        return self.commit.output

    def _wire(self) -> None:
        assert self.begin is not None
        body = [t for t in self.iter_tasks() if t is not self.begin]
        ids = {t.task_id for t in body}
        roots = [t for t in body if not (set(t.upstream_task_ids) & ids)]
        leaves = [t for t in body if not (set(t.downstream_task_ids) & ids)]
        for task in roots:
            if self.begin.task_id not in task.upstream_task_ids:
                self.begin.set_downstream(task)
        tid = self.tid_template
        for task in body:  # mapped tasks given no tid (their operator is made when the task runs)
            partial = getattr(task, "partial_kwargs", None)
            if isinstance(partial, dict) and _takes_tid(task) and partial.get("tid") is None:
                partial["tid"] = tid
        commit_rule = TriggerRule.NONE_FAILED if self.on_skip == "commit" else TriggerRule.ALL_SUCCESS
        outlets: dict[str, Any] = {} if self.commit_outlets is None else {"outlets": list(self.commit_outlets)}
        self.commit = CommitTransactionOperator(task_id="commit", tid=self.begin.output, conn_id=self.conn_id,
                                                trigger_rule=commit_rule, tables=self.tables, tag=self.tag,
                                                **outlets)
        self.rollback = RollbackTransactionOperator(task_id="rollback", tid=tid, conn_id=self.conn_id,
                                                    trigger_rule=TriggerRule.ONE_FAILED)
        self.outcome = TransactionOutcomeOperator(task_id="outcome", tid=tid, conn_id=self.conn_id,
                                                  begin_task_id=self.begin.task_id, trigger_rule=TriggerRule.ALL_DONE)
        upstream_of_commit: list[Any] = leaves or [self.begin]
        if self.checks:
            self.check = TransactionCheckOperator(task_id="check", tid=tid, checks=self.checks,
                                                  engine=self.check_engine, conn_id=self.conn_id,
                                                  trigger_rule=commit_rule)
            for task in upstream_of_commit:
                task.set_downstream(self.check)
            upstream_of_commit = [self.check]
        for task in upstream_of_commit:
            task.set_downstream(self.commit)
        for task in [*leaves, *upstream_of_commit, self.commit]:
            task.set_downstream(self.rollback)
        self.commit.set_downstream(self.outcome)
        self.rollback.set_downstream(self.outcome)


def _takes_tid(task: Any) -> bool:
    """Whether a (mapped) task's operator class is a transaction operator (it templates `tid`)."""
    operator_class = getattr(task, "operator_class", None)
    return "tid" in getattr(operator_class, "template_fields", ())


def transaction_group(group_id: str, conn_id: str = DEFAULT_CONN_ID, label: str | None = None,
                      isolation: str | Isolation = Isolation.SNAPSHOT, lease_seconds: float | str | None = None,
                      on_skip: str = "commit", commit_outlets: list[Any] | None = None,
                      tables: list[str] | None = None, checks: list[Check] | None = None,
                      check_engine: CheckEngine | CheckEngineName = CheckEngine.DUCKDB, tag: str | None = None,
                      **kwargs: Any) -> TransactionTaskGroup:
    """A TaskGroup with begin → (your tasks) → commit, rollback on any failure, and an outcome task that fails
    the run when the transaction rolled back. Use it as `with transaction_group(...) as txn:`; the transaction
    operators and task decorators made inside take its transaction (no `tid=`). `on_skip`: "commit" (default: a
    skipped task is no failure, the commit makes what the others staged visible) or "rollback" (a skip rolls
    everything back and fails the run). `commit_outlets`: the commit task's outlets (default
    `[commit_alias(conn_id)]`; needed when conn_id is a template). `tables`: the tables the transaction writes,
    when known: the commit emits their Asset events concretely, with the partitions written
    (CommitTransactionOperator's `tables`). `checks`: write-audit-publish checks (airflow_txn.checks) run by a
    `check` task between the body and the commit, with `check_engine` ("duckdb" or "spark"); a failed check
    rolls the transaction back. `tag`: the name the commit's snapshot gets (templated, e.g. "backfill-{{ ds }}":
    CommitTransactionOperator's `tag`). Other keyword arguments go to TaskGroup."""
    if commit_outlets is None:
        default_outlet(conn_id, f"transaction_group {group_id!r}")  # a templated conn_id is refused here
    elif tables:
        raise InvalidArgumentError(f"transaction_group {group_id!r}: pass `tables` or `commit_outlets`, not both")
    return TransactionTaskGroup(group_id=group_id, conn_id=conn_id, label=label, isolation=isolation,
                                lease_seconds=lease_seconds, on_skip=on_skip, commit_outlets=commit_outlets,
                                tables=list(tables) if tables else None, checks=checks, check_engine=check_engine,
                                tag=tag, **kwargs)


__all__ = ["TransactionTaskGroup", "transaction_group"]
