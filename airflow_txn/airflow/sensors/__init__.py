"""Sensors of the airflow layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow._lazy import lazy_exports

if TYPE_CHECKING:
    from airflow_txn.airflow.sensors.csn import CommitCSNSensor

__all__ = ["CommitCSNSensor"]
__getattr__ = lazy_exports(__name__, {"CommitCSNSensor": "airflow_txn.airflow.sensors.csn"})
