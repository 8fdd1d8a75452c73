"""A tag named on the commit with the ZooKeeper oracle (issue 30 item 3, docs/DESIGN.md D18): the name is claimed
in the multi-op that decides the commit and the record carries the tag, so whoever mirrors the record (the
committer, recovery, a reader catching up) makes the tag: the commit and its tag stand or fall together."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kazoo")

from airflow_txn import Warehouse
from airflow_txn.catalog import table_registry, tag_records
from airflow_txn.core import commit_external, crashpoints, tags
from airflow_txn.errors import TagExistsError, TagNotFoundError
from airflow_txn.oracle.base import LogEntry, LogTag
from airflow_txn.oracle.zookeeper import ZooKeeperOracle
from tests.core.workers.procs import Child
from tests.core.workers.txn_worker import CRASH_ACCOUNT_IDS, CRASH_EVENT_IDS, CRASH_TAG
from tests.helpers import accounts, events, ids, make_tables
from tests.zookeeper.conftest import OpenWh

pytestmark = pytest.mark.zookeeper

EV, AC = "sales.events", "sales.accounts"
CHILD_TIMEOUT = 120.0


def _oracle(wh: Warehouse) -> ZooKeeperOracle:
    oracle = wh.runtime.oracle
    assert isinstance(oracle, ZooKeeperOracle)
    return oracle


def _after_the_check(monkeypatch: pytest.MonkeyPatch, then: Callable[[str], None]) -> None:
    """Run `then(name)` right after commit()'s require_free passed: the window the multi-op now closes."""
    checked = tags.require_free

    def check_then(rt: Any, name: str) -> None:
        checked(rt, name)
        then(name)

    monkeypatch.setattr(tags, "require_free", check_then)


def test_a_name_taken_after_the_check_fails_the_decision_and_commits_nothing(
        make_wh: OpenWh, zk: Any, chroot: str, monkeypatch: pytest.MonkeyPatch) -> None:
    wh, other = make_wh(), make_wh()
    make_tables(wh)
    with wh.begin() as first:
        first.append(AC, accounts({1: 10}))
    t = wh.begin()
    t.append(EV, events([1]))
    watermark = wh.readable_csn()
    _after_the_check(monkeypatch, lambda name: other.tag(name))  # another caller takes the name meanwhile
    with pytest.raises(TagExistsError, match="nothing was committed") as raised:
        t.commit(tag="race")
    assert "stands" not in str(raised.value)
    assert not zk.exists(f"{chroot}/decisions/{t.tid}"), "the multi-op decided nothing"
    assert json.loads(zk.get(f"{chroot}/tags/race")[0])["tid"] is None  # other's claim, untouched
    info = wh.transaction_info(t.tid)
    assert (info["commit_csn"], wh.readable_csn(), ids(wh.read(EV))) == (None, watermark, [])
    assert wh.tag_info("race")["csn"] == watermark and [r["tid"] for r in wh.commit_log()] == [first.tid]
    monkeypatch.undo()
    csn = t.commit()  # still committable: without the tag (it stayed committing, nothing decided)
    assert ids(wh.read(EV, csn=csn)) == [1] and wh.tag_info("race")["csn"] == watermark


def test_two_commits_racing_for_one_name_exactly_one_commits_and_it_holds_the_tag(
        make_wh: OpenWh, monkeypatch: pytest.MonkeyPatch) -> None:
    racers = [make_wh(), make_wh()]
    make_tables(racers[0])
    both_checked = threading.Barrier(2)
    _after_the_check(monkeypatch, lambda _name: both_checked.wait(timeout=30))  # both pass the check first
    outcome: dict[int, object] = {}

    def race(n: int) -> None:
        t = racers[n].begin()
        t.append(EV, events([n + 1]))
        try:
            outcome[n] = t.commit(tag="one-name")
        except TagExistsError as exc:
            outcome[n] = exc

    threads = [threading.Thread(target=race, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    won = [n for n, r in outcome.items() if isinstance(r, int)]
    lost = [n for n, r in outcome.items() if isinstance(r, TagExistsError)]
    assert len(won) == 1 and len(lost) == 1, outcome
    wh = racers[0]
    assert wh.tag_info("one-name")["csn"] == outcome[won[0]] and len(wh.commit_log()) == 1
    assert ids(wh.read(EV)) == [won[0] + 1] == ids(wh.read(EV, tag="one-name"))


def test_group_commit_fails_only_the_entries_whose_name_is_taken(make_wh: OpenWh) -> None:
    wh = make_wh()
    make_tables(wh)
    oracle = _oracle(wh)
    oracle.claim_tag("taken")
    entries = []
    for n, name in enumerate(["dup", "dup", "taken", None]):
        t = wh.begin()
        t.append(EV, events([n]))
        commit_external._prepare(wh.runtime, t.tid, oracle, None)
        entries.append(LogEntry(t.tid, (EV,), 0.0, None if name is None else LogTag(name, f"n{n}")))
    results = oracle.decisions.append_batch(entries)
    assert results[0] == 2 and results[3] == 3, results  # the others in one multi, CSNs dense
    assert all(isinstance(r, TagExistsError) for r in results[1:3]), results
    wh.recover()  # mirrors and applies the two records; the first makes its tag
    assert [r["csn"] for r in wh.commit_log()] == [3, 2] and wh.tag_info("dup")["csn"] == 2
    assert wh.tag_info("dup")["note"] == "n0" and ids(wh.read(EV, tag="dup")) == [0]
    with pytest.raises(TagNotFoundError):
        wh.tag_info("taken")


@pytest.mark.parametrize("point", [crashpoints.COMMIT_AFTER_RECORD, crashpoints.COMMIT_AFTER_MIRROR])
def test_a_committer_killed_after_the_decision_leaves_the_commit_with_its_tag(
        point: str, pg_schema_url: str, tmp_path: Path, zookeeper_hosts: str, chroot: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_TXN_ORACLE", f"zookeeper://{zookeeper_hosts}{chroot}?timeout=10")
    root = tmp_path / "warehouse"
    wh = Warehouse.open(catalog=pg_schema_url, root=str(root))
    child = None
    try:
        make_tables(wh)
        with wh.begin() as t:
            t.append(EV, events([1, 2]))
        child = Child("crash", pg_schema_url, root, "commit_tag", crash_at=point)
        assert child.wait(CHILD_TIMEOUT) == -signal.SIGKILL, child.stderr
        assert wh.readable_csn() == 2
        if point == crashpoints.COMMIT_AFTER_RECORD:  # only the log has it: recovery mirrors, tags, applies
            with pytest.raises(TagNotFoundError):
                wh.tag_info(CRASH_TAG)
            wh.recover()
        else:  # mirrored (so tagged), not applied: a read at the tag applies it first
            assert wh.tag_info(CRASH_TAG)["csn"] == 3
        assert ids(wh.read(EV, tag=CRASH_TAG)) == sorted([1, 2, *CRASH_EVENT_IDS])
        assert ids(wh.read(AC, tag=CRASH_TAG)) == sorted(CRASH_ACCOUNT_IDS)
        made = wh.tag_info(CRASH_TAG)
        assert (made["csn"], made["tables"], wh.readable_csn()) == (3, [AC, EV], 3)
    finally:
        if child is not None:
            child.kill()
        wh.close()


def test_tag_and_untag_claim_and_release_the_name(make_wh: OpenWh, zk: Any, chroot: str) -> None:
    wh = make_wh()
    make_tables(wh)
    with wh.begin() as t:
        t.append(EV, events([1]))
    wh.tag("kept")
    assert json.loads(zk.get(f"{chroot}/tags/kept")[0])["tid"] is None
    with pytest.raises(TagExistsError):
        wh.tag("kept")
    assert zk.exists(f"{chroot}/tags/kept"), "a refused tag leaves the holder's claim alone"
    wh.untag("kept")
    assert not zk.exists(f"{chroot}/tags/kept")
    c = wh.begin()
    c.append(EV, events([2]))
    csn = c.commit(tag="kept")  # free again
    assert json.loads(zk.get(f"{chroot}/tags/kept")[0])["tid"] == c.tid and wh.tag_info("kept")["csn"] == csn

    reader = wh.begin()  # a commit that wrote nothing claims the name and tags its snapshot
    snapshot = reader.commit(tag="read-only")
    assert zk.exists(f"{chroot}/tags/read-only") and wh.tag_info("read-only")["csn"] == snapshot


def test_a_tag_only_the_catalog_holds_still_refuses_the_commit_before_it(make_wh: OpenWh, zk: Any,
                                                                         chroot: str) -> None:
    wh = make_wh()
    make_tables(wh)
    with wh.begin() as t:
        t.append(EV, events([1]))
    with wh.runtime.catalog.write() as conn:  # made by an airflow_txn before names were claimed in the log
        tag_records.insert_tag(conn, "legacy", 2, [table_registry.get(conn, EV).id], 0.0, None)
    assert not zk.exists(f"{chroot}/tags/legacy")
    t = wh.begin()
    t.append(EV, events([2]))
    with pytest.raises(TagExistsError, match="nothing was committed"):
        t.commit(tag="legacy")
    assert wh.transaction_info(t.tid)["commit_in_progress"] is False and not zk.exists(f"{chroot}/tags/legacy")
    with pytest.raises(TagExistsError):  # Warehouse.tag too, and it releases the claim it took
        wh.tag("legacy")
    assert not zk.exists(f"{chroot}/tags/legacy")
    wh.untag("legacy")
    assert t.commit(tag="legacy") == 3 and wh.tag_info("legacy")["csn"] == 3


def test_an_untag_interrupted_before_the_release_is_finished_by_untagging_again(
        make_wh: OpenWh, zk: Any, chroot: str, monkeypatch: pytest.MonkeyPatch) -> None:
    wh = make_wh()
    make_tables(wh)
    t = wh.begin()
    t.append(EV, events([1]))
    t.commit(tag="half")
    monkeypatch.setattr(_oracle(wh), "release_tag", lambda name: None)  # the process died before releasing
    wh.untag("half")
    monkeypatch.undo()
    assert zk.exists(f"{chroot}/tags/half")
    u = wh.begin()
    u.append(EV, events([2]))
    with pytest.raises(TagExistsError, match="interrupted untag"):
        u.commit(tag="half")
    with pytest.raises(TagNotFoundError):
        wh.untag("half")  # no tag, but the claim's commit is mirrored: the claim is left over and released
    assert not zk.exists(f"{chroot}/tags/half")
    assert u.commit(tag="half") == 3


def test_the_record_carries_the_tag_as_a_key_older_decoders_ignore() -> None:
    tagged = LogEntry("t-1", (EV,), 1.5, LogTag("month-end", "note"))
    raw = json.loads(tagged.encode())
    assert {k: raw[k] for k in ("tid", "tables", "at")} == {"tid": "t-1", "tables": [EV], "at": 1.5}
    assert raw["tag"] == {"name": "month-end", "note": "note"} and LogEntry.decode(tagged.encode()) == tagged
    untagged = LogEntry("t-2", (EV,), 2.0)
    assert "tag" not in json.loads(untagged.encode()) and LogEntry.decode(untagged.encode()) == untagged
