"""CSN oracles: where commit sequence numbers come from. `make_oracle` picks one from its spec."""

from __future__ import annotations

from airflow_txn.catalog import Catalog
from airflow_txn.errors import OracleUnavailableError
from airflow_txn.oracle.base import CsnOracle, ExternalLog
from airflow_txn.oracle.sql import SqlOracle


def make_oracle(spec: str, catalog: Catalog) -> CsnOracle:
    """`sql` -> the catalog's own counter; `zookeeper://host:port[,...]/chroot` -> ZooKeeper (kazoo)."""
    if spec == "sql":
        return SqlOracle(catalog)
    if spec.startswith("zookeeper://"):
        from airflow_txn.oracle.zookeeper_spec import ZooKeeperSpec

        parsed = ZooKeeperSpec.parse(spec)  # bad specs fail here, with or without kazoo
        try:
            from airflow_txn.oracle.zookeeper import ZooKeeperOracle
        except ImportError as exc:
            raise OracleUnavailableError(
                f"oracle {spec!r} needs the kazoo package: pip install 'airflow-txn[zookeeper]'"
            ) from exc
        return ZooKeeperOracle(parsed, catalog)
    raise OracleUnavailableError(
        f"oracle {spec!r} is not available: use 'sql' or 'zookeeper://host:port[,host:port]/chroot'"
    )


__all__ = ["CsnOracle", "ExternalLog", "SqlOracle", "make_oracle"]
