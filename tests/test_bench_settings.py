"""The benchmarks' PostgreSQL server (benchmarks/_bench.pg_admin): an explicit URL wins, then
$AIRFLOW_TXN_BENCH_PG, then the local server; an empty variable means "not set" (it was taken as the URL, and every
PostgreSQL row then said the server was unreachable)."""

from __future__ import annotations

import pytest

from benchmarks import _bench


def test_an_empty_variable_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_TXN_BENCH_PG", "")
    assert _bench.pg_admin() == _bench.PG_ADMIN
    monkeypatch.delenv("AIRFLOW_TXN_BENCH_PG")
    assert _bench.pg_admin() == _bench.PG_ADMIN


def test_an_explicit_url_then_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_TXN_BENCH_PG", "postgresql+psycopg://u@h:1/postgres")
    assert _bench.pg_admin() == "postgresql+psycopg://u@h:1/postgres"
    assert _bench.pg_admin("postgresql+psycopg://v@w:2/postgres") == "postgresql+psycopg://v@w:2/postgres"


def test_throw_away_databases_on_the_admin_urls_server() -> None:
    """The one owner of the benchmarks' PostgreSQL databases (B3, B6, B15, B16): URLs on the admin URL's server;
    no database asked for, no connection made; a server that cannot be reached is named with the reason."""
    closed = "postgresql+psycopg://nobody@127.0.0.1:1/postgres"
    assert _bench.pg_url(closed, "b3") == "postgresql+psycopg://nobody@127.0.0.1:1/b3"
    with _bench.pg_databases(closed) as urls:
        assert urls == []
    assert _bench.pg_execute(closed) == []
    why = _bench.pg_unreachable(closed)
    assert why is not None and why.startswith(f"PostgreSQL at {closed} unreachable: ")
