"""Hooks of the airflow layer: TxnHook reaches a warehouse through an Airflow connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow._lazy import lazy_exports

if TYPE_CHECKING:
    from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook

__all__ = ["DEFAULT_CONN_ID", "TxnHook"]
__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "airflow_txn.airflow.hooks.txn"))
