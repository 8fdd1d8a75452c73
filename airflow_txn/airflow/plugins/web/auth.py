"""Who may see and roll back a transaction on the plugin page: the Airflow user of the request (JWT
bearer token or the UI's session cookie, resolved by Airflow's own dependency) with permission on
every DAG the transaction belongs to, as the configured auth manager (SimpleAuthManager, FAB, ...)
decides: GET to see it, PUT (edit the DAG) to roll it back. A transaction with no known DAG needs the
permission on DAGs in general.

The warehouse-wide views (every table with its commit CSNs, the newest commit's tid and tables)
need read permission on the plugin's Airflow connection: whoever may read it holds the catalog's
URL and can read the whole catalog anyway, so the page shows them nothing new; everyone else sees
only the transactions of the DAGs they may read."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.configuration import conf

from airflow_txn.airflow import version_compat

__all__ = ["DagPermission", "GetUserDep", "login_url", "may_read_warehouse"]


def _multi_team() -> bool:
    """Multi-team mode: on (`[core] multi_team`) where this Airflow has it (3.2+: version_compat.multi_team_auth)."""
    return bool(conf.getboolean("core", "multi_team", fallback=False)) and version_compat.multi_team_auth()


def _team_of(dag_id: str | None) -> str | None:
    if dag_id is None or not _multi_team():
        return None
    from airflow.models.dag import DagModel

    team: str | None = DagModel.get_team_name(dag_id)
    return team


def _teams_of(dag_ids: set[str]) -> dict[str, str | None]:
    """The team of each DAG in multi-team mode (one query); {} otherwise (no DAG has a team)."""
    if not dag_ids or not _multi_team():
        return {}
    from airflow.models.dag import DagModel

    return dict(DagModel.get_dag_id_to_team_name_mapping(sorted(dag_ids)))


class DagPermission:
    """One user's GET or PUT permission on DAGs, asked once per DAG (a request checks many transactions)."""

    def __init__(self, user: Any, method: str) -> None:
        self.user = user
        self.method = method
        self._known: dict[str | None, bool] = {}

    def on(self, dag_id: str | None) -> bool:
        if dag_id not in self._known:
            details = DagDetails(id=dag_id, team_name=_team_of(dag_id))
            self._known[dag_id] = bool(get_auth_manager().is_authorized_dag(
                method=self.method, details=details, user=self.user))  # type: ignore[arg-type]
        return self._known[dag_id]

    def among(self, dag_ids: Iterable[str]) -> set[str]:
        """Those of `dag_ids` the user has the permission on, asked once per team of DAGs (the auth
        manager's filter_authorized_dag_ids, which a real auth manager answers in one query)."""
        wanted = set(dag_ids)
        unknown = {dag_id for dag_id in wanted if dag_id not in self._known}
        teams = _teams_of(unknown)
        by_team: dict[str | None, set[str]] = {}
        for dag_id in unknown:
            by_team.setdefault(teams.get(dag_id), set()).add(dag_id)
        for team, ids in by_team.items():
            allowed = version_compat.filter_authorized_dag_ids(
                get_auth_manager(), dag_ids=ids, user=self.user, method=self.method, team_name=team)
            self._known.update((dag_id, dag_id in allowed) for dag_id in ids)
        return {dag_id for dag_id in wanted if self._known[dag_id]}

    def on_all(self, dag_ids: Iterable[str]) -> bool:
        """Permission on each of `dag_ids`; with none, on DAGs in general."""
        dags: list[str | None] = list(dag_ids) or [None]
        return all(self.on(dag_id) for dag_id in dags)


def may_read_warehouse(user: Any, conn_id: str) -> bool:
    """May `user` see the whole warehouse (read permission on connection `conn_id`)?"""
    return bool(get_auth_manager().is_authorized_connection(
        method="GET", details=ConnectionDetails(conn_id=conn_id), user=user))


def user_name(user: Any) -> str:
    try:
        return str(user.get_name())
    except Exception:
        return "an unknown user"


def login_url(next_url: str) -> str:
    """The auth manager's login page, coming back to `next_url`."""
    return version_compat.login_url(get_auth_manager(), next_url)
