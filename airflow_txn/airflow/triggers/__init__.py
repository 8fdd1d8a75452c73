"""Triggers of the airflow layer, run in Airflow's triggerer (listed in public.py): CommitCSNTrigger (a deferred
CommitCSNSensor) and CommitLogTrigger (the event trigger of commit_watcher's AssetWatcher)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow import public as _public

if TYPE_CHECKING:  # what type checkers see; at run time the names below are imported on first use
    from airflow_txn.airflow.triggers.commits import CommitLogTrigger as CommitLogTrigger
    from airflow_txn.airflow.triggers.csn import CommitCSNTrigger as CommitCSNTrigger
else:
    __all__ = _public.names(__name__)
    __getattr__ = _public.lazy_getattr(__name__)
