"""`Warehouse.tables(csn=, tag=)` (docs/DESIGN.md D27; docs/CONCEPTS.md, "Changing tables"): the tables that existed
at a snapshot, by the names they had there; typed errors for a CSN not readable yet or below the retention horizon,
like the other csn= reads. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.cli import main
from airflow_txn.errors import InvalidArgumentError, SnapshotTooOldError, TxnError

SCHEMA = pa.schema([("id", pa.int64())])


def test_tables_at_a_csn_lists_the_names_of_that_snapshot(wh: Warehouse) -> None:
    wh.create_table("ns.kept", SCHEMA)
    wh.create_table("ns.old", SCHEMA)
    wh.create_table("ns.gone", SCHEMA)
    with wh.begin() as t:
        t.append("ns.kept", pa.table({"id": [1]}))
    start = wh.readable_csn()
    t = wh.begin()
    t.create_table("ns.made", SCHEMA)
    t.append("ns.made", pa.table({"id": [2]}))
    made = t.commit()
    t = wh.begin()
    t.rename_table("ns.old", "ns.new")
    renamed = t.commit()
    t = wh.begin()
    t.drop_table("ns.gone")
    dropped = t.commit()
    t = wh.begin()  # rolled back: changes nothing at any CSN
    t.create_table("ns.never", SCHEMA)
    t.drop_table("ns.kept")
    t.rollback()

    assert wh.tables(csn=start) == ["ns.gone", "ns.kept", "ns.old"]
    assert wh.tables(csn=made) == ["ns.gone", "ns.kept", "ns.made", "ns.old"]
    assert wh.tables(csn=renamed) == ["ns.gone", "ns.kept", "ns.made", "ns.new"]
    assert wh.tables(csn=dropped) == ["ns.kept", "ns.made", "ns.new"]
    assert wh.tables() == wh.tables(csn=wh.readable_csn()) == ["ns.kept", "ns.made", "ns.new"]
    for name in wh.tables(csn=start):  # every name listed reads at that snapshot
        wh.read(name, csn=start)

    wh.tag("before", csn=start)
    assert wh.tables(tag="before") == ["ns.gone", "ns.kept", "ns.old"]
    with pytest.raises(InvalidArgumentError):
        wh.tables(csn=start, tag="before")


def test_tables_refuses_a_csn_in_the_future_or_below_the_horizon(wh: Warehouse) -> None:
    wh.create_table("ns.a", SCHEMA)
    with wh.begin() as t:
        t.append("ns.a", pa.table({"id": [1]}))
    with wh.begin() as t:
        t.append("ns.a", pa.table({"id": [2]}))
    now = wh.readable_csn()
    with pytest.raises(TxnError, match="not readable yet"):
        wh.tables(csn=now + 100)
    wh.vacuum(retention_seconds=0)
    with pytest.raises(SnapshotTooOldError):
        wh.schema("ns.a", csn=now - 1)
    with pytest.raises(SnapshotTooOldError):
        wh.tables(csn=now - 1)
    assert wh.tables(csn=now) == ["ns.a"]


def test_cli_tables_at_a_csn(wh: Warehouse, catalog_url: str, root: Path | str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    wh.create_table("ns.old", SCHEMA)
    with wh.begin() as t:
        t.append("ns.old", pa.table({"id": [1, 2]}))
    start = wh.readable_csn()
    with wh.begin() as t:
        t.rename_table("ns.old", "ns.new")

    def listed(*extra: str) -> list[tuple[str, int]]:
        capsys.readouterr()
        assert main(["--catalog", catalog_url, "--root", str(root), "tables", *extra, "--json"]) == 0
        return [(r["table"], r["rows"]) for r in json.loads(capsys.readouterr().out)]

    assert listed() == [("ns.new", 2)]
    assert listed("--csn", str(start)) == [("ns.old", 2)]
