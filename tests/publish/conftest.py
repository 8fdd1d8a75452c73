"""Fixtures of the publishing tests: warehouses that publish to a real pyiceberg SQL catalog in their own catalog
database (SQLite, and PostgreSQL when it is reachable), or as Delta tables, on a local root."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from airflow_txn import Warehouse


@pytest.fixture
def open_pub(catalog_url: str, tmp_path: Path) -> Iterator[Callable[..., Warehouse]]:
    """Open a handle on this test's warehouse (publishing to Iceberg unless publish= says otherwise: "delta", ...)."""
    opened: list[Warehouse] = []

    def _open(publish: str = "iceberg", root: str | None = None) -> Warehouse:
        wh = Warehouse.open(catalog=catalog_url, root=root or str(tmp_path / "warehouse"), publish=publish)
        opened.append(wh)
        wh.init()
        return wh

    yield _open
    for wh in opened:
        wh.close()


@pytest.fixture
def pub(open_pub: Callable[..., Warehouse]) -> Warehouse:
    return open_pub()
