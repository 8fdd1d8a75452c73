"""TransactionCheckOperator: the audit of write-audit-publish, across every table of a transaction.

    with transaction_group("backfill", checks=[
            ReferenceCheck("shop.orders", "customer_id", "shop.customers"),
            ReferenceCheck("shop.order_items", "order_id", "shop.orders")]) as txn:
        ...                                     # the writers; the group runs the checks before its commit

    TransactionCheckOperator(task_id="audit", tid=begin.output, checks=[UniqueCheck("shop.orders", "order_id")])

The checks (airflow_txn.checks: row counts, NULLs, uniqueness, an SQL predicate, references between two
tables) run against the transaction's OWN view: its snapshot plus what its tasks staged, which no reader
sees yet. DuckDB (engine="duckdb", the default) reads the Parquet files of the transaction's manifest;
engine="spark" reads each table with airflow_txn.spark.read at the transaction's view (for large tables).
Each check's result (value, bounds, passed) is recorded in the transaction's metadata under
{"checks": {task_id (or task_id[map_index]): report}} (the Transactions page shows it) and is the
task's XCom. When a check fails, the operator rolls the transaction back (reason: the failed checks)
and fails without retry (the staged data a retry would check is the same), so no reader ever sees the
data. `@task.txn_check` (decorators.py) builds the checks at run time instead, from a function's return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_txn.airflow.operators.base import (
    TxnBaseOperator,
    call_with_context,
    ended_transaction,
    group_tid,
    require_tid,
    run_ids,
)
from airflow_txn.airflow.operators.transaction import roll_back_quietly
from airflow_txn.airflow.plugins.links import TransactionLink
from airflow_txn.airflow.version_compat import AirflowFailException, Context
from airflow_txn.checks import Check, CheckReport, Engine, check_list, failure_reason, format_report, record, run_checks
from airflow_txn.core.adapter import ACTIVE
from airflow_txn.errors import (
    CheckError,
    InvalidArgumentError,
    InvalidNameError,
    SchemaMismatchError,
    TableNotFoundError,
    TransactionClosedError,
)
from airflow_txn.model.options import CheckEngine, CheckEngineName

if TYPE_CHECKING:
    from airflow_txn.core.transaction import Transaction

_BAD_CHECKS = (CheckError, InvalidArgumentError, InvalidNameError, SchemaMismatchError, TableNotFoundError)
"""Errors of checks that cannot run as written: a retry would meet them again."""


class TransactionCheckOperator(TxnBaseOperator):
    """Run `checks` against transaction `tid`'s own view before its commit (module docstring).

    :param checks: the checks (airflow_txn.checks), validated when the DAG is parsed: InvalidArgumentError
        names the bad one.
    :param python_callable: instead of `checks`: a function returning them when the task runs (called with
        `op_args`, then the context and `op_kwargs` it names; `@task.txn_check`).
    :param tid: the transaction id; inside a transaction_group it defaults to the group's.
    :param engine: "duckdb" (default: the transaction's Parquet files, read by DuckDB in the task) or
        "spark" (each table read by Spark at the transaction's view: a SparkSession as for
        SparkTransactionOperator): a `CheckEngine` or its name (InvalidOptionError when the DAG is parsed otherwise).
    :param op_args: positional arguments of `python_callable`.
    :param op_kwargs: keyword arguments of `python_callable` (templated).
    :param spark_conf: with engine="spark": Spark settings over the connection's `spark_conf`.
    :param remote: with engine="spark": a Spark Connect server (`sc://host:15002`) instead of a local session.
    :param conn_id: the airflow_txn connection.
    """

    template_fields: Sequence[str] = ("tid", "op_args", "op_kwargs", "conn_id")
    template_fields_renderers = {"op_kwargs": "py"}
    ui_color = "#fde2a7"
    operator_extra_links = (TransactionLink(),)

    def __init__(self, *, checks: Sequence[Check] | None = None, python_callable: Callable[..., Any] | None = None,
                 tid: Any = None, engine: CheckEngine | CheckEngineName = CheckEngine.DUCKDB,
                 op_args: Sequence[Any] | None = None,
                 op_kwargs: Mapping[str, Any] | None = None, spark_conf: Mapping[str, str] | None = None,
                 remote: str | None = None, **kwargs: Any) -> None:
        task = kwargs.get("task_id", "TransactionCheckOperator")
        if (checks is None) == (python_callable is None):
            raise InvalidArgumentError(f"{task}: give either checks=[...] or python_callable (returning them)")
        if python_callable is not None and not callable(python_callable):
            raise InvalidArgumentError(f"{task}: python_callable must be callable, got {python_callable!r}")
        try:
            checked = None if checks is None else check_list(checks)
            checked_engine = CheckEngine.parse(engine, "engine")
        except InvalidArgumentError as exc:  # InvalidOptionError for the engine: the same type, naming the task
            raise type(exc)(f"{task}: {exc}") from exc
        super().__init__(**kwargs)  # after the checks: a refused task is not added to the DAG
        self.tid = tid if tid is not None else group_tid(self)
        self.checks = checked
        self.python_callable = python_callable
        self.op_args = list(op_args or [])
        self.op_kwargs = dict(op_kwargs or {})
        self.engine = checked_engine
        self.spark_conf = dict(spark_conf or {})
        self.remote = remote

    def execute(self, context: Context) -> CheckReport:
        tid = self.linked_tid = require_tid(self.tid, self.task_id)
        try:
            checks = self._checks(context)
        except _BAD_CHECKS as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc
        with self.hook.warehouse() as wh:
            try:
                txn = wh.attach(tid)
            except TransactionClosedError as exc:
                raise ended_transaction(self.task_id, tid, wh.transaction_info(tid)["state"]) from exc
            if txn.state != ACTIVE:
                raise ended_transaction(self.task_id, tid, txn.state)
            with txn.keep_alive():
                report = self._run(txn, checks, context)
            _dag, _run, task_id, map_index, _try = run_ids(context)
            record(txn, report, task_id if map_index < 0 else f"{task_id}[{map_index}]")
            self.log.info("checks of transaction %s at snapshot %d (%s):\n%s", tid, report["snapshot_csn"],
                          report["engine"], format_report(report))
            if report["passed"]:
                return report
            reason = failure_reason(report, f"checks of {self.task_id}")
            roll_back_quietly(wh, tid, reason, self.log)
        raise AirflowFailException(f"{reason}; transaction {tid} rolled back\n{format_report(report)}")

    def _checks(self, context: Context) -> list[Check]:
        if self.checks is not None:
            return self.checks
        assert self.python_callable is not None
        return check_list(call_with_context(self.python_callable, self.op_args, {**context, **self.op_kwargs}))

    def _run(self, txn: Transaction, checks: Sequence[Check], context: Context) -> CheckReport:
        try:
            with self._engine(txn, context) as engine:
                return run_checks(txn, checks, engine)
        except _BAD_CHECKS as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc

    @contextmanager
    def _engine(self, txn: Transaction, context: Context) -> Iterator[Engine | None]:
        """The engine (None: run_checks' default, DuckDB); with Spark, the process's SparkSession (or the
        transaction's Spark Connect session, left open for its next task as SparkTransactionOperator does)."""
        if self.engine is CheckEngine.DUCKDB:
            yield None
            return
        from airflow_txn.airflow.operators.spark import task_spark_session
        from airflow_txn.spark.checks import SparkEngine

        dag_id, _run, task_id, _map, _try = run_ids(context)
        conf = {**self.hook.spark_conf(), **self.spark_conf}
        with task_spark_session(conf, app_name=f"{dag_id}.{task_id}", remote=self.remote or None, tid=txn.tid, txn=txn,
                                connect_timeout=self.hook.config().connect_timeout) as spark:
            yield SparkEngine(spark)
