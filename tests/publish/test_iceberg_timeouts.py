"""The Iceberg catalog pyiceberg opens in the warehouse's own PostgreSQL is bounded like the catalog itself: a
server that does not answer fails the publish with PublishError naming it, within about `connect_timeout`, instead
of libpq's unbounded wait (pyiceberg's SQL catalog builds its own engine from the `uri` property, so the bound
travels in that URI). Real sockets (tests/harness/ports.py); the pytest timeout is the guard, nothing is timed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from airflow_txn.errors import PublishError
from airflow_txn.storage.location import resolve
from tests.harness import ports

pytest.importorskip("pyiceberg")

from airflow_txn.publish import iceberg


@pytest.fixture(params=["refused", "silent"])
def dead_port(request: pytest.FixtureRequest) -> Iterator[int]:
    with ports.dead_port(request.param) as port:
        yield port


def test_the_uri_carries_the_bound_unless_it_names_its_own(tmp_path: Path) -> None:
    location = resolve(str(tmp_path / "root"), {})
    given = iceberg.catalog_properties("postgresql+psycopg://u:p@db.example/c", location, {}, {}, connect_timeout=8)
    query = make_url(given["uri"]).query
    assert query["connect_timeout"] == "4" and query["keepalives"] == "1", query
    assert make_url(given["uri"]).password == "p"
    own = iceberg.catalog_properties("postgresql+psycopg://u@db.example/c?connect_timeout=30", location, {}, {},
                                     connect_timeout=8)
    assert make_url(own["uri"]).query["connect_timeout"] == "30"
    lite = iceberg.catalog_properties(f"sqlite:///{tmp_path / 'c.db'}", location, {}, {}, connect_timeout=8)
    assert lite["uri"] == f"sqlite:///{tmp_path / 'c.db'}"


@pytest.mark.timeout(90)
def test_an_iceberg_catalog_that_does_not_answer_fails_naming_it(dead_port: int, tmp_path: Path) -> None:
    location = resolve(str(tmp_path / "root"), {})
    url = f"postgresql+psycopg://u:s3cr3t@127.0.0.1:{dead_port}/c"
    properties = iceberg.catalog_properties(url, location, {}, {}, connect_timeout=4)
    with pytest.raises(PublishError, match=rf"127\.0\.0\.1:{dead_port}") as info:
        iceberg.open_catalog(properties)
    assert "s3cr3t" not in str(info.value)
