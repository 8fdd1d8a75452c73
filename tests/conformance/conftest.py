"""Every case here runs on each engine path x root of tests/conformance/paths.py (`engine_path`, `root_kind`,
`cwh`: the warehouse on that root, `engine_session`: the path's Spark session or None)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_txn import Warehouse
from tests.conformance.paths import EnginePath, combinations, engine_session, open_warehouse

__all__ = ["engine_session"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test taking `engine_path` runs on each path x root (a test's `roots` attribute: only those roots)."""
    if "engine_path" in metafunc.fixturenames:
        metafunc.parametrize(("engine_path", "root_kind"), combinations(getattr(metafunc.function, "roots", None)))


@pytest.fixture
def cwh(request: pytest.FixtureRequest, root_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        engine_path: EnginePath) -> Iterator[Warehouse]:
    yield from open_warehouse(request, root_kind, tmp_path, monkeypatch)
