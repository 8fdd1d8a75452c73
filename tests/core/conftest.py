"""Fixtures of the core tests that start worker processes (tests/core/workers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.core.workers.procs import Child, Spawn


@pytest.fixture
def spawn(catalog_url: str, root: Path) -> Iterator[Spawn]:
    """Start workers on this test's warehouse; every one still running at the end is killed (by pid)."""
    started: list[Child] = []

    def _spawn(mode: str, *args: object, **kwargs: Any) -> Child:
        child = Child(mode, catalog_url, root, *args, **kwargs)
        started.append(child)
        return child

    yield _spawn
    for child in started:
        child.kill()
