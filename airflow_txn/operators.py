"""The transaction and maintenance operators: `from airflow_txn.operators import ...` (the names: the
operators of airflow_txn/airflow/public.py). Importing this module is cheap; the first use of a name
imports Airflow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow import public as _public

if TYPE_CHECKING:  # what type checkers see; at run time the names are imported on first use
    from airflow_txn.airflow.operators import *
else:
    __all__ = _public.names(__name__)
    __getattr__ = _public.lazy_getattr(__name__)
