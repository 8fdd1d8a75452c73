"""The ZooKeeper oracle's registry entry (no kazoo here): `zookeeper://...` specs are parsed by spec.py, and the
oracle (oracle.py, which loads kazoo) is imported only when one is opened."""

from __future__ import annotations

import dataclasses
import importlib

from airflow_txn.catalog import Catalog
from airflow_txn.errors import OracleUnavailableError
from airflow_txn.model.secrets import mask_secrets
from airflow_txn.oracle.base import CsnOracle, OracleKind
from airflow_txn.oracle.zookeeper.spec import NAME, ZooKeeperSpec


class ZooKeeperKind(OracleKind):
    """`zookeeper://...`: the spec is parsed here; kazoo is imported only when an oracle is opened."""

    name = NAME
    form = "zookeeper://host:port[,host:port]/chroot"
    probe_hint = "check that ZooKeeper runs and the hosts and chroot are right"

    def parse(self, spec: str) -> ZooKeeperSpec:
        return ZooKeeperSpec.parse(spec)

    def open(self, spec: str, catalog: Catalog, timeout: float | None = None) -> CsnOracle:
        parsed = self.parse(spec)  # bad specs fail here, with or without kazoo
        if timeout is not None:
            parsed = dataclasses.replace(parsed, timeout=min(parsed.timeout, timeout))
        try:
            importlib.import_module("kazoo.client")
        except ImportError as exc:
            raise OracleUnavailableError(
                f"oracle {mask_secrets(spec)!r} needs the kazoo package: pip install 'airflow-txn[zookeeper]'"
            ) from exc
        from airflow_txn.oracle.zookeeper.oracle import ZooKeeperOracle

        return ZooKeeperOracle(parsed, catalog)


ZOOKEEPER = ZooKeeperKind()
