"""Warehouse tables as Airflow sees them: their Assets, the Asset URI scheme, the lineage the operators
report and what a reader DAG takes from the commits' asset events. Re-exports the asset helpers (listed in
public.py).

    tables.py        a table's identity, Asset, commit alias and commit-log watcher; a commit event's extra
    uris.py          the `airflow-txn` Asset URI scheme's handler (provider info `asset-uris`)
    lineage.py       what a task read and a commit made visible (TxnLineage), LineageMixin
    openlineage.py   a TxnLineage as the OpenLineage provider takes it
    readers.py       snapshot_of: the one snapshot a reader DAG reads at, from the commits' asset events

Importing this package loads no Airflow; the first use of a name below does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow import public as _public

if TYPE_CHECKING:  # what type checkers see; at run time the names below are imported on first use
    from airflow_txn.airflow.assets.readers import snapshot_of as snapshot_of
    from airflow_txn.airflow.assets.tables import commit_alias as commit_alias
    from airflow_txn.airflow.assets.tables import commit_watcher as commit_watcher
    from airflow_txn.airflow.assets.tables import table_asset as table_asset
    from airflow_txn.airflow.assets.tables import table_identity as table_identity
else:
    __all__ = _public.names(__name__)
    __getattr__ = _public.lazy_getattr(__name__)
