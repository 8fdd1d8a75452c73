"""The airflow-txn command line on a real warehouse (SQLite, PostgreSQL, PostgreSQL + ZooKeeper): every
command in text and --json mode, the documented exit codes, doctor on healthy and broken set-ups,
progress on stderr only, and the installed console script."""

from __future__ import annotations

import contextlib
import getpass
import io
import json
import logging
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

import airflow_txn
from airflow_txn import ROLLBACK_CSN, Warehouse
from airflow_txn.catalog import txn_records
from airflow_txn.cli import exit_codes, main
from airflow_txn.cli.commands.maintenance import parse_partition
from airflow_txn.cli.commands.transactions import rollback_reason
from airflow_txn.errors import TableNotFoundError
from tests.helpers import events, make_tables, outlive_lease, storage_files

REPO = Path(__file__).resolve().parents[2]
UNREACHABLE_PG = "postgresql+psycopg://postgres@127.0.0.1:1/airflow_txn_nowhere"
COMMANDS = ["init", "tables", "list", "show", "rollback", "recover", "vacuum", "read", "watermark", "log",
            "manifest", "compact", "retention", "doctor", "tag", "tags", "untag", "adopt-root", "schema", "add-column",
            "rename-column", "drop-column", "alter-column", "set-nullable", "drop-table", "rename-table"]


@pytest.fixture
def opts(wh: Warehouse, catalog_url: str, root: Path | str) -> list[str]:
    """The warehouse's tables made, and the options that point the CLI at it (the oracle comes from the
    AIRFLOW_TXN_ORACLE the ZooKeeper variant sets)."""
    make_tables(wh)
    return ["--catalog", catalog_url, "--root", str(root)]


def run(capsys: pytest.CaptureFixture[str], args: list[str], code: int = 0) -> tuple[str, str]:
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == code, f"exit {rc} (wanted {code}) for {args}\nstdout: {out}\nstderr: {err}"
    return out, err


def run_json(capsys: pytest.CaptureFixture[str], args: list[str], code: int = 0) -> Any:
    out, _err = run(capsys, [*args, "--json"], code)
    return json.loads(out)


def assert_error(capsys: pytest.CaptureFixture[str], args: list[str], code: int, kind: str, words: str) -> None:
    """Exit `code`; stderr is ONE line `error: ...`; with --json stdout holds the same error as JSON."""
    out, err = run(capsys, args, code)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], err
    payload = run_json(capsys, args, code)["error"]
    assert payload["exit_code"] == code and payload["type"] == kind and words in payload["message"]


def text_fields(out: str) -> dict[str, str]:
    """The `key  value` lines of a command's text output (a title line, if any, left out)."""
    pairs = (re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.splitlines())
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def commit_events(wh: Warehouse, ids: list[int], label: str = "cli") -> str:
    with wh.begin(label=label) as t:
        t.append("sales.events", events(ids))
    return t.tid


# -- every command ---------------------------------------------------------------------------------------------
def test_init_creates_then_is_idempotent(catalog_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fresh-root"
    args = ["--catalog", catalog_url, "--root", str(root), "init"]
    first = run_json(capsys, args)
    assert first["root"] == str(root) and first["readable_csn"] == 1 and first["tables"] == 0 and root.is_dir()
    assert run_json(capsys, args) == first
    out, _ = run(capsys, args)
    assert text_fields(out) == {k: str(v) for k, v in first.items()}  # the text shows what --json does
    assert run_json(capsys, ["--catalog", catalog_url, "--root", str(root), "doctor"])["ok"] is True


def test_tables_watermark_log_read(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    tid = commit_events(wh, [1, 2, 3])
    listed = {r["table"]: r for r in run_json(capsys, [*opts, "tables"])}
    events_row = listed["sales.events"]
    assert {k: events_row[k] for k in ("partition_by", "last_commit_csn", "parts", "rows", "csn")} == {
        "partition_by": ["day"], "last_commit_csn": 2, "parts": 1, "rows": 3, "csn": 2}
    assert events_row["bytes"] > 0
    assert listed["sales.accounts"]["parts"] == 0 and listed["sales.accounts"]["last_commit_csn"] is None
    out, _ = run(capsys, [*opts, "tables"])
    assert "sales.events" in out and "sales.accounts" in out and "last_commit_csn" in out

    mark = run_json(capsys, [*opts, "watermark"])
    assert mark["readable_csn"] == 2 and mark["oracle_csn"] == 2 and mark["lag"] == 0
    assert mark["oracle"] == ("zookeeper" if os.environ.get("AIRFLOW_TXN_ORACLE") else "sql")
    shown = text_fields(run(capsys, [*opts, "watermark"])[0])
    assert (shown["readable_csn"], shown["oracle"], shown["oracle_csn"], shown["lag"]) == (
        "2", mark["oracle"], "2", "0")

    log = run_json(capsys, [*opts, "log", "--limit", "5"])
    assert [(r["csn"], r["tid"], r["tables"]) for r in log] == [(2, tid, ["sales.events"])]
    assert tid in run(capsys, [*opts, "log"])[0]

    rows = run_json(capsys, [*opts, "read", "sales.events", "--csn", "2", "--limit", "2"])
    assert (rows["table"], rows["csn"], rows["num_rows"], len(rows["rows"])) == ("sales.events", 2, 3, 2)
    everything = run_json(capsys, [*opts, "read", "sales.events", "--limit", "0"])
    assert sorted(r["id"] for r in everything["rows"]) == [1, 2, 3] and everything["csn"] == 2
    assert run_json(capsys, [*opts, "read", "sales.events", "--csn", "1"])["num_rows"] == 0
    out, _ = run(capsys, [*opts, "read", "sales.events", "--limit", "2"])
    assert "sales.events at CSN 2: 2 of 3 row(s)" in out and "2024-01-01" in out


def test_list_and_show(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    committed = commit_events(wh, [1, 2, 3])
    open_txn = wh.begin(label="still open")
    open_txn.append("sales.events", events([4]))
    rolled = wh.begin()
    rolled.append("sales.events", events([5]))
    rolled.rollback()
    by_state = {s: [r["tid"] for r in run_json(capsys, [*opts, "list", "--state", s])]
                for s in ("committed", "active", "rolled_back", "committing")}
    assert by_state == {"committed": [committed], "active": [open_txn.tid], "rolled_back": [rolled.tid],
                        "committing": []}
    assert len(run_json(capsys, [*opts, "list"])) == 3 and len(run_json(capsys, [*opts, "list", "--limit", "1"])) == 1
    out, _ = run(capsys, [*opts, "list"])
    assert all(t in out for t in (committed, open_txn.tid, rolled.tid)) and "still open" in out

    shown = run_json(capsys, [*opts, "show", committed])
    assert shown["state"] == "committed" and shown["commit_csn"] == 2 and shown["tables"] == ["sales.events"]
    [part] = shown["parts"]
    assert (part["partition"], part["rows"], part["role"], part["creation_csn"]) == (
        {"day": "2024-01-01"}, 3, "created", 2)
    out, _ = run(capsys, [*opts, "show", committed])
    assert f"transaction {committed}" in out and "sales.events: 1 part(s) written" in out
    assert "day=2024-01-01" in out and part["path"] in out


def test_rollback_recover_vacuum(wh: Warehouse, opts: list[str], root: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    committed = commit_events(wh, [1])
    t = wh.begin()
    t.append("sales.events", events([7]))
    staged = storage_files(root)
    assert run_json(capsys, [*opts, "rollback", t.tid, "--yes"]) == {
        "tid": t.tid, "state": "rolled_back", "reason": rollback_reason(None)}
    assert_error(capsys, [*opts, "rollback", committed], exit_codes.ERROR, "TransactionClosedError", "committed")
    report = run_json(capsys, [*opts, "recover"])
    assert report["rolled_forward"] == 0 and report["rolled_back"] == [] and report["missing_files"] == []
    shown = text_fields(run(capsys, [*opts, "recover"])[0])
    assert (shown["rolled_forward"], shown["rolled_back"], shown["watermark"], shown["missing_files"]) == (
        "0", "-", "2", "-")
    assert run_json(capsys, [*opts, "vacuum", "--retention", "0"])["parts_removed"] == 1
    assert storage_files(root) < staged
    assert sorted(wh.read("sales.events").column("id").to_pylist()) == [1]
    shown = text_fields(run(capsys, [*opts, "vacuum", "--retention", "0"])[0])
    assert (shown["parts_removed"], shown["dry_run"], shown["horizon"]) == ("0", "no", "2")  # nothing left


def test_recover_rolls_back_expired_with_progress_on_stderr(wh: Warehouse, opts: list[str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    t = wh.begin(lease_seconds=1.0)
    t.append("sales.events", events([1]))
    outlive_lease(wh, t.tid)
    doctor = run_json(capsys, [*opts, "doctor"])
    recovery = next(c for c in doctor["checks"] if c["name"] == "recovery")
    assert doctor["ok"] is True and recovery["status"] == "warn" and "1 expired transactions" in recovery["detail"]

    out, err = run(capsys, [*opts, "recover", "--json"])
    assert json.loads(out)["rolled_back"] == [t.tid]  # stdout is the JSON alone
    assert "roll back expired" in err and "1/1" in err and "check storage" in err
    assert "roll back expired" not in out
    assert next(c for c in run_json(capsys, [*opts, "doctor"])["checks"] if c["name"] == "recovery")["status"] == "ok"
    out, err = run(capsys, [*opts, "recover", "--quiet"])
    assert err == "" and "rolled_forward" in out


def test_vacuum_dry_run_deletes_nothing(wh: Warehouse, opts: list[str], root: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    t = wh.begin()
    t.append("sales.events", events([7]))
    t.rollback()
    before = storage_files(root)
    out, err = run(capsys, [*opts, "vacuum", "--retention", "0", "--dry-run", "--json"])
    would = json.loads(out)
    assert (would["dry_run"], would["parts_removed"]) == (True, 1) and storage_files(root) == before
    stages = {line.split()[0] for line in err.splitlines() if line.strip()}
    assert {"parts", "orphans"} <= stages  # its progress, one bar per stage, on stderr
    done = run_json(capsys, [*opts, "vacuum", "--retention", "0"])
    assert (done["dry_run"], done["parts_removed"]) == (False, 1) and storage_files(root) < before


def test_manifest(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    commit_events(wh, [1, 2])
    manifest = run_json(capsys, [*opts, "manifest", "--table", "sales.events"])
    assert manifest["csn"] == 2 and list(manifest["tables"]) == ["sales.events"]


def test_compact(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        commit_events(wh, [i])

    def events_stats() -> dict[str, Any]:
        return next(r for r in run_json(capsys, [*opts, "tables"]) if r["table"] == "sales.events")

    assert events_stats()["parts"] == 3
    out, err = run(capsys, [*opts, "compact", "sales.events", "--partition", "day=2024-01-01", "--json"])
    report = json.loads(out)
    assert (report["merged"], report["parts_before"], report["parts_after"]) == (1, 3, 1)
    assert "merge" in err and "1/1" in err
    assert (events_stats()["parts"], events_stats()["rows"]) == (1, 3)
    assert sorted(wh.read("sales.events").column("id").to_pylist()) == [0, 1, 2]
    out, _ = run(capsys, [*opts, "compact", "sales.events"])  # nothing left to merge
    shown = text_fields(out)
    assert out.startswith("compaction of sales.events\n")
    assert (shown["merged"], shown["parts_before"], shown["parts_after"]) == ("0", "1", "1")
    assert_error(capsys, [*opts, "compact", "sales.missing"], exit_codes.NOT_FOUND, "TableNotFoundError",
                 "sales.missing")


def test_retention(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    commit_events(wh, [1])
    shown = run_json(capsys, [*opts, "retention", "sales.events"])
    assert (shown["table"], shown["seconds"], shown["versions"]) == ("sales.events", None, None)
    assert run_json(capsys, [*opts, "retention", "sales.events", "--seconds", "60"])["seconds"] == 60
    both = run_json(capsys, [*opts, "retention", "sales.events", "--versions", "3"])
    assert (both["seconds"], both["versions"]) == (60, 3)  # setting one part keeps the other
    assert wh.retention("sales.events")["versions"] == 3
    cleared = run_json(capsys, [*opts, "retention", "sales.events", "--clear"])
    assert (cleared["seconds"], cleared["versions"]) == (None, None)
    shown = text_fields(run(capsys, [*opts, "retention", "sales.events"])[0])
    assert (shown["seconds"], shown["versions"], shown["horizon"]) == ("-", "-", "1")  # nothing vacuumed yet
    assert_error(capsys, [*opts, "retention", "sales.events", "--clear", "--versions", "2"], exit_codes.USAGE,
                 "UsageError", "--clear")
    assert_error(capsys, [*opts, "retention", "sales.events", "--versions", "0"], exit_codes.USAGE,
                 "UsageError", "--versions")
    assert_error(capsys, [*opts, "retention", "sales.nope"], exit_codes.NOT_FOUND, "TableNotFoundError", "sales.nope")


# -- exit codes and errors ---------------------------------------------------------------------------------------
def test_exit_codes(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    commit_events(wh, [1])
    missing_tid = "5-5-0123456789abcdef"
    assert_error(capsys, [*opts, "read", "sales.missing"], exit_codes.NOT_FOUND, "TableNotFoundError", "sales.missing")
    assert_error(capsys, [*opts, "show", missing_tid], exit_codes.NOT_FOUND, "TransactionNotFoundError", missing_tid)
    assert_error(capsys, [*opts, "rollback", missing_tid], exit_codes.NOT_FOUND, "TransactionNotFoundError",
                 missing_tid)
    assert_error(capsys, [*opts, "show", "not-a-tid"], exit_codes.USAGE, "InvalidNameError", "malformed tid")
    assert_error(capsys, [*opts, "read", "Bad Name"], exit_codes.USAGE, "InvalidNameError", "invalid table name")
    assert_error(capsys, [*opts, "read", "sales.events", "--csn", "0"], exit_codes.USAGE, "UsageError", "--csn")
    assert_error(capsys, [*opts, "read", "sales.events", "--csn", "abc"], exit_codes.USAGE, "UsageError", "--csn")
    assert_error(capsys, [*opts, "read", "sales.events", "--csn", "99"], exit_codes.ERROR, "TxnError",
                 "not readable yet")
    assert_error(capsys, [*opts, "frobnicate"], exit_codes.USAGE, "UsageError", "frobnicate")
    assert_error(capsys, [*opts, "list", "--state", "sleeping"], exit_codes.USAGE, "UsageError", "--state")
    assert_error(capsys, [*opts, "show"], exit_codes.USAGE, "UsageError", "TID")
    assert_error(capsys, [*opts, "vacuum", "--retention", "-1"], exit_codes.USAGE, "UsageError", "--retention")
    assert_error(capsys, [*opts, "compact", "sales.events", "--partition", "nonsense"], exit_codes.USAGE,
                 "UsageError", "--partition")
    _out, err = run(capsys, [], exit_codes.USAGE)  # no command: the help, on stderr
    assert "Commands:" in err


def test_engine_logs_go_to_stderr_warnings_only_unless_verbose(wh: Warehouse, opts: list[str],
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def staged() -> str:
        t = wh.begin(label="to roll back")
        t.append("sales.events", events([1]))
        return t.tid

    quiet = staged()
    out, err = run(capsys, [*opts, "rollback", quiet, "--json", "-y"])
    assert json.loads(out)["tid"] == quiet and "rolled back" not in err
    loud = staged()
    out, err = run(capsys, [*opts, "-v", "rollback", loud, "--json", "-y"])
    assert json.loads(out)["tid"] == loud  # the log lines stay off stdout
    assert any(f"INFO airflow_txn.core.rollback tid={loud} rolled back" in line for line in err.splitlines()), err
    monkeypatch.setenv("AIRFLOW_TXN_LOG_FORMAT", "json")
    structured = staged()
    out, err = run(capsys, [*opts, "rollback", structured, "--json", "--verbose", "--yes"])
    assert json.loads(out)["state"] == "rolled_back"
    records = [json.loads(line) for line in err.splitlines()]
    assert any(r["tid"] == structured and r["logger"] == "airflow_txn.core.rollback" and r["level"] == "INFO"
               and r["message"].startswith("rolled back") for r in records), err
    monkeypatch.setenv("AIRFLOW_TXN_LOG_FORMAT", "xml")
    assert_error(capsys, [*opts, "watermark"], exit_codes.USAGE, "UsageError", "AIRFLOW_TXN_LOG_FORMAT")
    engine = logging.getLogger("airflow_txn")  # main leaves the engine's logger as it found it
    assert engine.propagate and not [h for h in engine.handlers if getattr(h, "_airflow_txn", False)]


def test_unreachable_catalog_is_an_engine_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--catalog", UNREACHABLE_PG, "--root", str(tmp_path / "r"), "tables"]
    assert_error(capsys, args, exit_codes.ERROR, "CatalogUnavailableError", "cannot reach the catalog")


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--catalog", "notaurl", "'notaurl' is not a SQLAlchemy URL"),
    ("--catalog", "postgresql://user:secret@host:notaport/db", "the catalog URL is not a valid SQLAlchemy URL"),
    ("--catalog", "postgresql+nodriver://host/db", "knows no such database or driver"),
    ("--oracle", "bogus", "unknown oracle 'bogus'"),
    ("--oracle", "zookeeper://:x/", "bad ZooKeeper host"),
    ("--root", "ftp://host/warehouse", "the ftp:// scheme is not supported"),
])
def test_a_malformed_warehouse_option_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       option: str, value: str, words: str) -> None:
    """Exit 2, naming the value (a password never shown), before anything is opened or created."""
    where = {"--catalog": f"sqlite:///{tmp_path / 'c.db'}", "--root": str(tmp_path / "r"), "--oracle": "sql",
             option: value}
    args = [arg for name, given in where.items() for arg in (name, given)]
    for command in (["tables"], ["init"], ["upgrade"]):
        assert_error(capsys, [*args, *command], exit_codes.USAGE, "UsageError", words)
        _out, err = run(capsys, [*args, *command], exit_codes.USAGE)
        assert "secret" not in err
    assert list(tmp_path.iterdir()) == []


def test_options_after_the_command_and_help(opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    catalog, root = opts[1], opts[3]
    assert run_json(capsys, ["watermark", "--catalog", catalog, "--root", root])["readable_csn"] == 1
    out, _ = run(capsys, ["--help"])
    assert all(f"  {name} " in out for name in COMMANDS) and "--json" in out
    for name in COMMANDS:
        assert "Usage: airflow-txn " + name in run(capsys, [name, "--help"])[0]


def test_partition_option() -> None:
    assert parse_partition("day=2024-01-01") == {"day": "2024-01-01"}
    assert parse_partition("day=2024-01-01,region=eu") == {"day": "2024-01-01", "region": "eu"}
    assert parse_partition('{"tag": "a,b", "day": null}') == {"tag": "a,b", "day": None}
    assert parse_partition("expr=a=b") == {"expr": "a=b"}
    for bad in ("day", "=x", "{not json", "[1]"):
        with pytest.raises(click.BadParameter):
            parse_partition(bad)


# -- what a data engineer expects (issue 20, item 6) -------------------------------------------------------------
def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    out, err = run(capsys, ["--version"])
    assert out == f"airflow-txn {declared}\n" and err == "" and airflow_txn.__version__ == declared


def test_list_by_dag_and_run(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    labels = ["etl/run_1", "etl/run_2", "reports/run_1", "hand made", None, "etl/"]
    tids = {label: wh.begin(label=label).tid for label in labels}

    def listed(*args: str) -> list[str | None]:
        return sorted((r["label"] for r in run_json(capsys, [*opts, "list", *args])), key=str)

    assert listed("--dag-id", "etl") == ["etl/run_1", "etl/run_2"]  # "etl/" names no run, so no DAG either
    assert listed("--run-id", "run_1") == ["etl/run_1", "reports/run_1"]
    assert listed("--dag-id", "etl", "--run-id", "run_2") == ["etl/run_2"]
    assert listed("--dag-id", "etl", "--state", "rolled_back") == []
    assert listed("--dag-id", "nope") == [] and len(listed()) == len(labels)
    out, _ = run(capsys, [*opts, "list", "--dag-id", "reports"])
    assert tids["reports/run_1"] in out and tids["etl/run_1"] not in out
    assert run(capsys, [*opts, "list", "--dag-id", "nope"])[0].strip() == "no transactions"


def test_short_tids(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`show` and `rollback` take a unique prefix of a tid (`Warehouse.resolve_tid`), like git's hashes."""
    txns = [wh.begin(label=f"t{i}") for i in range(12)]  # tids 1-1-<host> ... 1-12-<host>
    first, second = txns[0].tid, txns[1].tid
    assert first.startswith("1-1-") and second.startswith("1-2-")
    assert run_json(capsys, [*opts, "show", first[:6]])["tid"] == first  # "1-1-xx": 1-10-, 1-11- do not match
    assert run_json(capsys, [*opts, "show", f"  {second[:5]} "])["label"] == "t1"
    ambiguous = run_json(capsys, [*opts, "show", "1-1"], exit_codes.USAGE)["error"]
    assert ambiguous["type"] == "InvalidNameError" and "ambiguous" in ambiguous["message"]
    assert all(t.tid in ambiguous["message"] for t in (txns[0], txns[9], txns[10], txns[11]))  # 1-1-, 1-10-...
    many = run_json(capsys, [*opts, "show", "1-"], exit_codes.USAGE)["error"]["message"]
    assert many.endswith(", ...; give more of the tid")
    assert sum(t.tid in many for t in txns) == 10  # it names ten of the twelve
    assert_error(capsys, [*opts, "show", "9-"], exit_codes.NOT_FOUND, "TransactionNotFoundError", "'9-'")
    assert_error(capsys, [*opts, "rollback", "1-99"], exit_codes.NOT_FOUND, "TransactionNotFoundError", "'1-99'")
    assert_error(capsys, [*opts, "show", "1-x"], exit_codes.USAGE, "InvalidNameError", "malformed tid")
    assert run_json(capsys, [*opts, "rollback", second[:6], "-y"])["tid"] == second
    assert wh.transaction_info(second)["state"] == "rolled_back" and wh.transaction_info(first)["state"] == "active"


def test_show_says_withdrawn(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    t = wh.begin()
    t.append("sales.events", events([1]))
    t.rollback()
    out, _ = run(capsys, [*opts, "show", t.tid, "--json"])
    [part] = json.loads(out)["parts"]
    assert part["creation_csn"] is None and part["withdrawn"] is True  # no CSN: the marker is no number to print
    assert str(ROLLBACK_CSN) not in out
    out, _ = run(capsys, [*opts, "show", t.tid])
    assert "sales.events: 1 part(s) written (" in out and ", 1 withdrawn), 0 removed" in out
    [row] = [line for line in out.splitlines() if part["path"] in line]
    assert re.search(r"\bcreated\s+withdrawn\s+-", row) and str(ROLLBACK_CSN) not in out
    committed = commit_events(wh, [2])
    assert "withdrawn" not in run(capsys, [*opts, "show", committed])[0]
    [part] = run_json(capsys, [*opts, "show", committed])["parts"]
    assert part["creation_csn"] == 2 and part["withdrawn"] is False


def test_vacuum_dry_run_says_would_remove(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    t = wh.begin()
    t.append("sales.events", events([7]))
    t.rollback()
    out, _ = run(capsys, [*opts, "vacuum", "--retention", "0", "--dry-run", "-q"])
    shown = text_fields(out)
    assert out.startswith("dry run: nothing was deleted\n") and "removed" not in out
    assert (shown["would remove parts"], shown["would remove orphan dirs"], shown["dry_run"]) == ("1", "0", "yes")
    assert shown["would free bytes"].endswith(("B", "KiB"))
    done = text_fields(run(capsys, [*opts, "vacuum", "--retention", "0", "-q"])[0])
    assert (done["parts_removed"], done["dry_run"]) == ("1", "no") and "would remove parts" not in done


class Terminal(io.StringIO):
    """Typed answers on a stdin that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_rollback_asks_first(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    t = wh.begin(label="nightly")
    t.append("sales.events", events([1]))
    args = [*opts, "rollback", t.tid]
    assert_error(capsys, args, exit_codes.USAGE, "UsageError", "pass --yes")  # stdin is no terminal here
    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    _out, err = run(capsys, args, exit_codes.ERROR)
    assert f"Roll back transaction {t.tid} (label nightly, 1 part(s) staged in sales.events)?" in err
    assert f"error: transaction {t.tid} was not rolled back (not confirmed)" in err
    assert wh.transaction_info(t.tid)["state"] == "active"

    monkeypatch.setattr(getpass, "getuser", lambda: "alice")
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    done = run_json(capsys, [*args, "--reason", "bad input data"])
    reason = "rolled back by alice with `airflow-txn rollback`: bad input data"
    assert done == {"tid": t.tid, "state": "rolled_back", "reason": reason}
    assert wh.transaction_info(t.tid)["failed_reason"] == reason

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # no terminal: nothing to ask about an ended transaction
    assert run_json(capsys, args)["state"] == "rolled_back"  # already rolled back: left as it is
    assert_error(capsys, [*opts, "rollback", commit_events(wh, [2])], exit_codes.ERROR, "TransactionClosedError",
                 "cannot roll back")


def test_rollback_keeps_an_earlier_failure_as_the_reason(wh: Warehouse, opts: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    t = wh.begin()
    with wh.runtime.catalog.write() as conn:  # as a statement that failed midway does (core/transaction.py)
        txn_records.mark_failed(conn, t.tid, "append failed: OSError: disk full")
    done = run_json(capsys, [*opts, "rollback", t.tid, "--yes", "--reason", "cleanup"])
    assert done == {"tid": t.tid, "state": "rolled_back", "reason": "append failed: OSError: disk full"}


def test_a_missing_table_points_at_the_tables_command(wh: Warehouse, opts: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["read", "sales.nope"], ["retention", "sales.nope"], ["compact", "sales.nope"]):
        assert_error(capsys, [*opts, *args], exit_codes.NOT_FOUND, "TableNotFoundError",
                     "table sales.nope does not exist: run `airflow-txn tables` to list them")
    with pytest.raises(TableNotFoundError, match=r"create it with Warehouse\.create_table") as raised:
        wh.read("sales.nope")  # Python callers keep the engine's own message
    assert raised.value.table == "sales.nope"


def test_conn_id_without_airflow_is_a_usage_error(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['airflow'] = None; from airflow_txn.cli import main; "
            "sys.exit(main(sys.argv[1:]))")  # Airflow not importable
    done = subprocess.run([sys.executable, "-c", code, "--conn-id", "warehouse", "list"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == exit_codes.USAGE and done.stdout == "", done
    assert "error: --conn-id reads an Airflow connection, but Airflow cannot be imported" in done.stderr
    assert "pip install 'airflow-txn[airflow]'" in done.stderr


def test_conn_id_names_the_whole_warehouse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_error(capsys, ["--conn-id", "warehouse", "--root", str(tmp_path), "tables"], exit_codes.USAGE,
                 "UsageError", "leave out --catalog, --root and --oracle")
    assert not any(tmp_path.iterdir())  # refused before anything was opened


# -- doctor ------------------------------------------------------------------------------------------------------
def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["status"] for c in report["checks"]}


def test_doctor_healthy(wh: Warehouse, opts: list[str], root: Path | str,
                        capsys: pytest.CaptureFixture[str]) -> None:
    commit_events(wh, [1])
    files = storage_files(root)
    report = run_json(capsys, [*opts, "doctor"])
    found = statuses(report)
    assert report["ok"] is True and "fail" not in found.values()
    names = ("config", "catalog", "catalog schema", "warehouse id", "storage root", "write probe", "root owner",
             "oracle", "recovery")
    assert {k: found[k] for k in names} == dict.fromkeys(names, "ok")
    [identity] = [c for c in report["checks"] if c["name"] == "warehouse id"]
    assert identity["detail"].startswith(wh.warehouse_id)  # what table_asset(warehouse_id=...) takes
    if wh.runtime.storage.local is not None:
        assert found["disk space"] in ("ok", "warn")
    else:  # an object store (check_object_store): no disk to measure; the bucket was reached
        assert "disk space" not in found
        detail = next(c["detail"] for c in report["checks"] if c["name"] == "storage root")
        assert "bucket reachable" in detail
    assert storage_files(root) == files  # the probe is gone
    out, err = run(capsys, [*opts, "doctor"])
    assert "healthy" in out and "write probe" in out and err == ""


@pytest.mark.parametrize("breakage", ["missing", "a file"])
def test_doctor_broken_root(wh: Warehouse, catalog_url: str, tmp_path: Path, breakage: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken-root"
    if breakage == "a file":
        broken.write_text("not a directory")
    args = ["--catalog", catalog_url, "--root", str(broken), "doctor"]
    report = run_json(capsys, args, exit_codes.DOCTOR_FAILED)
    found = statuses(report)
    assert report["ok"] is False and found["storage root"] == "fail" and found["catalog"] == "ok"
    assert broken.exists() == (breakage == "a file")  # doctor created nothing
    _out, err = run(capsys, args, exit_codes.DOCTOR_FAILED)
    assert err.strip() == "error: doctor: 1 check(s) failed: storage root"


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """Make a directory unwritable: chmod for a normal user; root ignores modes, so chattr +i for root."""
    directory.chmod(0o555)
    immutable = False
    try:
        if os.access(directory, os.W_OK):  # root
            immutable = subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode == 0
        if not immutable and os.access(directory, os.W_OK):
            pytest.skip("cannot make a directory read-only for this user on this file system")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
        directory.chmod(0o755)


@pytest.mark.local_root  # makes the root's directory read-only (chmod, chattr)
def test_doctor_read_only_root(wh: Warehouse, opts: list[str], root: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    with read_only(root):
        report = run_json(capsys, [*opts, "doctor"], exit_codes.DOCTOR_FAILED)
    found = statuses(report)
    assert found["storage root"] == "ok" and found["write probe"] == "fail"
    probe = next(c for c in report["checks"] if c["name"] == "write probe")
    assert "cannot create and delete files" in probe["detail"] and probe["hint"]
    assert not [p for p in root.iterdir() if p.name.startswith(".airflow_txn-doctor")]


def test_doctor_names_the_upgrade_a_catalog_without_the_newest_index_needs(wh: Warehouse, opts: list[str],
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A catalog at this schema version whose index revision never ran (schema_v7 without indexes_v3, D31): doctor
    says which index it lacks and names `airflow-txn upgrade`, as for an older schema."""
    import sqlalchemy as sa

    from airflow_txn.catalog import migrate, schema

    with wh.runtime.catalog.write() as conn:
        conn.execute(sa.text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = 'schema_v7'"))
        conn.execute(sa.text("UPDATE txn_meta SET value = :v WHERE key = 'index_version'"),
                     {"v": str(schema.INDEX_VERSION - 1)})
    report = run_json(capsys, [*opts, "doctor"])
    check = next(c for c in report["checks"] if c["name"] == "catalog schema")
    assert check["status"] == "warn"
    assert f"index version {schema.INDEX_VERSION - 1}" in check["detail"] and "indexes_v3" in check["detail"]
    assert "airflow-txn upgrade" in check["hint"]


def test_doctor_unreachable_or_missing_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    root.mkdir()
    report = run_json(capsys, ["--catalog", UNREACHABLE_PG, "--root", str(root), "doctor", "--timeout", "2"],
                      exit_codes.DOCTOR_FAILED)
    assert {k: v for k, v in statuses(report).items() if k in ("catalog", "oracle", "recovery", "write probe")} == {
        "catalog": "fail", "oracle": "skip", "recovery": "skip", "write probe": "ok"}
    missing = tmp_path / "nowhere" / "catalog.db"
    report = run_json(capsys, ["--catalog", f"sqlite:///{missing}", "--root", str(root), "doctor"],
                      exit_codes.DOCTOR_FAILED)
    catalog = next(c for c in report["checks"] if c["name"] == "catalog")
    assert catalog["status"] == "fail" and "does not exist" in catalog["detail"] and "init" in catalog["hint"]
    assert not missing.parent.exists()
    report = run_json(capsys, ["--catalog", "sqlite:///x.db", "--oracle", "bogus", "doctor"], exit_codes.DOCTOR_FAILED)
    assert statuses(report) == {"config": "fail"}


def test_doctor_unreachable_zookeeper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog, root = f"sqlite:///{tmp_path / 'c.db'}", str(tmp_path / "root")
    with Warehouse.open(catalog=catalog, root=root) as wh:
        wh.init()
    args = ["--catalog", catalog, "--root", root, "--oracle", "zookeeper://127.0.0.1:1/nowhere", "doctor",
            "--timeout", "1"]
    report = run_json(capsys, args, exit_codes.DOCTOR_FAILED)
    found = statuses(report)
    assert (found["catalog"], found["storage root"], found["oracle"], found["recovery"]) == ("ok", "ok", "fail", "skip")


# -- the installed console script ------------------------------------------------------------------------------------
def test_console_script(wh: Warehouse, opts: list[str]) -> None:
    script = Path(sys.executable).parent / "airflow-txn"
    assert script.exists(), "the package is not installed in this venv (pip install -e .)"
    commit_events(wh, [1, 2])
    done = subprocess.run([str(script), *opts, "--json", "watermark"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["readable_csn"] == 2
    bad = subprocess.run([str(script), *opts, "show", "nope"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == exit_codes.USAGE and bad.stdout == "" and bad.stderr.startswith("error: malformed tid")


HEAVY = ("sqlalchemy", "pyarrow", "pandas", "numpy", "airflow_txn.catalog", "airflow_txn.core.warehouse")


@pytest.mark.parametrize("args", [["--help"], ["list", "--help"], ["list", "--nope"], ["--version"]])
def test_help_and_usage_errors_load_no_engine(args: list[str]) -> None:
    """`--help` and a usage error answer before SQLAlchemy, pyarrow or the catalog are imported (what made
    `airflow-txn --help` take over a second): the commands import the engine when they run."""
    code = ("import sys; from airflow_txn.cli import main; code = main(sys.argv[1:]); "
            f"print([m for m in {HEAVY!r} if m in sys.modules]); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode in (exit_codes.OK, exit_codes.USAGE), done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_the_package_root_loads_its_names_on_first_use() -> None:
    code = ("import sys, airflow_txn; before = 'sqlalchemy' in sys.modules; "
            "from airflow_txn import Warehouse, results, TransactionInfo; "
            "print(before, Warehouse.__module__, results.__name__, 'sqlalchemy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "airflow_txn.core.warehouse", "airflow_txn.model.results", "True"], done


def test_table_changes_and_schema(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Each change is a transaction of its own; `schema` shows the columns at a snapshot (time travel)."""
    commit_events(wh, [1, 2])
    done = run_json(capsys, [*opts, "add-column", "sales.events", "qty", "int64", "--default", "3", "--not-null"])
    assert done["change"] == "add-column qty int64" and done["csn"] == 3 and done["table"] == "sales.events"
    run_json(capsys, [*opts, "rename-column", "sales.events", "value", "amount"])
    run_json(capsys, [*opts, "alter-column", "sales.events", "qty", "int8"], code=exit_codes.ERROR)  # a narrowing
    run_json(capsys, [*opts, "set-nullable", "sales.events", "qty", "true"])
    now = run_json(capsys, [*opts, "schema", "sales.events"])
    assert [c["name"] for c in now["columns"]] == ["id", "day", "amount", "qty"]
    assert now["columns"][3] == {"name": "qty", "type": "int64", "nullable": True, "column_id": 4, "default": 3}
    assert now["partition_by"] == ["day"]
    before = run_json(capsys, [*opts, "schema", "sales.events", "--csn", "2"])
    assert [c["name"] for c in before["columns"]] == ["id", "day", "value"]
    assert "qty" in run(capsys, [*opts, "schema", "sales.events"])[0]
    assert [r["qty"] for r in run_json(capsys, [*opts, "read", "sales.events"])["rows"]] == [3, 3]
    run_json(capsys, [*opts, "drop-column", "sales.events", "amount"])
    assert_error(capsys, [*opts, "add-column", "sales.events", "n", "no-such-type"], exit_codes.USAGE,
                 "UsageError", "not an Arrow type name")
    run_json(capsys, [*opts, "drop-table", "sales.accounts", "--yes"])
    assert [r["table"] for r in run_json(capsys, [*opts, "tables"])] == ["sales.events"]
    done = run_json(capsys, [*opts, "rename-table", "sales.events", "sales.happenings"])
    assert done["change"] == "rename-table sales.events sales.happenings"
    assert [r["table"] for r in run_json(capsys, [*opts, "tables"])] == ["sales.happenings"]
    assert len(run_json(capsys, [*opts, "read", "sales.happenings"])["rows"]) == 2
