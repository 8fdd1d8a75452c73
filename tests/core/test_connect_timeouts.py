"""Every path that opens a catalog honours the configured connect_timeout (issue 29, item 4: fail fast): the
CLI's upgrade, doctor's oracle and recovery checks, the warehouse-id lookup of DAG parsing, the web page's
warehouses (tests/airflow/test_page_timeouts.py). A catalog server that does not answer is given up after that
time, and the error says which."""

from __future__ import annotations

import pytest

from airflow_txn import Warehouse
from airflow_txn.cli import main as cli_main
from airflow_txn.errors import CatalogUnavailableError

UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:9/none"  # the discard port: refused at once


def test_the_warehouse_id_lookup_takes_a_connect_timeout() -> None:
    with pytest.raises(CatalogUnavailableError, match=r"connect_timeout 3 s"):
        Warehouse.warehouse_id_at(UNREACHABLE, connect_timeout=3)


def test_the_cli_upgrade_uses_the_configured_connect_timeout(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AIRFLOW_TXN_CONNECT_TIMEOUT", "3")
    assert cli_main(["--catalog", UNREACHABLE, "--root", "/nonexistent", "upgrade"]) != 0
    assert "connect_timeout 3 s" in capsys.readouterr().err
