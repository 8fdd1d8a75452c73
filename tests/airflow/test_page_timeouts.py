"""The Transactions page opens each warehouse with its configuration's connect_timeout (issue 29, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_txn.core.config import WarehouseConfig

pytestmark = pytest.mark.airflow


def test_the_web_pages_warehouses_keep_the_configs_connect_timeout(tmp_path: Path) -> None:
    from airflow_txn.airflow.plugins.web.warehouses import Warehouses

    config = WarehouseConfig.resolve(f"sqlite:///{tmp_path / 'c.db'}", str(tmp_path / "root"), None,
                                     connect_timeout=7)
    wh = Warehouses().get(config)
    try:
        assert wh.config.connect_timeout == 7
    finally:
        wh.close()
