"""A warehouse on SQLite for the Spark tests that do not need to run on both catalogs. The sessions (`spark`,
`connect_spark`, `any_spark`) are in tests/spark/sessions.py.

Tests here are marked `spark`; scripts/test.sh runs them in their own phase.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_txn import Warehouse


@pytest.fixture
def swh(tmp_path: Path) -> Iterator[Warehouse]:
    """A warehouse on a SQLite catalog (the Spark tests' default; `wh` runs on both catalogs)."""
    warehouse = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'catalog.db'}", root=str(tmp_path / "warehouse"))
    warehouse.init()
    yield warehouse
    warehouse.close()
