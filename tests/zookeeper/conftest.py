"""Fixtures of the ZooKeeper oracle tests: warehouses on PostgreSQL + a real ZooKeeper, a raw kazoo client.

The session's standalone server comes from tests/conftest.py (`zookeeper_hosts`); tests that stop,
restart or kill servers start their own (tests.harness.zookeeper). Every warehouse gets a
chroot of its own, so tests never see each other's logs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from airflow_txn import Warehouse

OpenWh = Callable[..., Warehouse]


@pytest.fixture
def chroot() -> str:
    return f"/t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def make_wh(zookeeper_hosts: str, pg_schema_url: str, tmp_path: Path, chroot: str) -> Iterator[OpenWh]:
    """make_wh(hosts=..., catalog=..., root=..., **oracle options) -> a Warehouse with the ZooKeeper oracle."""
    opened: list[Warehouse] = []

    def _open(hosts: str | None = None, catalog: str | None = None, path: str | None = None,
              root: Path | None = None, **options: Any) -> Warehouse:
        query = urlencode({"timeout": 10, **options})
        spec = f"zookeeper://{hosts or zookeeper_hosts}{path or chroot}?{query}"
        wh = Warehouse.open(catalog=catalog or pg_schema_url, root=str(root or tmp_path / "warehouse"), oracle=spec)
        opened.append(wh)
        wh.init()
        return wh

    yield _open
    for wh in opened:
        wh.close()


@pytest.fixture
def zk(zookeeper_hosts: str) -> Iterator[Any]:
    """A plain kazoo client on the session's server, to look at what the oracle wrote."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper_hosts, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()
