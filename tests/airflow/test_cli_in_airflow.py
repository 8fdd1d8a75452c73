"""The command line and Airflow (airflow_txn/cli/in_airflow.py): `airflow-txn --conn-id ID` on the
warehouse of a real Airflow connection (an AIRFLOW_CONN_* variable, or a row of Airflow's metadata
database), and `airflow txn ...`, the provider's `cli` entry, run by the real `airflow` command."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.airflow.version_compat import provider_cli_commands
from airflow_txn.cli import exit_codes, in_airflow, main
from airflow_txn.cli.commands import cli
from tests.airflow.conftest import connection_json
from tests.helpers import events, make_tables

pytestmark = pytest.mark.airflow

PROCESS_CONTEXT = "_AIRFLOW_PROCESS_CONTEXT"


def committed(wh: Warehouse, label: str) -> str:
    make_tables(wh)
    with wh.begin(label=label) as t:
        t.append("sales.events", events([1, 2]))
    return t.tid


def airflow_console_on_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's console log handler writing to this test's stdout (called in the test's body, where capsys
    captures), as it writes to the stdout of a process of its own: its lines (the secrets masker's warnings,
    ...) must not reach stdout, which holds the JSON alone. Here it was set up on an earlier capture."""
    import airflow.sdk  # noqa: F401  (sets Airflow's logging up)

    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler:
            monkeypatch.setattr(handler, "stream", sys.stdout)


def run(capsys: pytest.CaptureFixture[str], args: list[str], code: int = exit_codes.OK) -> tuple[str, str]:
    capsys.readouterr()  # what the test logged before
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == code, f"exit {rc} (wanted {code}) for {args}\nstdout: {out}\nstderr: {err}"
    return out, err


# -- airflow-txn --conn-id --------------------------------------------------------------------------------------------
def test_conn_id_opens_the_warehouse_of_the_connection(wh: Warehouse, catalog_url: str, root: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(PROCESS_CONTEXT, raising=False)  # as in a shell: not one of Airflow's components
    airflow_console_on_stdout(monkeypatch)
    monkeypatch.setenv("AIRFLOW_CONN_TXN_CLI_TEST", connection_json(catalog_url, root))
    monkeypatch.setenv("AIRFLOW_TXN_CATALOG", f"sqlite:///{tmp_path}/elsewhere.db")  # the connection wins
    monkeypatch.setenv("AIRFLOW_TXN_ROOT", str(tmp_path / "elsewhere"))
    tid = committed(wh, "etl/run_1")
    listed = json.loads(run(capsys, ["--conn-id", "txn_cli_test", "list", "--json"])[0])
    assert [r["tid"] for r in listed] == [tid]
    shown = json.loads(run(capsys, ["show", tid[:6], "--conn-id", "txn_cli_test", "--json"])[0])
    assert shown["tables"] == ["sales.events"]
    doctor = json.loads(run(capsys, ["--conn-id", "txn_cli_test", "--json", "doctor"])[0])
    config = next(c for c in doctor["checks"] if c["name"] == "config")
    assert doctor["ok"] is True and str(root) in config["detail"]
    assert not (tmp_path / "elsewhere").exists()
    assert PROCESS_CONTEXT not in os.environ  # looked up in Airflow's server context, then left as it was


def test_a_missing_connection_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_NO_SUCH_WAREHOUSE", raising=False)
    out, err = run(capsys, ["--conn-id", "no_such_warehouse", "--json", "tables"], exit_codes.USAGE)
    error = json.loads(out)["error"]
    assert error["type"] == "UsageError" and error["exit_code"] == exit_codes.USAGE
    assert "Airflow has no connection 'no_such_warehouse'" in err and "AIRFLOW_CONN_NO_SUCH_WAREHOUSE" in err


def test_a_connection_in_the_metadata_database(airflow_db: None, wh: Warehouse, catalog_url: str, root: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Made with the UI or `airflow connections add`: found as `airflow connections get` finds it (outside
    Airflow's server context, Airflow's SDK would look at variables and external backends only)."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    monkeypatch.delenv(PROCESS_CONTEXT, raising=False)
    tid = committed(wh, "etl/run_db")
    with create_session() as session:
        session.add(Connection(conn_id="txn_cli_in_db", conn_type="airflow_txn",
                               extra=json.dumps({"catalog": catalog_url, "root": str(root)})))
    try:
        airflow_console_on_stdout(monkeypatch)
        listed = json.loads(run(capsys, ["--conn-id", "txn_cli_in_db", "list", "--json"])[0])
        assert [r["tid"] for r in listed] == [tid]
    finally:
        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id == "txn_cli_in_db").delete()
    assert PROCESS_CONTEXT not in os.environ


# -- airflow txn ----------------------------------------------------------------------------------------------------
def test_the_airflow_group_has_every_command() -> None:
    from airflow.cli.cli_config import ActionCommand, GroupCommand

    [group] = in_airflow.get_cli_commands()
    assert isinstance(group, GroupCommand) and group.name == "txn"
    assert all(isinstance(c, ActionCommand) for c in group.subcommands)
    assert [c.name for c in group.subcommands] == sorted(cli.commands)
    rollback = next(c for c in group.subcommands if c.name == "rollback")
    flags = {flag for arg in rollback.args for flag in arg.flags}
    assert {"txn_tid", "--conn-id", "--catalog", "--json", "-y", "--yes", "--reason", "-v"} <= flags


def test_argparse_values_become_the_same_airflow_txn_arguments() -> None:
    vacuum, compact, rollback = (cli.commands[name] for name in ("vacuum", "compact", "rollback"))
    assert in_airflow.to_click_args(vacuum, {"txn_retention": "7d", "txn_dry_run": True, "txn_json_output": False,
                                             "txn_verbose": 2, "txn_quiet": None}) == [
        "--retention", "7d", "--dry-run", "--verbose", "--verbose"]
    assert in_airflow.to_click_args(compact, {"txn_table": "sales.events", "txn_partitions": ["day=1", "day=2"]}) == [
        "--partition", "day=1", "--partition", "day=2", "--", "sales.events"]
    assert in_airflow.to_click_args(rollback, {"txn_tid": "1-2", "txn_yes": True, "txn_conn_id": "wh"}) == [
        "--yes", "--conn-id", "wh", "--", "1-2"]


def airflow_txn(*args: str, home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`airflow txn ...` in a fresh process with a throw-away AIRFLOW_HOME."""
    environment = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
                   "AIRFLOW__CORE__LOAD_EXAMPLES": "False", **env}
    return subprocess.run([str(Path(sys.executable).parent / "airflow"), "txn", *args], env=environment,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.skipif(not provider_cli_commands(), reason="Airflow 3.1 adds no provider commands to `airflow` "
                                                          "(version_compat.provider_cli_commands)")
@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)  # the commands themselves run on both: tests/core
def test_airflow_txn_runs_the_commands(wh: Warehouse, catalog_url: str, root: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The real `airflow` command: the group's help, a command on the `[airflow_txn] conn_id` connection
    (here airflow_txn_default) with JSON alone on stdout, and airflow-txn's exit codes."""
    tid = committed(wh, "etl/run_1")
    monkeypatch.delenv(PROCESS_CONTEXT, raising=False)
    env: dict[str, Any] = {"AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT": connection_json(catalog_url, root),
                           "AIRFLOW_TXN_ROOT": str(tmp_path / "not-this-one")}
    helped = airflow_txn("--help", home=tmp_path / "home", env=env)
    assert helped.returncode == 0, helped.stderr
    assert all(name in helped.stdout for name in cli.commands) and "[airflow_txn] conn_id" in helped.stdout

    listed = airflow_txn("list", "--dag-id", "etl", "--json", home=tmp_path / "home", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [r["tid"] for r in json.loads(listed.stdout)] == [tid]  # stdout: the JSON alone

    missing = airflow_txn("read", "sales.nope", home=tmp_path / "home", env=env)
    assert missing.returncode == exit_codes.NOT_FOUND and missing.stdout == ""
    assert "error: table sales.nope does not exist: run `airflow txn tables` to list them" in missing.stderr
    assert not (tmp_path / "not-this-one").exists()
