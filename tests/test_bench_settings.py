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
