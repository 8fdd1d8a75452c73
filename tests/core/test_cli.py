"""The airflow-txn command line: every command on a real warehouse, JSON output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_txn import Warehouse
from airflow_txn.cli import main
from tests.helpers import events, make_tables


@pytest.fixture
def cli_wh(tmp_path: Path) -> tuple[Warehouse, list[str]]:
    url, root = f"sqlite:///{tmp_path / 'c.db'}", str(tmp_path / "root")
    wh = Warehouse.open(catalog=url, root=root)
    make_tables(wh)
    return wh, ["--catalog", url, "--root", root]


def run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> object:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_inspects_tables_transactions_and_log(cli_wh: tuple[Warehouse, list[str]],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    wh, opts = cli_wh
    with wh.begin(label="cli") as t:
        t.append("sales.events", events([1, 2, 3]))
    tables = run_json(capsys, [*opts, "tables"])
    assert {"table": "sales.events", "last_commit_csn": 2, "partition_by": ["day"]} in tables
    assert run_json(capsys, [*opts, "watermark"]) == {"readable_csn": 2}
    listed = run_json(capsys, [*opts, "list", "--state", "committed"])
    assert [r["tid"] for r in listed] == [t.tid]
    shown = run_json(capsys, [*opts, "show", t.tid])
    assert shown["state"] == "committed" and shown["tables"] == ["sales.events"]
    rows = run_json(capsys, [*opts, "read", "sales.events", "--csn", "2", "--limit", "2"])
    assert len(rows) == 2
    log = run_json(capsys, [*opts, "log"])
    assert log[0]["csn"] == 2
    manifest = run_json(capsys, [*opts, "manifest", "--table", "sales.events"])
    assert manifest["csn"] == 2 and list(manifest["tables"]) == ["sales.events"]


def test_rollback_recover_vacuum(cli_wh: tuple[Warehouse, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    wh, opts = cli_wh
    t = wh.begin()
    t.append("sales.events", events([7]))
    assert run_json(capsys, [*opts, "rollback", t.tid]) == {"tid": t.tid, "state": "rolled_back"}
    assert run_json(capsys, [*opts, "recover"])["rolled_forward"] == 0
    assert run_json(capsys, [*opts, "vacuum", "--retention", "0"])["parts_removed"] == 1


def test_errors_exit_1_with_message(cli_wh: tuple[Warehouse, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    _wh, opts = cli_wh
    assert main([*opts, "read", "sales.missing"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main([*opts, "show", "not-a-tid"]) == 1
    assert "malformed tid" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main([*opts, "frobnicate"])
    assert usage.value.code == 2
