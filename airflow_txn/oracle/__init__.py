"""CSN oracles: where commit sequence numbers come from. `make_oracle` picks one from its spec."""

from __future__ import annotations

from airflow_txn.catalog import Catalog
from airflow_txn.errors import OracleUnavailableError
from airflow_txn.oracle.base import CsnOracle
from airflow_txn.oracle.sql import SqlOracle


def make_oracle(spec: str, catalog: Catalog) -> CsnOracle:
    """`sql` -> the catalog's own counter; `zookeeper://...` -> not available yet in this version."""
    if spec == "sql":
        return SqlOracle(catalog)
    raise OracleUnavailableError(
        f"oracle {spec!r} is not available in this version of airflow_txn; use oracle='sql'"
    )


__all__ = ["CsnOracle", "SqlOracle", "make_oracle"]
