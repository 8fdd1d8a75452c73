"""What every transaction operator shares: the connection, the hook, the tid argument, the try."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook
from airflow_txn.airflow.version_compat import AirflowFailException, BaseOperator, XComArg
from airflow_txn.errors import InvalidNameError
from airflow_txn.model.tid import Tid


def is_template(value: object) -> bool:
    """True for an argument whose value is known only when the task runs: Jinja text or an XComArg
    (checked after rendering, in execute; anything else is checked when the DAG is parsed)."""
    return isinstance(value, XComArg) or (isinstance(value, str) and ("{{" in value or "{%" in value))


class TxnBaseOperator(BaseOperator):
    """Base of the transaction operators: `conn_id` names the warehouse connection."""

    linked_tid: str | None = None
    """The transaction this try works in, once known (the "Transaction" extra link: links.py)."""

    def __init__(self, *, conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id

    @property
    def hook(self) -> TxnHook:
        """A new hook on each access: the connection is looked up when a task runs, never cached
        on the operator (which Airflow may reuse across runs)."""
        return TxnHook(conn_id=self.conn_id)


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
    from airflow_txn.airflow.links import run_url

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
