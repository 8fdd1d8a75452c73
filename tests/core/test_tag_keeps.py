"""A tag keeps all it promises (issue 30, item 4; docs/DESIGN.md D18): after vacuum with retention 0, the
manifests of a tagged CSN survive, a manifest can be written at the tag (`write_manifest(tag=)`, or at its CSN
below the retention horizon), `table_stats(table, tag=)` counts the tag's snapshot, and
`last_commit_csn(table, at=<the tag's CSN>)` (the lineage version of the snapshot) still names the commit the
tag's snapshot of the table shows, although vacuum purged the history around it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.cli import exit_codes, main
from airflow_txn.core.manifests import INDEX, csn_dir
from airflow_txn.errors import (
    InvalidArgumentError,
    SnapshotTooOldError,
    TableNotFoundError,
    TableNotInTagError,
    TagNotFoundError,
)
from tests.core.test_manifests import manifest
from tests.helpers import accounts, commit_writes, events, make_tables, stored_exists

EV, AC = "sales.events", "sales.accounts"


def _index(wh: Warehouse, csn: int) -> str:
    return f"{csn_dir(csn)}/{INDEX}"


def test_vacuum_keeps_the_manifests_of_a_tagged_csn_and_writes_them_at_the_tag(wh: Warehouse,
                                                                               root: Any) -> None:
    make_tables(wh)
    first = commit_writes(wh, ("append", EV, events([1, 2])), ("append", AC, accounts({1: 10})))
    both = wh.write_manifest(csn=first)  # lists both tables
    events_only = commit_writes(wh, ("append", EV, events([3])))
    only_ev = wh.write_manifest(csn=events_only, tables=[EV])
    commit_writes(wh, ("overwrite", EV, events([9])), ("overwrite", AC, accounts({9: 90})))
    wh.tag("all-at-first", csn=first)
    wh.tag("events-then", csn=events_only, tables=[EV])
    assert stored_exists(root, _index(wh, first)) and stored_exists(root, _index(wh, events_only))

    report = wh.vacuum(retention_seconds=0)
    assert report["manifests_removed"] == 0
    assert stored_exists(root, _index(wh, first)) and stored_exists(root, _index(wh, events_only))
    assert manifest(both, EV)["row_count"] == 2

    again = wh.write_manifest(csn=first)  # below the horizon, every table held by a tag at that CSN
    assert again["csn"] == first and manifest(again, EV)["row_count"] == 2
    at_tag = wh.write_manifest(tag="events-then")  # default: the tables the tag holds
    assert (at_tag["csn"], sorted(at_tag["tables"])) == (events_only, [EV])
    assert manifest(at_tag, EV)["row_count"] == 3 and manifest(only_ev, EV)["parts"] == manifest(at_tag, EV)["parts"]
    with pytest.raises(SnapshotTooOldError, match=r"sales\.accounts"):
        wh.write_manifest(csn=events_only)  # no tag holds the accounts at that CSN
    with pytest.raises(TableNotInTagError):
        wh.write_manifest(tag="events-then", tables=[AC])
    with pytest.raises(InvalidArgumentError, match="not both"):
        wh.write_manifest(csn=first, tag="all-at-first")
    with pytest.raises(TagNotFoundError):
        wh.write_manifest(tag="no-such-tag")

    wh.untag("all-at-first")
    assert wh.vacuum(retention_seconds=0)["manifests_removed"] == 1  # released with the tag
    assert not stored_exists(root, _index(wh, first)) and stored_exists(root, _index(wh, events_only))
    with pytest.raises(SnapshotTooOldError):
        wh.write_manifest(csn=first)
    index = json.loads(wh.runtime.storage.read_root_file(_index(wh, events_only)) or b"")
    assert [t["table"] for t in index["tables"]] == [EV]


def test_table_stats_at_a_tag(wh: Warehouse) -> None:
    make_tables(wh)
    first = commit_writes(wh, ("append", EV, events([1, 2])), ("append", AC, accounts({1: 10})))
    commit_writes(wh, ("overwrite", EV, events([9])))
    wh.tag("month-end", csn=first, tables=[EV])
    wh.vacuum(retention_seconds=0)
    stats = wh.table_stats(EV, tag="month-end")
    assert (stats["csn"], stats["rows"], stats["parts"], stats["last_commit_csn"]) == (first, 2, 1, first)
    assert wh.table_stats(EV)["rows"] == 1
    with pytest.raises(TableNotInTagError):
        wh.table_stats(AC, tag="month-end")
    with pytest.raises(InvalidArgumentError, match="not both"):
        wh.table_stats(EV, csn=first, tag="month-end")
    with pytest.raises(TagNotFoundError):
        wh.table_stats(EV, tag="no-such-tag")
    with pytest.raises(TableNotFoundError):
        wh.table_stats("sales.nothing", tag="month-end")


def test_the_lineage_version_of_a_tagged_snapshot_stays_its_csn_after_vacuum(wh: Warehouse) -> None:
    """The events' version at the tag is the commit before it that touched them (`events_at`), not the tag's own
    CSN (a commit of the accounts only): vacuum keeps that table-commit row while the tag holds the table."""
    make_tables(wh)
    commit_writes(wh, ("append", EV, events([0])))  # older history: vacuum purges its table-commit row
    events_at = commit_writes(wh, ("append", EV, events([1])))
    tagged = commit_writes(wh, ("append", AC, accounts({1: 10})))
    commit_writes(wh, ("append", EV, events([2])))
    commit_writes(wh, ("append", EV, events([3])))
    wh.tag("release", csn=tagged)
    assert wh.last_commit_csn(EV, at=tagged) == events_at
    sql_oracle = wh.runtime.oracle.external_log is None  # ZooKeeper's log keeps its records' history longer
    purged = wh.vacuum(retention_seconds=0)["rows_purged"]
    assert purged["table_commits"] >= 1 or not sql_oracle  # the history around it went
    assert wh.last_commit_csn(EV, at=tagged) == events_at
    assert wh.last_commit_csn(AC, at=tagged) == tagged
    assert wh.table_stats(EV, tag="release")["last_commit_csn"] == events_at
    wh.untag("release")
    wh.vacuum(retention_seconds=0)
    if sql_oracle:
        assert wh.last_commit_csn(EV, at=tagged) is None  # no tag keeps it now: the history is gone


def test_the_version_at_a_purged_snapshot_no_tag_holds_is_unknown_never_a_wrong_one(wh: Warehouse) -> None:
    """After vacuum purged the history between a tag and the horizon, `last_commit_csn(table, at=<a CSN in
    between>)` answered with the tagged commit's CSN (the only row left below), a version the snapshot never
    showed. It says None (unknown) there now; at the tag and at any readable snapshot it stays exact."""
    make_tables(wh)
    tagged = commit_writes(wh, ("append", EV, events([1])))
    wh.tag("first", csn=tagged, tables=[EV])
    between = commit_writes(wh, ("append", EV, events([2])))
    newest_below = commit_writes(wh, ("append", EV, events([3])))
    commit_writes(wh, ("append", AC, accounts({1: 10})))
    assert wh.last_commit_csn(EV, at=between) == between
    sql_oracle = wh.runtime.oracle.external_log is None  # ZooKeeper's log keeps its records' history longer
    wh.vacuum(retention_seconds=0)
    assert wh.last_commit_csn(EV, at=between) in ((None,) if sql_oracle else (None, between))
    assert wh.last_commit_csn(EV, at=tagged) == tagged
    assert wh.last_commit_csn(EV, at=wh.readable_csn()) == newest_below
    assert wh.last_commit_csn(EV) == newest_below


def test_airflow_txn_manifest_at_a_tag(wh: Warehouse, catalog_url: str, root: Any,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    make_tables(wh)
    first = commit_writes(wh, ("append", EV, events([1, 2])))
    commit_writes(wh, ("overwrite", EV, events([3])))
    wh.tag("month-end", csn=first, tables=[EV])
    wh.vacuum(retention_seconds=0)
    opts = ["--catalog", catalog_url, "--root", str(root)]
    assert main([*opts, "manifest", "--tag", "month-end", "--json"]) == exit_codes.OK
    written = json.loads(capsys.readouterr().out)
    assert (written["csn"], list(written["tables"])) == (first, [EV])
    assert main([*opts, "manifest", "--tag", "month-end", "--csn", str(first)]) == exit_codes.USAGE
