"""AirflowTxnPlugin: registers the rollback listener and, in the API server, the transactions page (a
FastAPI app at `/airflow-txn`, a "Transactions" entry in the nav and a "Transaction" tab on every DAG run).

Two registrations name it, and Airflow loads each in a different mode: the `airflow.plugins` entry point
(read always) and the provider info's `plugins` (read only with `[core] lazy_discover_providers = False`,
after the entry points, where a second plugin of the same name is an import error). So the entry point's
target, `plugin_by_entry_point`, is the plugin when providers are discovered lazily (the default) and
None otherwise, which Airflow skips: the plugin is registered once either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin

from airflow_txn.airflow.plugins import listener
from airflow_txn.airflow.plugins.links import PAGE_PREFIX

URL_PREFIX = PAGE_PREFIX

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]


class LazyWebApp:
    """The ASGI app the API server mounts: imports the FastAPI app (airflow_txn.airflow.plugins.web.app) on
    its first request, so the workers and the scheduler, which load the plugin for its listener,
    never import the web layer."""

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        from airflow_txn.airflow.plugins.web.app import app

        await app(scope, receive, send)

    def __repr__(self) -> str:
        return "airflow_txn.airflow.plugins.web.app:app"


def base_path(path: str) -> str:
    """`path` under the API server's base URL (`[api] base_url`, e.g. https://host/airflow/)."""
    from urllib.parse import urlsplit

    base = urlsplit(conf.get("api", "base_url", fallback="") or "/").path.rstrip("/")
    return base + path


class AirflowTxnPlugin(AirflowPlugin):
    """Rolls back the transaction of a DAG run that fails and of a task that fails for good, and shows
    the warehouse's transactions in the Airflow UI."""

    name = "airflow_txn"
    listeners = [listener]
    fastapi_apps = [{"app": LazyWebApp(), "url_prefix": URL_PREFIX, "name": "airflow_txn transactions"}]
    external_views = [
        {"name": "Transactions", "href": base_path(f"{URL_PREFIX}/"), "destination": "nav",
         "url_route": "airflow-txn", "icon": base_path(f"{URL_PREFIX}/icon.svg"), "nav_top_level": True},
        {"name": "Transaction", "href": base_path(f"{URL_PREFIX}/?dag_id={{DAG_ID}}&run_id={{RUN_ID}}"),
         "destination": "dag_run", "url_route": "airflow-txn-run", "icon": base_path(f"{URL_PREFIX}/icon.svg")},
    ]


ENTRY_POINT_TARGET = "plugin_by_entry_point"
"""The name the `airflow.plugins` entry point loads from this module (pyproject.toml)."""


def entry_point_plugin() -> type[AirflowTxnPlugin] | None:
    """What the `airflow.plugins` entry point hands Airflow: the plugin, unless Airflow will load it from
    the provider info too (`[core] lazy_discover_providers = False`), as it decides that (airflow.settings)."""
    from airflow import settings

    return AirflowTxnPlugin if settings.LAZY_LOAD_PROVIDERS else None


def __getattr__(name: str) -> Any:
    if name == ENTRY_POINT_TARGET:  # decided when Airflow loads the entry point, not at import
        return entry_point_plugin()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
