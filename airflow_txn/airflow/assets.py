"""Airflow Assets for warehouse tables: one Asset per table (per connection) and the alias through
which CommitTransactionOperator emits one event per table a commit wrote, carrying its CSN."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID
from airflow_txn.airflow.version_compat import Asset, AssetAlias

SCHEME = "airflow-txn"


def table_asset(table: str, conn_id: str = DEFAULT_CONN_ID) -> Asset:
    """The Asset of warehouse table `ns.name` reached through connection `conn_id`:
    `airflow-txn://<conn_id>/<ns.name>`. Schedule a DAG on it to run after each commit that wrote it."""
    return Asset(uri=f"{SCHEME}://{conn_id}/{urllib.parse.quote(table, safe='.')}")


def table_of(asset: Any, conn_id: str = DEFAULT_CONN_ID) -> str | None:
    """The table an Asset made by table_asset() names (None for any other Asset)."""
    uri = getattr(asset, "uri", "")
    prefix = f"{SCHEME}://{conn_id}/"
    return urllib.parse.unquote(uri[len(prefix):]) if uri.startswith(prefix) else None


def commit_alias(conn_id: str = DEFAULT_CONN_ID) -> AssetAlias:
    """The alias CommitTransactionOperator emits its table events through (its default outlet)."""
    return AssetAlias(name=f"{SCHEME}-commits:{conn_id}")


def event_extra(table: str, csn: int, tid: str, metadata: Mapping[str, object] | None = None) -> dict[str, Any]:
    """What every commit event carries: the table, the commit CSN (read exactly that snapshot), the tid and
    the transaction's metadata (the Airflow run that committed it: `{"airflow": {dag_id, run_id, ...}}`)."""
    return {"table": table, "csn": csn, "tid": tid, "metadata": dict(metadata or {})}
