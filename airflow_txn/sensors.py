"""The CSN sensor: `from airflow_txn.sensors import CommitCSNSensor`. Imports Airflow."""

from airflow_txn.airflow.sensors import CommitCSNSensor

__all__ = ["CommitCSNSensor"]
