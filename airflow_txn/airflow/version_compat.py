"""Every Airflow-version branch of the airflow layer, in one place (the providers' habit).

The layer targets Airflow 3 (the task SDK). Names that moved between 3.x releases are imported here
once; the rest of the layer imports them from this module, never from Airflow directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def get_base_airflow_version_tuple() -> tuple[int, int, int]:
    from airflow import __version__
    from packaging.version import Version

    version = Version(__version__)
    return version.major, version.minor, version.micro


AIRFLOW_V_3_0_PLUS: bool = get_base_airflow_version_tuple() >= (3, 0, 0)
AIRFLOW_V_3_1_PLUS: bool = get_base_airflow_version_tuple() >= (3, 1, 0)
AIRFLOW_V_3_2_PLUS: bool = get_base_airflow_version_tuple() >= (3, 2, 0)

if not AIRFLOW_V_3_0_PLUS:  # pragma: no cover - refused early with what to do
    raise ImportError("airflow_txn.airflow needs Airflow 3.0 or later: pip install 'airflow-txn[airflow]'")

from airflow.sdk import (  # noqa: E402
    Asset,
    AssetAlias,
    AssetWatcher,
    BaseOperator,
    BaseOperatorLink,
    BaseSensorOperator,
    Context,
    Param,
    PokeReturnValue,
    TaskGroup,
    TriggerRule,
    XComArg,
)
from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent  # noqa: E402

if AIRFLOW_V_3_1_PLUS:
    from airflow.sdk import BaseHook
else:  # pragma: no cover - Airflow 3.0
    from airflow.hooks.base import BaseHook  # type: ignore[no-redef,attr-defined,unused-ignore]
# The task SDK has its own exceptions since 3.2 (the task runner catches those); 3.0 and 3.1 raise and catch
# airflow.exceptions' (scripts/test_airflow_minor.sh runs the Airflow tests on 3.1).
if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk.exceptions import (
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSkipException,
        TaskDeferred,
    )
else:
    from airflow.exceptions import (  # type: ignore[no-redef,attr-defined,unused-ignore]
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSkipException,
        TaskDeferred,
    )



def pull_run_xcom(dag_id: str, run_id: str, task_id: str, task_instance: Any = None) -> Any:
    """The return value a task of a DAG run pushed (None if none), from a worker or a server process.

    In a task (a RuntimeTaskInstance) it goes through the task's own XCom channel; elsewhere (the
    scheduler, the API server, `dag.test()`) it reads Airflow's metadata database.
    """
    if task_instance is not None and hasattr(task_instance, "xcom_pull") and type(task_instance).__name__ == (
            "RuntimeTaskInstance"):
        return task_instance.xcom_pull(task_ids=task_id, dag_id=dag_id, key="return_value")
    from airflow.models.xcom import XComModel

    with own_session() as session:
        query = XComModel.get_many(run_id=run_id, dag_ids=dag_id, task_ids=task_id, key="return_value", limit=1)
        row = session.scalars(query).first()
        return None if row is None else XComModel.deserialize_value(row)


# Airflow 3.3 ships two copies of its metrics module: the server components (scheduler, triggerer,
# API server, DAG processor) set up the core one, task workers the task SDK's.
_STATS_MODULES = ("airflow._shared.observability.metrics.stats", "airflow.sdk._shared.observability.metrics.stats")


def airflow_stats() -> Any:
    """Airflow's metrics facade (incr, timing, gauge) as this process set it up: the first copy of the
    stats module that was initialized, else `airflow.sdk.observability.stats` (whose backend is a
    no-op until initialized), else (Airflow 3.0 / 3.1) `airflow.stats.Stats`."""
    import importlib

    for name in _STATS_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - older Airflow
            continue
        if getattr(module, "_factory", None) is not None:
            return module
    try:
        from airflow.sdk.observability import stats

        return stats
    except ImportError:  # pragma: no cover - Airflow 3.0 / 3.1
        from airflow.stats import Stats  # type: ignore[attr-defined,unused-ignore]

        return Stats


def airflow_conf() -> Any:
    """Airflow's configuration (airflow.cfg + AIRFLOW__SECTION__KEY variables) as the running process
    sees it: the task SDK's parser where it exists (workers), else airflow.configuration."""
    try:
        from airflow.sdk.configuration import conf
    except ImportError:  # pragma: no cover - Airflow 3.0
        from airflow.configuration import conf  # type: ignore[no-redef,unused-ignore]
    return conf


def load_serialized_dag(dag_id: str) -> Any:
    """The DAG as the scheduler knows it (serialized), from the metadata database; None if unknown."""
    from airflow.models.serialized_dag import SerializedDagModel

    with own_session() as session:
        return SerializedDagModel.get_dag(dag_id, session=session)


@contextmanager
def own_session() -> Iterator[Any]:
    """A metadata-database session of our own (Airflow's non-scoped factory): never the thread's scoped session,
    which in the scheduler loop is the loop's own, under prohibit_commit (committing or closing it kills the
    scheduler). Read-only use: rolled back and closed at the end."""
    from airflow import settings

    factory = getattr(settings, "NonScopedSession", None)
    if factory is None:  # pragma: no cover - an ORM that was never configured in this process
        raise RuntimeError("Airflow's metadata database is not configured in this process")
    session = factory()
    try:
        yield session
    finally:
        session.rollback()
        session.close()


def release_thread_session() -> None:
    """Remove this thread's scoped metadata session (`settings.Session`), if Airflow made one here: a thread of
    ours that looked something up through Airflow (a connection in the metastore) leaves no session behind."""
    try:
        from airflow import settings
    except ImportError:  # pragma: no cover - the layer needs Airflow
        return
    remove = getattr(getattr(settings, "Session", None), "remove", None)
    if callable(remove):
        remove()


__all__ = [
    "AIRFLOW_V_3_0_PLUS",
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSkipException",
    "Asset",
    "AssetAlias",
    "AssetWatcher",
    "BaseEventTrigger",
    "BaseHook",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "BaseTrigger",
    "Context",
    "Param",
    "PokeReturnValue",
    "TaskDeferred",
    "TaskGroup",
    "TriggerEvent",
    "TriggerRule",
    "XComArg",
    "airflow_conf",
    "airflow_stats",
    "load_serialized_dag",
    "own_session",
    "pull_run_xcom",
    "release_thread_session",
]
