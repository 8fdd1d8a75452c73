"""The listener AirflowTxnPlugin registers: a DAG run that fails (or is marked failed by hand), and a
task of a transaction that fails with no retries left, roll back the run's active transactions.

It finds them through the run's BeginTransactionOperator tasks and their XCom (the tid); a task's
failure only concerns the transactions it is downstream of. The hooks run inside the scheduler loop and the
API server: they copy the run's ids off the host's objects, then do everything else in a thread of their own
with sessions of their own, bounded by `[airflow_txn] listener_timeout` (airflow/utils/hosted.py). A listener never
raises: a rollback it cannot do is logged, and the transaction's lease (or `airflow-txn recover`) ends it later.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from airflow.listeners import hookimpl

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook
from airflow_txn.airflow.utils.hosted import run_hosted
from airflow_txn.airflow.version_compat import load_serialized_dag, mapped_group_ids, pull_run_xcoms

log = logging.getLogger(__name__)

BEGIN_TASK_TYPE = "BeginTransactionOperator"


def begin_tasks(dag: Any) -> list[Any]:
    """The BeginTransactionOperator tasks of a DAG (live or serialized)."""
    tasks = getattr(dag, "tasks", None) or []
    return [t for t in tasks if getattr(t, "task_type", type(t).__name__) == BEGIN_TASK_TYPE]


def _downstream_ids(task: Any) -> set[str] | None:
    try:
        return set(task.get_flat_relative_ids(upstream=False))
    except Exception:  # a task object without the graph: assume it may concern every transaction
        return None


def rollback_run(dag: Any, dag_id: str, run_id: str, reason: str, failed_task_id: str | None = None,
                 task_instance: Any = None, failed_map_index: int | None = None) -> list[str]:
    """Roll back the active transactions begun in this DAG run (those upstream of `failed_task_id`
    when given: in a mapped task group, only the one its map index `failed_map_index` began); returns the
    tids rolled back."""
    from airflow_txn.airflow.operators.transaction import roll_back_quietly
    from airflow_txn.core.adapter import ROLLED_BACK

    done = []
    for begin in _concerned(begin_tasks(dag), failed_task_id):
        map_index = failed_map_index if _same_mapped_group(dag, begin, failed_task_id) else None
        tids = pull_run_xcoms(dag_id, run_id, begin.task_id, task_instance, map_index)
        if not tids:
            continue
        conn_id = getattr(begin, "conn_id", None) or DEFAULT_CONN_ID
        with TxnHook(conn_id=conn_id).warehouse() as wh:  # one open for every map index's transaction
            for tid in tids:
                if roll_back_quietly(wh, str(tid), reason, log) == ROLLED_BACK:
                    done.append(str(tid))
    return done


def _same_mapped_group(dag: Any, begin: Any, failed_task_id: str | None) -> bool:
    """Whether the failed task is in the mapped task group `begin` is in: each map index of that group began its
    own transaction, and a task's failure concerns only its own map index's."""
    if failed_task_id is None:
        return False
    begin_groups = mapped_group_ids(begin)
    if not begin_groups:
        return False
    try:
        failed = dag.get_task(failed_task_id)
    except Exception:  # not in this DAG's version: assume every map index's transaction is concerned
        return False
    return begin_groups[0] in mapped_group_ids(failed)


def _concerned(begins: Iterable[Any], failed_task_id: str | None) -> list[Any]:
    if failed_task_id is None:
        return list(begins)
    concerned = []
    for begin in begins:
        downstream = _downstream_ids(begin)
        if downstream is None or failed_task_id in downstream:
            concerned.append(begin)
    return concerned


def _dag_of(task: Any, dag_id: str) -> Any:
    """The task's DAG: attached to it in a worker; in the scheduler (a task found dead, say) maybe
    not, then the serialized DAG from the metadata database (on a session of our own)."""
    dag = getattr(task, "dag", None) if task is not None else None
    if dag is None:
        try:
            dag = load_serialized_dag(dag_id)
        except Exception:  # no metadata database here (a worker): the DAG run's failure will do
            log.debug("no DAG for %s", dag_id, exc_info=True)
    return dag


def _failed_for_good(task_instance: Any) -> dict[str, Any] | None:
    """The plain values of a task instance that failed with no retries left (None when it will be retried), copied
    on the host's thread before anything of ours runs: the host's ORM objects belong to its session and thread."""
    if str(getattr(task_instance, "state", "")).split(".")[-1].lower() != "failed":
        return None
    return {"task": getattr(task_instance, "task", None), "dag_id": str(task_instance.dag_id),
            "run_id": str(task_instance.run_id), "task_id": str(task_instance.task_id),
            "map_index": _map_index(task_instance),
            "runtime": task_instance if type(task_instance).__name__ == "RuntimeTaskInstance" else None}


def _map_index(task_instance: Any) -> int | None:
    index = getattr(task_instance, "map_index", None)
    return None if index is None or int(index) < 0 else int(index)


def _roll_back_after_task(ids: dict[str, Any]) -> list[str]:
    dag = _dag_of(ids["task"], ids["dag_id"])
    if dag is None or not begin_tasks(dag):
        return []
    reason = f"task {ids['task_id']} of run {ids['run_id']} failed with no retries left"
    return rollback_run(dag, ids["dag_id"], ids["run_id"], reason, failed_task_id=ids["task_id"],
                        task_instance=ids["runtime"], failed_map_index=ids["map_index"])


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
    """A task failed: roll back only when it has no retries left (a retry replaces its writes)."""
    try:
        ids = _failed_for_good(task_instance)
    except Exception:
        log.exception("airflow_txn listener: cannot read the failed task instance; its transaction's lease ends it")
        return
    if ids is not None:
        run_hosted(f"rollback after {ids['dag_id']}/{ids['run_id']}/{ids['task_id']} failed",
                   lambda: _roll_back_after_task(ids))


@hookimpl
def on_dag_run_failed(dag_run: Any, msg: str) -> None:
    """A DAG run failed (or was marked failed): roll back its transactions that are still active."""
    try:
        dag, dag_id, run_id = getattr(dag_run, "dag", None), str(dag_run.dag_id), str(dag_run.run_id)
    except Exception:
        log.exception("airflow_txn listener: cannot read the failed DAG run; its transactions' leases end them")
        return
    if dag is not None and not begin_tasks(dag):
        return

    def roll_back() -> list[str]:
        # a run marked failed through Airflow 3.2's REST API comes without its DAG (3.3 attaches it): the
        # serialized DAG from the metadata database, on a session of our own
        the_dag = dag if dag is not None else _dag_of(None, dag_id)
        if the_dag is None or not begin_tasks(the_dag):
            return []
        return rollback_run(the_dag, dag_id, run_id, f"DAG run {run_id} failed: {msg}")

    run_hosted(f"rollback of the failed run {dag_id}/{run_id}", roll_back)
