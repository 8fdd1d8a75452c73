"""Running DAGs with dag.test() and reading what they left in Airflow's metadata database."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa

from airflow_txn import Warehouse
from airflow_txn.airflow.version_compat import AIRFLOW_V_3_3_PLUS, dagbag_module, stats_facades

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
    import inspect

    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.utils.session import create_session

    dagbag = dagbag_module()
    manager = DagBundlesManager()
    with create_session() as session:
        manager.sync_bundles_to_db(session=session)
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        # a DagBag knows its bundle's name since 3.2 (3.1's dag.test() passes none)
        named = {"bundle_name": bundle.name} if "bundle_name" in inspect.signature(dagbag.DagBag).parameters else {}
        bag = dagbag.BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, **named)
        dagbag.sync_bag_to_db(bag, bundle.name, bundle.version)


@contextmanager
def recording_stats_backend(backend: Any) -> Iterator[None]:
    """Every copy of Airflow's stats facade (version_compat.stats_facades: core's and the task SDK's) set up with
    `backend`, as Airflow's components set up theirs; restored afterwards. Airflow 3.3's facade is the module
    (`initialize(factory=...)`: `_factory`, `_backend`, `_export_legacy_names`); 3.2's a `Stats` class holding
    `factory` and `instance` (`Stats.initialize(factory=...)`); 3.1's `airflow.stats.Stats` holds its `factory` on
    its metaclass and has no `initialize` (setting the factory and dropping the instance is what it does)."""
    facades = [facade for facade, _ in stats_facades()]
    saved: list[tuple[Any, ...]] = []
    for facade in facades:
        if isinstance(facade, ModuleType):
            saved.append((facade._factory, facade._backend, facade._export_legacy_names))
            facade.initialize(factory=lambda: backend, export_legacy_names=False)
        else:
            if hasattr(facade, "initialize"):
                saved.append((facade.factory, facade.instance, facade._instance_pid))
                facade.initialize(factory=lambda: backend)
            else:  # the metaclass's factory is called as a method of the class (Airflow's take `cls`)
                saved.append((type(facade).__dict__["factory"], facade.instance, facade._instance_pid))
                type.__setattr__(type(facade), "factory", lambda _cls: backend)
                type.__setattr__(facade, "instance", None)
    try:
        yield
    finally:
        for facade, values in zip(facades, saved, strict=True):
            if isinstance(facade, ModuleType):
                facade._factory, facade._backend, facade._export_legacy_names = values
                continue
            factory, instance, pid = values
            type.__setattr__(facade if hasattr(facade, "initialize") else type(facade), "factory", factory)
            type.__setattr__(facade, "instance", instance)
            type.__setattr__(facade, "_instance_pid", pid)


CONNECTION_FORM_PROBE = """
import json
from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService
[form] = [m for m in HookMetaService.hook_meta_data() if m.connection_type == "airflow_txn"]
print(json.dumps(form.model_dump(mode="json")))
"""


def connection_form() -> dict[str, Any]:
    """The `airflow_txn` connection form as the API server hands it to the UI (HookMetaService.hook_meta_data:
    standard_fields, extra_fields). In a process of its own: Airflow 3.1 builds the form from the hook class only
    while it stands in for WTForms, on its providers manager's first look at the hook (3.2 and later read the
    provider info), and this test process may have looked before."""
    import json
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", CONNECTION_FORM_PROBE], capture_output=True, text=True,
                            timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


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
    """(asset URI, partition key, event extra) of every Asset event the run's tasks emitted, sorted (Airflow 3.1's
    events have no partition key: None)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import literal, select

    key = getattr(AssetEvent, "partition_key", literal(None))
    with create_session() as session:
        rows = session.execute(select(AssetModel.uri, key, AssetEvent.extra)
                               .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                               .where(AssetEvent.source_run_id == dag_run.run_id))
        return sorted(((uri, key, dict(extra)) for uri, key, extra in rows), key=lambda r: (r[0], r[1] or ""))


def parse_dag(path: Path, dag_id: str) -> Any:
    """`dag_id` of DAG file `path`, parsed now (as a worker parses it: its table Assets name the warehouse the
    test's connection reaches, where the session's DagBag parsed the folder with no connection set)."""
    bag = dagbag_module().DagBag(dag_folder=str(path))
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
