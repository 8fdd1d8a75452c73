"""The Airflow layer: operators, CSN sensor and trigger, transaction_group, hook, listener, plugin.

    from airflow_txn.operators import BeginTransactionOperator, SparkTransactionOperator, ...
    from airflow_txn.sensors import CommitCSNSensor
    from airflow_txn.airflow import transaction_group, table_asset

Importing this package is cheap; the first use of a name below imports Airflow (3.0 or later).
Its names (every public name of the layer) are listed once, in public.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow import public as _public
from airflow_txn.airflow._lazy import require_airflow as require_airflow

if TYPE_CHECKING:  # what type checkers see; at run time the names below are imported on first use
    from airflow_txn.airflow.assets import *
    from airflow_txn.airflow.hooks import *
    from airflow_txn.airflow.operators import *
    from airflow_txn.airflow.operators.spark import spark_session as spark_session
    from airflow_txn.airflow.sensors import *
    from airflow_txn.airflow.task_group import TransactionTaskGroup as TransactionTaskGroup
    from airflow_txn.airflow.task_group import transaction_group as transaction_group
    from airflow_txn.airflow.triggers import *
else:
    __all__ = _public.names(__name__)
    __getattr__ = _public.lazy_getattr(__name__)
