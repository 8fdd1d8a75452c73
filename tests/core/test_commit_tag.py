"""A tag named on the commit (`Transaction.commit(tag=...)`, issue 30 item 3; docs/DESIGN.md D18): with the SQL
oracle the tag rows are written in the commit's own catalog transaction, so the commit and its tag stand or fall
together; a name already taken is a TagExistsError before anything is committed (the transaction stays active:
commit without the tag, or roll back). With ZooKeeper the name is claimed in the multi-op that decides the commit and
the record's mirror makes the tag, so there too a name taken at the last moment commits nothing
(tests/zookeeper/test_commit_tag.py has the log's side)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from airflow_txn import Warehouse
from airflow_txn.core import crashpoints
from airflow_txn.errors import InvalidArgumentError, InvalidNameError, TagExistsError
from tests.helpers import accounts, events, ids, make_tables

EV, AC = "sales.events", "sales.accounts"


def test_the_tag_is_made_with_the_commit_and_holds_the_tables_it_wrote(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin()
    t.append(EV, events([1, 2]))
    csn = t.commit(tag="load-1", tag_note="committed by load")
    made = wh.tag_info("load-1")
    assert (made["csn"], made["tables"], made["note"]) == (csn, [EV], "committed by load")
    assert ids(wh.read(EV, tag="load-1")) == [1, 2]

    reader = wh.begin()  # a commit that wrote nothing names its snapshot, holding every table
    snapshot = reader.commit(tag="nothing-written")
    assert (wh.tag_info("nothing-written")["csn"], wh.tag_info("nothing-written")["tables"]) == (snapshot, [AC, EV])


def test_a_taken_name_refuses_the_commit_before_anything_is_committed(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as first:
        first.append(AC, accounts({1: 10}))
    wh.tag("month-end")
    t = wh.begin()
    t.append(EV, events([1]))
    watermark = wh.readable_csn()
    with pytest.raises(TagExistsError, match="month-end"):
        t.commit(tag="month-end")
    info = wh.transaction_info(t.tid)
    assert (info["state"], info["commit_csn"], wh.readable_csn()) == ("active", None, watermark)
    assert ids(wh.read(EV)) == [] and wh.tag_info("month-end")["tables"] == [AC, EV]
    csn = t.commit()  # still usable: commit without the tag
    assert ids(wh.read(EV, csn=csn)) == [1]


def test_a_bad_tag_is_refused_before_anything_changes(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin()
    t.append(EV, events([1]))
    with pytest.raises(InvalidNameError):
        t.commit(tag="no spaces allowed")
    with pytest.raises(InvalidArgumentError):
        t.commit(tag="fine", tag_note="\x00")
    assert wh.transaction_info(t.tid)["state"] == "active" and wh.tags() == []
    t.commit(tag="fine")
    assert wh.tag_info("fine")["tables"] == [EV]


def test_a_name_taken_at_the_commit_point_commits_nothing(wh: Warehouse, open_wh: Callable[[], Warehouse],
                                                         request: pytest.FixtureRequest,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Another caller takes the name after every check, just before the commit point (SQL: inside the commit's
    catalog transaction, once its CSN is allocated; ZooKeeper: before the multi-op that decides it)."""
    if request.node.callspec.params.get("catalog_url") == "sqlite":
        pytest.skip("SQLite has one writer at a time: no other caller can tag inside the commit's transaction")
    make_tables(wh)
    other = open_wh()
    with wh.begin() as first:
        first.append(AC, accounts({1: 10}))
    t = wh.begin()
    t.append(EV, events([1]))
    watermark = wh.readable_csn()
    hit = crashpoints.hit

    def take_the_name(point: str) -> None:
        hit(point)
        if point == crashpoints.COMMIT_MID_RECORD:
            other.tag("raced")

    with monkeypatch.context() as patched:  # not monkeypatch.undo(): it would undo the fixtures' AWS_* settings too
        patched.setattr(crashpoints, "hit", take_the_name)
        with pytest.raises(TagExistsError, match="raced"):
            t.commit(tag="raced")
    info = wh.transaction_info(t.tid)
    assert (info["state"], info["commit_csn"], wh.readable_csn()) == ("active", None, watermark)
    assert ids(wh.read(EV)) == [] and wh.tag_info("raced")["csn"] == watermark
    assert [r["tid"] for r in wh.commit_log()] == [first.tid]
    csn = t.commit()  # still committable without the tag
    assert ids(wh.read(EV, csn=csn)) == [1] and wh.tag_info("raced")["csn"] == watermark
