"""CSN oracles: where commit sequence numbers come from. `make_oracle` picks one by its spec (registry.py)."""

from __future__ import annotations

from airflow_txn.oracle.base import CsnOracle, ExternalLog, OracleKind
from airflow_txn.oracle.registry import KINDS, kind_of, make_oracle
from airflow_txn.oracle.sql import SqlOracle

__all__ = ["KINDS", "CsnOracle", "ExternalLog", "OracleKind", "SqlOracle", "kind_of", "make_oracle"]
