"""A commit record mirrored after the name it holds was given to another table (docs/DESIGN.md D27): the record is
filed under the table its transaction wrote, by the table ids it carries (an optional key older decoders ignore) or,
for an older record without them, by the names in its transaction's own view, never by today's holder of a name."""

from __future__ import annotations

import pytest

pytest.importorskip("kazoo")

from airflow_txn import Warehouse
from airflow_txn.core import commit_external, log_mirror
from airflow_txn.oracle.base import LogEntry
from airflow_txn.oracle.zookeeper import ZooKeeperOracle
from tests.helpers import events, ids, make_tables
from tests.zookeeper.conftest import OpenWh

pytestmark = pytest.mark.zookeeper


def _oracle(wh: Warehouse) -> ZooKeeperOracle:
    oracle = wh.runtime.oracle
    assert isinstance(oracle, ZooKeeperOracle)
    return oracle


@pytest.mark.parametrize("with_ids", [True, False], ids=["record-with-ids", "older-record"])
def test_a_record_mirrored_after_its_name_was_reused_is_filed_under_its_own_table(make_wh: OpenWh,
                                                                                  with_ids: bool) -> None:
    wh = make_wh()
    make_tables(wh)
    schema = wh.schema("sales.events")
    t = wh.begin()
    t.append("sales.events", events([1]))
    other = make_wh()  # another process (no cached names) renames the table, then gives its name to a new one
    with other.begin() as u:
        u.rename_table("sales.events", "sales.old")
    with other.begin() as u:
        u.create_table("sales.events", schema)
    _, tables, _ = commit_external._prepare(wh.runtime, t.tid, _oracle(wh), None)  # committing, then the committer dies
    entry = commit_external.entry_of(t.tid, tables, None) if with_ids else LogEntry(t.tid, ("sales.events",), 0.0)
    assert (entry.table_ids is not None) == with_ids
    # the record lands only now, named as its transaction saw it. Appended as is: D27's check would refuse this
    # append beside the rename (test_table_change_window.py), a record does not rely on it to be filed right.
    csn = _oracle(wh).append(entry)
    assert log_mirror.catch_up(other.runtime) == 1
    assert other.wait_for_csn(csn, timeout=10) == csn
    assert ids(other.read("sales.old")) == [1]
    assert ids(other.read("sales.events")) == []
    assert t.state == "committed"


def test_table_ids_are_an_optional_key_of_a_record() -> None:
    """Older decoders ignore `ids` (a JSON key they never read); a record without it still decodes."""
    import json

    entry = LogEntry("t1", ("a.x", "b.y"), 1.5, None, (7, 3))
    raw = json.loads(entry.encode())
    assert raw == {"tid": "t1", "tables": ["a.x", "b.y"], "at": 1.5, "ids": [7, 3]}
    assert LogEntry.decode(entry.encode()) == entry
    older = json.dumps({"tid": "t1", "tables": ["a.x"], "at": 1.5}).encode()
    assert LogEntry.decode(older) == LogEntry("t1", ("a.x",), 1.5)
