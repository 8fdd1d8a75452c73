"""Running DAGs with dag.test() and reading what they left in Airflow's metadata database."""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from airflow_txn import Warehouse
from airflow_txn.airflow.version_compat import AIRFLOW_V_3_3_PLUS

BACKFILL_TABLES = ["shop.customers", "shop.orders", "shop.order_items"]
PROBE_SCHEMA = pa.schema([("id", pa.int64())])


def dag_test(dag: Any, **kwargs: Any) -> Any:
    """`dag.test(**kwargs)` after the DAG folder is written to Airflow's metadata database as the DAG processor
    writes it, as Airflow 3.3's dag.test() does on every call (apache/airflow#64884). Airflow 3.2's writes it only
    when the DAG has no version in the database yet: a later test would run against the DAGs (their Assets,
    naming the first test's warehouse) a previous test parsed, so no Asset of this test's warehouse would be
    registered, its commits' Asset events would be dropped and the DAGs scheduled on them never queued."""
    if not AIRFLOW_V_3_3_PLUS:
        sync_dag_folder()
    return dag.test(**kwargs)


def sync_dag_folder() -> None:
    """Parse every DAG bundle (here: the DAG folder) and write its DAGs to the metadata database (what 3.3's
    dag.test() does first, from airflow.sdk.definitions.dag.DAG.test)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    manager = DagBundlesManager()
    with create_session() as session:
        manager.sync_bundles_to_db(session=session)
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)


@contextmanager
def recording_stats_backend(backend: Any) -> Iterator[None]:
    """Both copies of Airflow's stats module (core's and the task SDK's) set up with `backend`, as Airflow's
    components set up theirs (`initialize(factory=...)`); restored afterwards. Airflow 3.3's module is the facade
    (`_factory`, `_backend`, `_export_legacy_names`), 3.2's has a `Stats` class holding `factory` and `instance`
    (version_compat.airflow_stats)."""
    modules = [importlib.import_module(m) for m in ("airflow._shared.observability.metrics.stats",
                                                    "airflow.sdk._shared.observability.metrics.stats")]
    if AIRFLOW_V_3_3_PLUS:
        saved = [(m._factory, m._backend, m._export_legacy_names) for m in modules]
        for module in modules:
            module.initialize(factory=lambda: backend, export_legacy_names=False)
    else:
        saved = [(m.Stats.factory, m.Stats.instance, m.Stats._instance_pid) for m in modules]
        for module in modules:
            module.Stats.initialize(factory=lambda: backend)
    try:
        yield
    finally:
        for module, (first, second, third) in zip(modules, saved, strict=True):
            if AIRFLOW_V_3_3_PLUS:
                module._factory, module._backend, module._export_legacy_names = first, second, third
            else:
                for name, value in (("factory", first), ("instance", second), ("_instance_pid", third)):
                    type.__setattr__(module.Stats, name, value)


def mark_run_failed(dag: Any, dag_run: Any, session: Any) -> None:
    """What PATCH /dags/{dag_id}/dagRuns/{run_id} {"state": "failed"} does: the run and its unfinished tasks set
    to failed, then the listeners' on_dag_run_failed. Airflow 3.3 has it as a service function
    (patch_dag_run_state); 3.2's route does the two steps itself (routes/public/dag_run.py, patch_dag_run)."""
    if AIRFLOW_V_3_3_PLUS:
        from airflow.api_fastapi.core_api.datamodels.dag_run import DagRunMutableStates
        from airflow.api_fastapi.core_api.services.public.dag_run import patch_dag_run_state

        patch_dag_run_state(dag=dag, dag_run=dag_run, state=DagRunMutableStates.FAILED, session=session)
        return
    from airflow.api.common.mark_tasks import set_dag_run_state_to_failed
    from airflow.listeners.listener import get_listener_manager

    set_dag_run_state_to_failed(dag=dag, run_id=dag_run.run_id, commit=True, session=session)
    get_listener_manager().hook.on_dag_run_failed(dag_run=dag_run, msg="")


def run_dag(dagbag: Any, dag_id: str, conf: dict[str, Any] | None = None) -> Any:
    """Run one DAG run of `dag_id` to its end in this process (triggers inline); returns the DagRun."""
    dag = dagbag.get_dag(dag_id)
    assert dag is not None, f"DAG {dag_id} not found"
    # every param explicitly: in-process runs reuse the task objects, whose params keep the last run's conf
    return dag_test(dag, run_conf={**{key: dag.params[key] for key in dag.params}, **(conf or {})})


def task_states(dag_run: Any) -> dict[str, tuple[str, int]]:
    """{task_id or task_id[map_index]: (state, try_number)} of a finished run."""
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = dag_run.get_task_instances(session=session)
        return {(ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"): (str(ti.state), ti.try_number)
                for ti in tis}


def xcom(dag_run: Any, task_id: str, map_index: int = -1) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id,
                                                 map_indexes=map_index, key="return_value")).first()
        return None if row is None else XComModel.deserialize_value(row)


def asset_events(dag_run: Any) -> list[tuple[str, dict[str, Any]]]:
    """(asset URI, event extra) of every Asset event the run's tasks emitted, sorted."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(AssetModel.uri, AssetEvent.extra)
                               .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                               .where(AssetEvent.source_run_id == dag_run.run_id))
        return sorted((uri, dict(extra)) for uri, extra in rows)


def asset_events_with_partitions(dag_run: Any) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(asset URI, partition key, event extra) of every Asset event the run's tasks emitted, sorted."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(AssetModel.uri, AssetEvent.partition_key, AssetEvent.extra)
                               .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                               .where(AssetEvent.source_run_id == dag_run.run_id))
        return sorted(((uri, key, dict(extra)) for uri, key, extra in rows), key=lambda r: (r[0], r[1] or ""))


def parse_dag(path: Path, dag_id: str) -> Any:
    """`dag_id` of DAG file `path`, parsed now (as a worker parses it: its table Assets name the warehouse the
    test's connection reaches, where the session's DagBag parsed the folder with no connection set)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(path))
    assert bag.import_errors == {}, bag.import_errors
    return bag.get_dag(dag_id)


def counts(wh: Warehouse, csn: int | None = None) -> dict[str, int]:
    return {t: wh.read(t, csn=csn).num_rows for t in BACKFILL_TABLES if t in wh.tables()}


def transactions_of(wh: Warehouse, dag_id: str) -> list[dict[str, Any]]:
    return [t for t in wh.transactions(limit=1000) if (t["label"] or "").startswith(f"{dag_id}/")]


def rendered_map_indexes(dag_run: Any, task_id: str) -> list[str]:
    """What the grid shows for each map index of a mapped task (its map_index_template, rendered)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return sorted(str(shown) for shown in session.scalars(select(TaskInstance.rendered_map_index).where(
            TaskInstance.run_id == dag_run.run_id, TaskInstance.dag_id == dag_run.dag_id,
            TaskInstance.task_id == task_id)))


def clear_and_run_again(dag: Any, dag_run: Any, task_id: str) -> Any:
    """Clear `task_id` of a finished run WITH its downstream tasks, as a user does in the grid (Clear,
    "Downstream" on: Airflow's own SerializedDAG.clear, which sets the tasks to no state and the run to
    queued), then run that SAME run to its end in this process as the scheduler would: the cleared tasks
    are scheduled again, each with its next try number. (dag.test() cannot: it deletes the run of its
    logical date and starts a new one.) Returns the DagRun, reloaded."""
    from airflow.models.dagbag import DBDagBag
    from airflow.models.dagrun import DagRun
    from airflow.sdk.definitions.dag import _run_task
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import select

    with create_session() as session:
        scheduler_dag = DBDagBag().get_latest_version_of_dag(dag.dag_id, session=session)
        assert scheduler_dag is not None
        cleared = scheduler_dag.partial_subset(task_ids=[task_id], include_downstream=True, include_upstream=False)
        scheduler_dag.clear(task_ids=list(cleared.task_dict), run_id=dag_run.run_id, session=session)
    with create_session() as session:
        run = session.scalar(select(DagRun).where(DagRun.dag_id == dag.dag_id, DagRun.run_id == dag_run.run_id))
        assert run is not None and run.state == DagRunState.QUEUED
        run.dag = scheduler_dag
        run.state = DagRunState.RUNNING  # what the scheduler does to a queued run it starts
        session.commit()
        for _ in range(600):  # dag.test()'s own loop, on this run (bounded: a stuck run fails the caller's check)
            if run.state != DagRunState.RUNNING:
                break
            session.expire_all()
            schedulable, _ = run.update_state(session=session)
            for ti in schedulable:
                if ti.state != TaskInstanceState.UP_FOR_RESCHEDULE:
                    ti.try_number += 1
                ti.state = TaskInstanceState.SCHEDULED
            session.commit()
            tis = run.get_task_instances(session=session)
            scheduled = [ti for ti in tis if ti.state == TaskInstanceState.SCHEDULED]
            for ti in scheduled:
                _run_task(ti=ti, task=dag.task_dict[ti.task_id], run_triggerer=True)
            if not scheduled:
                time.sleep(0.1)  # a task's state is being settled (as dag.test() waits, before it looks again)
    with create_session() as session:
        run = session.scalar(select(DagRun).where(DagRun.dag_id == dag.dag_id, DagRun.run_id == dag_run.run_id))
        session.expunge(run)  # loaded, and kept loaded: the session's commit expires only what it holds
        return run
