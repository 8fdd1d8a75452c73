"""Airflow Assets for warehouse tables: one Asset per table (per connection) and the alias through
which CommitTransactionOperator emits one event per table a commit wrote, carrying its CSN. `table_uri`
is THE name of a table outside the warehouse: its Asset and its OpenLineage dataset (lineage.py) are both
spelled from it."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID
from airflow_txn.airflow.version_compat import Asset, AssetAlias

SCHEME = "airflow-txn"


def table_uri(table: str, warehouse: str = DEFAULT_CONN_ID) -> str:
    """The name of table `ns.name` of warehouse `warehouse` (what names the warehouse: today the connection
    id) outside the warehouse: `airflow-txn://<warehouse>/<ns.name>`. The table's Asset has it as URI; its
    OpenLineage dataset is namespace `airflow-txn://<warehouse>`, name `ns.name` (split_table_uri)."""
    return f"{SCHEME}://{warehouse}/{urllib.parse.quote(table, safe='.')}"


def split_table_uri(uri: str) -> tuple[str, str] | None:
    """(warehouse, table) of a URI made by table_uri(); None for any other URI."""
    parsed = urllib.parse.urlsplit(uri)
    table = urllib.parse.unquote(parsed.path.lstrip("/"))
    if parsed.scheme != SCHEME or not parsed.netloc or not table:
        return None
    return parsed.netloc, table


def table_asset(table: str, conn_id: str = DEFAULT_CONN_ID) -> Asset:
    """The Asset of warehouse table `ns.name` reached through connection `conn_id`:
    `airflow-txn://<conn_id>/<ns.name>` (table_uri). Schedule a DAG on it to run after each commit that wrote it."""
    return Asset(uri=table_uri(table, conn_id))


def table_of(asset: Any, conn_id: str = DEFAULT_CONN_ID) -> str | None:
    """The table an Asset made by table_asset() names (None for any other Asset)."""
    found = split_table_uri(getattr(asset, "uri", ""))
    return found[1] if found is not None and found[0] == conn_id else None


def commit_alias(conn_id: str = DEFAULT_CONN_ID) -> AssetAlias:
    """The alias CommitTransactionOperator emits its table events through (its default outlet)."""
    return AssetAlias(name=f"{SCHEME}-commits:{conn_id}")


def event_extra(table: str, csn: int, tid: str, metadata: Mapping[str, object] | None = None,
                tag: str | None = None) -> dict[str, Any]:
    """What every commit event carries: the table, the commit CSN (read exactly that snapshot), the tid and
    the transaction's metadata (the Airflow run that committed it: `{"airflow": {dag_id, run_id, ...}}`);
    and `tag`, the name the commit was tagged with (CommitTransactionOperator(tag=)), when it was."""
    extra = {"table": table, "csn": csn, "tid": tid, "metadata": dict(metadata or {})}
    if tag is not None:
        extra["tag"] = tag
    return extra
