"""Every Airflow-version branch of the airflow layer, in one place (the providers' habit).

The layer targets Airflow 3 (the task SDK). Names that moved between 3.x releases are imported here
once; the rest of the layer imports them from this module, never from Airflow directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any


def get_base_airflow_version_tuple() -> tuple[int, int, int]:
    from airflow import __version__
    from packaging.version import Version

    version = Version(__version__)
    return version.major, version.minor, version.micro


AIRFLOW_V_3_0_PLUS: bool = get_base_airflow_version_tuple() >= (3, 0, 0)
AIRFLOW_V_3_1_PLUS: bool = get_base_airflow_version_tuple() >= (3, 1, 0)
AIRFLOW_V_3_2_PLUS: bool = get_base_airflow_version_tuple() >= (3, 2, 0)
AIRFLOW_V_3_3_PLUS: bool = get_base_airflow_version_tuple() >= (3, 3, 0)

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


# Asset events with partition keys a task chooses: OutletEventAccessor.add_partitions, new in Airflow 3.3. In 3.2 an
# event's partition key is its DAG run's (TaskInstance.register_asset_changes; None for a run that is not
# partitioned) and a task has no way to set one; 3.1's events have no partition key at all. (The task SDK's
# execution-time context is loaded with airflow.sdk already.)
from airflow.sdk.execution_time.context import OutletEventAccessor  # noqa: E402

OUTLET_PARTITION_KEYS: bool = hasattr(OutletEventAccessor, "add_partitions")


def add_outlet_partitions(outlet_event: Any, keys: list[str]) -> bool:
    """Attach `keys` to an outlet Asset event (`outlet_events[asset]`); False (nothing attached) where the
    running Airflow cannot (3.2: the event carries its DAG run's partition key; 3.1: none)."""
    if not OUTLET_PARTITION_KEYS:
        return False
    outlet_event.add_partitions(keys)
    return True


def login_url(auth_manager: Any, next_url: str) -> str:
    """The auth manager's login page, coming back to `next_url`. Airflow 3.3's SimpleAuthManager puts `next` in the
    URL it returns; 3.2's ignores `next_url` (its login page reads `next` all the same, and 3.2's own /auth/login
    route appends it to that URL): appended here when the auth manager left it out."""
    from urllib.parse import parse_qs, urlencode, urlsplit

    url = str(auth_manager.get_url_login(next_url=next_url))
    query = urlsplit(url).query
    if "next" not in parse_qs(query):
        url += ("&" if query else "?") + urlencode({"next": next_url})
    return url


async def aget_connection(hook: Any, conn_id: str) -> Any:
    """Connection `conn_id` looked up without blocking the event loop (a trigger's), as `hook.aget_connection`;
    AirflowNotFoundException when it is not defined. Where the asynchronous lookup finds nothing, the synchronous
    one is asked too, in a thread: Airflow 3.1's `dag.test()` runs a trigger inline where the asynchronous lookup
    misses even an AIRFLOW_CONN_* connection that the task's own (synchronous) lookup finds."""
    import asyncio

    try:
        return await hook.aget_connection(conn_id)
    except AirflowNotFoundException:
        return await asyncio.to_thread(hook.get_connection, conn_id)


@cache
def multi_team_auth() -> bool:
    """Whether auth managers know teams (multi-team mode, `[core] multi_team`, since Airflow 3.2): their
    filter_authorized_dag_ids takes the DAGs' `team_name`. Airflow 3.1 has no multi-team mode."""
    import inspect

    from airflow.api_fastapi.auth.managers.base_auth_manager import BaseAuthManager

    return "team_name" in inspect.signature(BaseAuthManager.filter_authorized_dag_ids).parameters


def filter_authorized_dag_ids(auth_manager: Any, *, dag_ids: set[str], user: Any, method: str,
                              team_name: str | None) -> set[str]:
    """Those of `dag_ids` (all of team `team_name`) that `user` may `method`, as `auth_manager` decides in one
    call; the team is passed where auth managers know teams (multi_team_auth), else it is None (3.1)."""
    team = {"team_name": team_name} if multi_team_auth() else {}
    return set(auth_manager.filter_authorized_dag_ids(dag_ids=dag_ids, user=user, method=method, **team))


def mapped_group_ids(task: Any) -> list[str]:
    """The ids of the mapped task groups `task` is in, innermost first, for a live or a serialized task ([] outside
    any, or for a task object that cannot say). Each map index of such a group runs every task in it once: a
    transaction_group's begin there begins one transaction per map index."""
    try:
        return [group.group_id for group in task.iter_mapped_task_groups()]
    except Exception:  # a task object without its groups
        return []


def pull_run_xcoms(dag_id: str, run_id: str, task_id: str, task_instance: Any = None,
                   map_index: int | None = None) -> list[Any]:
    """The return values a task of a DAG run pushed: one for a task that is not mapped, one per map index for a
    mapped one (a task in a mapped task group included), only map index `map_index`'s when given; [] if none.

    In a task (a RuntimeTaskInstance) it goes through the task's own XCom channel; elsewhere (the
    scheduler, the API server, `dag.test()`) it reads Airflow's metadata database.
    """
    if task_instance is not None and hasattr(task_instance, "xcom_pull") and type(task_instance).__name__ == (
            "RuntimeTaskInstance"):
        by_index = {} if map_index is None else {"map_indexes": map_index}
        found = task_instance.xcom_pull(task_ids=task_id, dag_id=dag_id, key="return_value", **by_index)
        # one value when one was pushed (or asked for), a list of every map index's otherwise
        values = found if isinstance(found, list) and map_index is None else [found]
        return [value for value in values if value is not None]
    from airflow.models.xcom import XComModel

    with own_session() as session:
        query = XComModel.get_many(run_id=run_id, dag_ids=dag_id, task_ids=task_id, key="return_value",
                                   map_indexes=map_index)
        rows = sorted(session.scalars(query), key=lambda row: row.map_index)
        return [value for value in map(XComModel.deserialize_value, rows) if value is not None]


# Where Airflow keeps its metrics facade, found by what is there. Airflow 3.2 and 3.3 ship two copies of their
# metrics module: the server components (scheduler, triggerer, API server, DAG processor) set up the core one, task
# workers the task SDK's. In 3.3 the module is the facade (module functions incr/timing/gauge, set up by
# `initialize(factory=...)`, which sets the module's `_factory`); in 3.2 it is the module's `Stats` class (a
# metaclass forwards to the backend; `Stats.initialize(factory=...)` sets `Stats.factory`, which the first use of a
# copy nobody set up sets to NoStatsLogger). Airflow 3.1 has neither copy: one `airflow.stats.Stats` class of that
# shape, shared by servers and workers (its metaclass chose `factory` from [metrics] when it was created).
_STATS_MODULES = ("airflow._shared.observability.metrics.stats", "airflow.sdk._shared.observability.metrics.stats")
_STATS_MODULE_BEFORE_3_2 = "airflow.stats"


def stats_facades() -> list[tuple[Any, Any]]:
    """(facade, its factory or None) of each copy of the stats module this Airflow has, core's first: a module
    with `_factory` is the facade itself (3.3), else its `Stats` class is (3.2; 3.1's one `airflow.stats`)."""
    import importlib

    facades = []
    for name in _STATS_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # Airflow 3.1
            continue
        if hasattr(module, "_factory"):
            facades.append((module, getattr(module, "_factory", None)))
        else:
            stats = module.Stats
            facades.append((stats, getattr(stats, "factory", None)))
    if not facades:  # Airflow 3.1 (importing it on 3.3 is deprecated: looked up only where the copies are not)
        stats = importlib.import_module(_STATS_MODULE_BEFORE_3_2).Stats
        facades.append((stats, getattr(stats, "factory", None)))
    return facades


def airflow_stats() -> Any:
    """Airflow's metrics facade (incr, timing, gauge) as this process set it up: the first copy of the
    stats module that was initialized (with a real backend first, then with Airflow's no-op one), else the
    task SDK's (whose backend is a no-op until initialized)."""
    facades = stats_facades()
    for facade, factory in facades:
        if factory is not None and getattr(factory, "__name__", "") != "NoStatsLogger":
            return facade
    for facade, factory in facades:
        if factory is not None:
            return facade
    return facades[-1][0]


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


@cache
def provider_cli_commands() -> bool:
    """Whether this Airflow adds a provider's `cli` commands (the provider info's `cli`) to the `airflow`
    command: since 3.2 (`airflow txn ...`). Airflow 3.1 has no such entry: there the commands are `airflow-txn
    --conn-id ID ...` alone."""
    from airflow.providers_manager import ProvidersManager

    return hasattr(ProvidersManager, "cli_command_functions")


def connection_form_widgets(conn_fields: dict[str, Any]) -> dict[str, Any]:
    """The provider info's `conn-fields` as the WTForms fields a hook's `get_connection_form_widgets()` returns.

    Airflow 3.2 and later read a connection type's form from the provider info (`conn-fields`,
    `ui-field-behaviour`) and then never call the hook's methods. Airflow 3.1 reads it only from the hook class,
    and only where WTForms imports: the API server's connection form imports it with WTForms and Flask-AppBuilder
    replaced by stand-ins (HookMetaService), a process without them gets no form. A number is a text field
    here (3.1 allows text, integer, password and boolean fields; a connection's fields are read as text)."""
    # not installed with Airflow: the API server puts stand-ins in their place while it reads the form
    from flask_appbuilder.fieldwidgets import BS3TextFieldWidget  # type: ignore[import-not-found,unused-ignore]
    from flask_babel import lazy_gettext  # type: ignore[import-not-found,unused-ignore]
    from wtforms import StringField  # type: ignore[import-untyped,import-not-found,unused-ignore]
    from wtforms.validators import Optional  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return {name: StringField(lazy_gettext(field["label"]), widget=BS3TextFieldWidget(),
                              description=field.get("description", ""), validators=[Optional()],
                              default=field.get("schema", {}).get("default"))
            for name, field in conn_fields.items()}


def connection_field_behaviour(behaviour: dict[str, Any]) -> dict[str, Any]:
    """The provider info's `ui-field-behaviour` (`hidden-fields`, ...) as a hook's `get_ui_field_behaviour()`
    returns it (`hidden_fields`, ...), for Airflow 3.1 (connection_form_widgets)."""
    return {key.replace("-", "_"): value for key, value in behaviour.items()}


# Names the tests and the demo reach in Airflow that moved between 3.x minors: looked up here too, so that every
# version difference has this one owner.

def dagbag_module() -> Any:
    """The module of Airflow's DagBag, BundleDagBag and sync_bag_to_db (what the DAG processor parses with):
    `airflow.dag_processing.dagbag` since 3.2, `airflow.models.dagbag` in 3.1 (which 3.2 and 3.3 keep as a
    deprecated alias)."""
    import importlib

    try:
        return importlib.import_module("airflow.dag_processing.dagbag")
    except ImportError:  # Airflow 3.1
        return importlib.import_module("airflow.models.dagbag")


def listener_managers() -> list[Any]:
    """Every listener manager a plugin's listeners are registered with: the core one (scheduler, API server,
    DAG processor, triggerer) and, since 3.2, the task SDK's (the task runner); 3.1's task runner uses the core one."""
    from airflow.listeners.listener import get_listener_manager

    managers = [get_listener_manager()]
    try:
        from airflow.sdk.listener import get_listener_manager as task_sdk_listener_manager
    except ImportError:  # Airflow 3.1
        return managers
    return [*managers, task_sdk_listener_manager()]


def task_runtime_hooks() -> Any:
    """The connection types (hook infos by type) a task sees: the task SDK's providers manager since 3.2
    (ProvidersManagerTaskRuntime), the core's ProvidersManager in 3.1."""
    try:
        from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
    except ImportError:  # Airflow 3.1
        from airflow.providers_manager import ProvidersManager

        return ProvidersManager().hooks  # type: ignore[no-untyped-call,unused-ignore]
    return ProvidersManagerTaskRuntime().hooks  # type: ignore[no-untyped-call,unused-ignore]


def loaded_plugins() -> tuple[list[Any], dict[str, str]]:
    """Airflow's plugins as a component loads them, and the import errors by source: `_get_plugins()` since
    3.2; 3.1 loads them into its module's `plugins` and `import_errors` (ensure_plugins_loaded)."""
    from airflow import plugins_manager

    get_plugins = getattr(plugins_manager, "_get_plugins", None)
    if get_plugins is not None:
        plugins, errors = get_plugins()
        return list(plugins), dict(errors)
    plugins_manager.ensure_plugins_loaded()  # Airflow 3.1
    return list(getattr(plugins_manager, "plugins", None) or []), dict(getattr(plugins_manager, "import_errors", {}))


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
    "AIRFLOW_V_3_3_PLUS",
    "OUTLET_PARTITION_KEYS",
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
    "add_outlet_partitions",
    "aget_connection",
    "airflow_conf",
    "airflow_stats",
    "connection_field_behaviour",
    "connection_form_widgets",
    "dagbag_module",
    "filter_authorized_dag_ids",
    "listener_managers",
    "load_serialized_dag",
    "loaded_plugins",
    "login_url",
    "mapped_group_ids",
    "multi_team_auth",
    "own_session",
    "provider_cli_commands",
    "pull_run_xcoms",
    "release_thread_session",
    "stats_facades",
    "task_runtime_hooks",
]
