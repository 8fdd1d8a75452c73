"""The transactions a DAG run began: the tids its BeginTransactionOperator tasks pushed to XCom, read
from Airflow's metadata database (as the listener finds them), so a run's transaction is found
whatever its label."""

from __future__ import annotations

import logging

from airflow_txn.airflow.plugins.listener import begin_tasks
from airflow_txn.airflow.version_compat import load_serialized_dag, pull_run_xcoms
from airflow_txn.errors import InvalidNameError
from airflow_txn.model.tid import Tid

log = logging.getLogger(__name__)


def run_tids(dag_id: str, run_id: str) -> list[str]:
    """The tids begun in run `run_id` of `dag_id`, every map index's of a mapped begin ([] for an unknown DAG or
    run, or a run whose begin task has not pushed one yet)."""
    try:
        dag = load_serialized_dag(dag_id)
    except Exception:  # no metadata database here, or a DAG that does not deserialize
        log.warning("cannot load DAG %s to find the transactions of run %s", dag_id, run_id, exc_info=True)
        return []
    tids = []
    for begin in begin_tasks(dag) if dag is not None else []:
        for value in pull_run_xcoms(dag_id, run_id, begin.task_id):  # every map index's, in a mapped task group
            try:
                tids.append(str(Tid.parse(str(value).strip())))
            except InvalidNameError:
                log.warning("XCom of %s.%s in run %s is not a tid: %r", dag_id, begin.task_id, run_id, value)
    return tids
