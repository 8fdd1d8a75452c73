"""The happy path end to end on both catalogs: stage in two tables, commit, read, roll back."""

from __future__ import annotations

import pyarrow.compute as pc

from airflow_txn import Warehouse
from tests.helpers import accounts, events, ids, make_tables


def test_commit_makes_two_tables_visible_at_one_csn(wh: Warehouse) -> None:
    make_tables(wh)
    before = wh.readable_csn()
    with wh.begin(label="smoke") as t:
        t.append("sales.events", events([1, 2]))
        t.append("sales.accounts", accounts({1: 10}))
        assert wh.read("sales.events").num_rows == 0
        assert ids(t.read("sales.events")) == [1, 2]
    csn = wh.readable_csn()
    assert csn == before + 1
    assert wh.last_commit_csn("sales.events") == csn == wh.last_commit_csn("sales.accounts")
    assert ids(wh.read("sales.events")) == [1, 2]
    assert wh.read("sales.events", csn=before).num_rows == 0


def test_rollback_hides_everything(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1]))
    t.update("sales.accounts", pc.field("id") == 1, {"balance": 5})
    t.rollback()
    assert t.state == "rolled_back"
    assert wh.read("sales.events").num_rows == 0
