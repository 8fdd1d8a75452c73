"""What every transaction operator shares: the connection, the hook, the tid argument (or the enclosing
transaction_group's), the try, and `keyed_try`: a task's work inside the transaction under its own key."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook
from airflow_txn.airflow.version_compat import AirflowFailException, BaseOperator, XComArg
from airflow_txn.core.adapter import COMMITTED, ROLLED_BACK
from airflow_txn.errors import InvalidNameError, TransactionClosedError
from airflow_txn.model.tid import Tid

if TYPE_CHECKING:
    from airflow_txn.core.transaction import Transaction


class InfoLog(Protocol):
    """What keyed_try logs to (an operator's `self.log`)."""

    def info(self, event: Any, *args: Any, **kw: Any) -> Any: ...


def is_template(value: object) -> bool:
    """True for an argument whose value is known only when the task runs: Jinja text or an XComArg
    (checked after rendering, in execute; anything else is checked when the DAG is parsed)."""
    return isinstance(value, XComArg) or (isinstance(value, str) and ("{{" in value or "{%" in value))


class TxnBaseOperator(BaseOperator):
    """Base of the transaction operators: `conn_id` names the warehouse connection."""

    linked_tid: str | None = None
    """The transaction this try works in, once known (the "Transaction" extra link: plugins/links.py)."""

    def __init__(self, *, conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id

    @property
    def hook(self) -> TxnHook:
        """A new hook on each access: the connection is looked up when a task runs, never cached
        on the operator (which Airflow may reuse across runs)."""
        return TxnHook(conn_id=self.conn_id)


class TxnCallableOperator(TxnBaseOperator):
    """Base of the operators that run a user's callable in the transaction (SparkTransactionOperator,
    TransactionPythonOperator): `python_callable`, `tid` (inside a transaction_group: the group's),
    `op_args`, `op_kwargs`."""

    def __init__(self, *, python_callable: Callable[..., Any], tid: Any = None, op_args: Sequence[Any] | None = None,
                 op_kwargs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not callable(python_callable):
            raise TypeError(f"{self.task_id}: python_callable must be callable, got {python_callable!r}")
        self.tid = tid if tid is not None else group_tid(self)
        self.python_callable = python_callable
        self.op_args = list(op_args or [])
        self.op_kwargs = dict(op_kwargs or {})


def require_tid(value: Any, task_id: str) -> str:
    """The rendered `tid` argument as a tid string; a clear failure (no retry) when it is missing."""
    if value is None or value == "" or value == "None":
        raise AirflowFailException(
            f"{task_id}: no transaction id (tid is {value!r}); did the BeginTransactionOperator upstream run?"
        )
    try:
        return str(Tid.parse(str(value).strip()))
    except InvalidNameError as exc:
        raise AirflowFailException(f"{task_id}: {value!r} is not a transaction id: {exc}") from exc


RERUN_HINT = ("To run this transaction's work again, clear the whole transaction group with its `begin` task "
              "(Clear on `begin` with 'Downstream' on): `begin` starts a NEW transaction, the tasks stage again "
              "under it and their overwrites replace what the old one committed (docs/AIRFLOW.md, 'Re-running "
              "a finished run').")
"""What a task that meets an ended transaction tells the user (a task cleared alone after its run ended)."""


def ended_transaction(task_id: str, tid: str, state: str) -> AirflowFailException:
    """The failure (no retry) of a task asked to work in transaction `tid`, which already ended (`state`)."""
    return AirflowFailException(f"{task_id}: transaction {tid} has already ended ({state}): nothing can be done in "
                                f"it any more. {RERUN_HINT}")


def run_ids(context: Mapping[str, Any]) -> tuple[str, str, str, int, int]:
    """(dag_id, run_id, task_id, map_index, try_number) of the running task instance."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return ti.dag_id, ti.run_id, ti.task_id, -1 if map_index is None else int(map_index), int(ti.try_number)


def task_key(context: Mapping[str, Any]) -> str:
    """The staging key of the running task: dag_id/task_id/map_index (invariant 7's key)."""
    dag_id, _run_id, task_id, map_index, _try = run_ids(context)
    return f"{dag_id}/{task_id}/{map_index}"


def airflow_metadata(context: Mapping[str, Any]) -> dict[str, object]:
    """What a transaction records of the Airflow task working on it (its metadata, `airflow-txn show`):
    `{"airflow": {dag_id, run_id, task_id, try_number, url}}`, `url` leading back to the DAG run."""
    from airflow_txn.airflow.plugins.links import run_url

    dag_id, run_id, task_id, _map_index, try_number = run_ids(context)
    return {"airflow": {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "try_number": try_number,
                        "url": run_url(dag_id, run_id)}}


def is_last_try(context: Mapping[str, Any]) -> bool:
    """True when a failure of this try fails the task for good (no retry left)."""
    ti = context["ti"]
    max_tries = getattr(ti, "max_tries", None)
    if max_tries is None:
        task = context.get("task")
        max_tries = getattr(task, "retries", 0) or 0
    return int(ti.try_number) > int(max_tries)


def group_tid(task: Any) -> str | None:
    """The tid of the transaction_group `task` was created in (a template pulling its `begin` task's XCom),
    None outside one: what a transaction operator uses when given no `tid`."""
    group = getattr(task, "task_group", None)
    while group is not None:  # a TransactionTaskGroup (task_group.py imports this module: it is not imported here)
        if getattr(group, "is_transaction_group", False) and group.begin is not None and group.begin is not task:
            return str(group.tid_template)
        group = getattr(group, "parent_group", None)
    return None


@contextmanager
def keyed_try(hook: TxnHook, tid: str, context: Mapping[str, Any], task_id: str,
              log: InfoLog) -> Iterator[Transaction]:
    """The transaction `tid` for this try of the running task: its writes keyed by (dag_id, task_id,
    map_index) with the try number as attempt (invariant 7), what earlier tries staged withdrawn first, the
    lease renewed while inside, and what this try staged withdrawn at once if it fails (so sibling tasks stop
    seeing it; a retry would too). An ended transaction (a task cleared alone after its run ended) fails the
    task without retry, saying how to run the work again."""
    _dag, _run, _task, _map, try_number = run_ids(context)
    key = task_key(context)
    with hook.warehouse() as wh:
        try:
            txn = wh.attach(tid).use_key(key, attempt=try_number)
        except TransactionClosedError as exc:
            raise ended_transaction(task_id, tid, wh.transaction_info(tid)["state"]) from exc
        if not txn.heartbeat():
            if txn.state in (COMMITTED, ROLLED_BACK):
                raise ended_transaction(task_id, tid, txn.state)
            raise AirflowFailException(f"transaction {tid} is no longer active (state {txn.state}) or its lease "
                                       "ran out: nothing can be staged in it")
        with txn.keep_alive():
            undone = txn.compensate(attempt=try_number)
            if undone:
                log.info("replaced %d part(s) staged by earlier tries of %s", undone, key)
            try:
                yield txn
            except BaseException:
                _withdraw(txn, try_number, log)
                raise


def _withdraw(txn: Transaction, try_number: int, log: InfoLog) -> None:
    try:
        txn.compensate(attempt=try_number + 1)
    except Exception as exc:  # the transaction may be gone (rolled back): nothing left to undo
        log.info("could not withdraw this try's writes (%s); rollback or the retry will", exc)


def call_with_context(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """fn(*args, **kwargs), passing only the keyword arguments fn names unless it takes **kwargs."""
    params = inspect.signature(fn).parameters.values()
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        names = {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                      inspect.Parameter.POSITIONAL_OR_KEYWORD)}
        kwargs = {k: v for k, v in kwargs.items() if k in names}
    return fn(*args, **kwargs)
