"""Triggers of the airflow layer (run in Airflow's triggerer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow._lazy import lazy_exports

if TYPE_CHECKING:
    from airflow_txn.airflow.triggers.csn import CommitCSNTrigger

__all__ = ["CommitCSNTrigger"]
__getattr__ = lazy_exports(__name__, {"CommitCSNTrigger": "airflow_txn.airflow.triggers.csn"})
