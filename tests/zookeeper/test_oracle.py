"""The ZooKeeper oracle against a real server: the log layout, dense CSNs across sealed segments,
compaction with a low-water mark, the commit/abort decision, serializable validation, group commit."""

from __future__ import annotations

import json
import threading
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("kazoo")

from airflow_txn import Warehouse
from airflow_txn.catalog import txn_records
from airflow_txn.core import commit, isolation
from airflow_txn.errors import OracleUnavailableError, SerializationError, TransactionClosedError, TxnError
from airflow_txn.oracle.base import AbortDecidedError, LogEntry, LogRecord
from airflow_txn.oracle.zookeeper import ZooKeeperOracle
from tests.harness.statements import watching
from tests.helpers import accounts, events, ids, make_tables, outlive_lease
from tests.zookeeper.conftest import OpenWh

pytestmark = pytest.mark.zookeeper

ID_SCHEMA = pa.schema([("id", pa.int64())])


def _oracle(wh: Warehouse) -> ZooKeeperOracle:
    oracle = wh.runtime.oracle
    assert isinstance(oracle, ZooKeeperOracle)
    return oracle


def _commit_one(wh: Warehouse, i: int) -> int:
    with wh.begin() as t:
        t.append("sales.events", events([i]))
        t.append("sales.accounts", accounts({i: i}))
    return wh.readable_csn()


def _segments(zk: Any, chroot: str) -> dict[str, dict[str, Any]]:
    out = {}
    for name in sorted(zk.get_children(f"{chroot}/log")):
        data, stat = zk.get(f"{chroot}/log/{name}")
        out[name] = {**json.loads(data), "version": stat.version,
                     "records": sorted(zk.get_children(f"{chroot}/log/{name}"))}
    return out


def test_record_is_a_sequential_znode_holding_the_tid(make_wh: OpenWh, zk: Any, chroot: str) -> None:
    wh = make_wh()
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1]))
    csn = t.commit()
    assert csn == 2 and wh.readable_csn() == 2 and t.state == "committed"
    (segment,) = _segments(zk, chroot).values()
    assert segment["base"] == 2 and not segment["sealed"] and segment["records"] == ["r-0000000000"]
    record = json.loads(zk.get(f"{chroot}/log/seg-0000000000/r-0000000000")[0])
    assert record["tid"] == t.tid and record["tables"] == ["sales.events"]
    assert zk.get(f"{chroot}/decisions/{t.tid}")[0] == b"commit"
    assert json.loads(zk.get(f"{chroot}/meta")[0])["warehouse_id"]


def test_csns_stay_dense_across_sealed_segments_and_compaction_keeps_a_low_water_mark(
        make_wh: OpenWh, zk: Any, chroot: str) -> None:
    wh = make_wh(segment_size=3)
    make_tables(wh)
    csns = [_commit_one(wh, i) for i in range(10)]
    assert csns == list(range(2, 12)), "CSNs must be dense across segments"
    segments = _segments(zk, chroot)
    assert len(segments) <= 2, f"sealed, applied segments should be compacted away: {segments}"
    oldest = next(iter(segments.values()))
    assert oldest["base"] > 2, "the oldest remaining segment's base is the low-water mark"
    remaining_tids = set(zk.get_children(f"{chroot}/decisions"))
    assert len(remaining_tids) == sum(len(s["records"]) for s in segments.values())
    # a fresh process (new handle) recovers and keeps committing after the truncation
    other = make_wh(segment_size=3)
    assert other.recover()["watermark"] == 11
    assert _commit_one(other, 100) == 12
    assert ids(other.read("sales.events")) == [*range(10), 100]
    assert [r["csn"] for r in other.commit_log(limit=100)] == list(range(12, 1, -1))


def test_existing_sql_history_continues_under_zookeeper(make_wh: OpenWh, pg_schema_url: str,
                                                       tmp_path: Any) -> None:
    sql = Warehouse.open(catalog=pg_schema_url, root=str(tmp_path / "warehouse"), oracle="sql")
    make_tables(sql)
    with sql.begin() as t:
        t.append("sales.events", events([1]))
    sql.close()
    wh = make_wh()
    assert _commit_one(wh, 2) == 3
    assert ids(wh.read("sales.events")) == [1, 2]


def test_two_warehouses_cannot_share_a_chroot(make_wh: OpenWh, tmp_path: Any) -> None:
    wh = make_wh()
    make_tables(wh)
    _commit_one(wh, 1)
    stranger = make_wh(catalog=f"sqlite:///{tmp_path}/other.db", root=tmp_path / "other-root")  # a root of its own
    make_tables(stranger)
    t = stranger.begin()
    t.append("sales.events", events([1]))
    with pytest.raises(TxnError, match="another warehouse"):
        t.commit()
    assert t.state == "active"


def test_unreachable_zookeeper_leaves_the_transaction_active(make_wh: OpenWh) -> None:
    from tests.harness.zookeeper import free_port

    wh = make_wh()
    make_tables(wh)
    _commit_one(wh, 1)
    dead = make_wh(hosts=f"127.0.0.1:{free_port()}", timeout=1)
    t = dead.begin()  # beginning and staging need only the catalog
    t.append("sales.events", events([2]))
    assert ids(dead.read("sales.events")) == [1], "readers work without ZooKeeper"
    with pytest.raises(OracleUnavailableError, match="did not answer"):
        t.commit()
    assert t.state == "active" and not dead.transaction_info(t.tid)["commit_in_progress"]
    t.rollback()  # an active transaction rolls back in the catalog alone
    assert t.state == "rolled_back"
    reader = dead.begin()
    reader.read("sales.events")
    assert reader.commit() == 2, "a read-only commit needs no ZooKeeper"


def _prepare(wh: Warehouse, tid: str) -> None:
    """Move a transaction to `committing` as commit's step 2 does (the committer then 'dies')."""
    from airflow_txn.core import commit_external

    commit_external._prepare(wh.runtime, tid, _oracle(wh), None)


def test_abort_decision_beats_a_late_commit(make_wh: OpenWh, zk: Any, chroot: str) -> None:
    wh = make_wh()
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1]))
    _prepare(wh, t.tid)
    assert t.state == "active" and wh.transaction_info(t.tid)["commit_in_progress"]
    with pytest.raises(TransactionClosedError, match="being committed"):
        t.append("sales.events", events([2]))
    other = make_wh()
    other.attach(t.tid).rollback()  # e.g. recovery after the lease expired
    assert zk.get(f"{chroot}/decisions/{t.tid}")[0] == b"abort"
    assert zk.exists(f"{chroot}/aborts/{t.tid}")
    with pytest.raises(AbortDecidedError):  # the committer's late append (e.g. after a pause) is refused
        _oracle(wh).append(LogEntry(t.tid, ("sales.events",), 0.0))
    assert t.state == "rolled_back" and ids(wh.read("sales.events")) == []


def test_rollback_of_a_committed_record_rolls_forward(make_wh: OpenWh) -> None:
    wh = make_wh()
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1]))
    _prepare(wh, t.tid)
    csn = _oracle(wh).append(LogEntry(t.tid, ("sales.events",), 0.0))  # the record, then the committer died
    assert t.state == "committed" and wh.transaction_info(t.tid)["commit_csn"] == csn
    assert wh.readable_csn() == csn - 1, "the watermark never passes a record that is not applied"
    with pytest.raises(TransactionClosedError, match="committed"):
        make_wh().attach(t.tid).rollback()
    assert wh.readable_csn() == csn and ids(wh.read("sales.events")) == [1]
    with pytest.raises(TransactionClosedError, match="is committed"):  # as with the SQL oracle
        t.commit()


def test_mirroring_is_idempotent(make_wh: OpenWh) -> None:
    from airflow_txn.core import log_mirror

    wh = make_wh()
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1]))
    _prepare(wh, t.tid)
    entry = LogEntry(t.tid, ("sales.events",), 0.0)
    record = LogRecord(_oracle(wh).append(entry), entry)
    helper = make_wh()
    assert log_mirror.mirror(helper.runtime, [record]) == 1  # a reader mirrors the dead committer's record
    assert log_mirror.mirror(wh.runtime, [record]) == 0  # then the committer (or anyone) again: no-op
    assert log_mirror.catch_up(wh.runtime) == 0 and wh.transaction_info(t.tid)["commit_csn"] == record.csn
    assert wh.wait_for_csn(record.csn, timeout=10) == record.csn and ids(wh.read("sales.events")) == [1]


def test_commit_returns_only_once_its_csn_is_readable_when_an_older_record_is_mirrored_meanwhile(
        make_wh: OpenWh) -> None:
    """Found by the randomized histories in CI: apply asked "is an older record unapplied?" and then
    "has the mirrored prefix reached my CSN?" in two statements. A slower committer mirroring its older
    record between the two made both answers look fine, so commit() returned while its CSN was not yet
    readable, and the same process's next begin() missed its own write. The prefix must be read first."""
    from airflow_txn.core import log_mirror

    wh = make_wh()
    make_tables(wh)
    slow = wh.begin()
    slow.append("sales.events", events([1]))
    _prepare(wh, slow.tid)
    entry = LogEntry(slow.tid, ("sales.events",), 0.0)
    older = LogRecord(_oracle(wh).append(entry), entry)  # in the log; its committer has not mirrored it yet
    slow_process = make_wh()
    t = wh.begin()
    t.append("sales.accounts", accounts({2: 2}))
    seen = {"armed": False, "selects": 0}

    def mirror_between_the_checks(statement: str, _parameters: Any) -> None:
        sql = statement.lstrip().upper()
        if sql.startswith("UPDATE TXN_COMMIT_LOG"):  # t's apply marks its record applied; the checks follow
            seen["armed"] = True
        elif seen["armed"] and sql.startswith("SELECT"):
            seen["selects"] += 1
            if seen["selects"] == 2:  # between the two checks the slow committer mirrors its record
                assert log_mirror.mirror(slow_process.runtime, [older]) == 1

    with watching(wh, mirror_between_the_checks):
        csn = t.commit()
    assert seen["selects"] >= 2, "the interleaving was not exercised"
    assert csn == older.csn + 1
    assert wh.readable_csn() >= csn, "commit() returned before its CSN was readable"
    nxt = wh.begin()
    assert nxt.snapshot_csn >= csn and ids(nxt.read("sales.events")) == [1]
    nxt.rollback()


def test_commit_resumes_after_an_interrupted_attempt(make_wh: OpenWh) -> None:
    wh = make_wh()
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1]))
    _prepare(wh, t.tid)
    csn = make_wh().attach(t.tid).commit()  # another process resumes the commit
    assert csn == 2 and t.state == "committed" and ids(wh.read("sales.events")) == [1]


def test_serializable_revalidates_when_a_commit_lands_after_validation(
        make_wh: OpenWh, monkeypatch: pytest.MonkeyPatch) -> None:
    wh = make_wh()
    make_tables(wh)
    _commit_one(wh, 1)
    t = wh.begin(isolation="serializable")
    t.read("sales.events")
    t.append("sales.accounts", accounts({7: 7}))
    other = make_wh()
    original = isolation._validate_read_set
    calls = []

    def validate_then_race(*args: Any) -> None:
        original(*args)
        calls.append(args)
        if len(calls) == 1:  # a conflicting commit slips in between validation and the record
            with other.begin() as racer:
                racer.append("sales.events", events([99]))

    monkeypatch.setattr(isolation, "_validate_read_set", validate_then_race)
    with pytest.raises(SerializationError, match="changed after"):
        t.commit()
    assert len(calls) == 1, "the append must have been refused and the validation repeated"
    assert t.state == "rolled_back"
    assert ids(wh.read("sales.accounts")) == [1]


def test_group_commit_shares_round_trips_and_keeps_csns_dense(make_wh: OpenWh) -> None:
    wh = make_wh()
    wh.create_table("g.t", ID_SCHEMA)
    group = _oracle(wh).group
    assert group is not None
    results: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            start.wait(timeout=30)
            for k in range(5):
                t = wh.begin()
                t.append("g.t", pa.table({"id": [n * 100 + k]}, schema=ID_SCHEMA))
                results.append(t.commit())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert sorted(results) == list(range(2, 42))
    assert group.records == 40 and group.batches <= 40
    assert wh.readable_csn() == 41
    assert ids(wh.read("g.t")) == sorted(n * 100 + k for n in range(8) for k in range(5))


def test_read_only_commit_needs_no_record(make_wh: OpenWh) -> None:
    wh = make_wh()
    make_tables(wh)
    t = wh.begin()
    t.read("sales.events")
    assert t.commit() == 1 and t.state == "committed" and wh.commit_log() == []


def test_recovery_rolls_back_an_expired_committing_transaction(make_wh: OpenWh, zk: Any, chroot: str) -> None:
    wh = make_wh()
    make_tables(wh)
    t = wh.begin(lease_seconds=2.0)
    t.append("sales.events", events([1]))
    _prepare(wh, t.tid)
    outlive_lease(wh, t.tid)
    report = make_wh().recover()
    assert report["rolled_back"] == [t.tid]
    assert zk.get(f"{chroot}/decisions/{t.tid}")[0] == b"abort"
    with wh.runtime.catalog.read() as conn:
        assert txn_records.fetch(conn, t.tid).state == txn_records.ROLLED_BACK


def test_commit_survives_an_expired_session(make_wh: OpenWh, zookeeper_hosts: str) -> None:
    """Expire the oracle's session the way kazoo's own harness does (a second client on the same
    session id closes it); the next commit runs on a new session."""
    from kazoo.client import KazooClient

    wh = make_wh()
    make_tables(wh)
    assert _commit_one(wh, 1) == 2
    client = _oracle(wh)._client
    session_id, password = client.client_id
    lost = threading.Event()
    client.add_listener(lambda state: lost.set() if state == "LOST" else None)
    thief = KazooClient(hosts=zookeeper_hosts, client_id=(session_id, password), timeout=10)
    thief.start(timeout=10)
    thief.stop()
    thief.close()
    assert lost.wait(timeout=20), "the session did not expire"
    assert _commit_one(wh, 2) == 3
    assert client.client_id[0] != session_id, "a new session was opened"
    assert ids(wh.read("sales.events")) == [1, 2]


def test_a_write_landing_between_the_check_and_prepare_is_in_the_record(make_wh: OpenWh, zk: Any, chroot: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The record's tables are read under the row lock by prepare, not by the first (unlocked) read: a
    sibling task's write to another table that registers in between is committed with the rest."""
    wh = make_wh()
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1]))
    sibling = make_wh().attach(t.tid)
    real_check = commit.check_files

    def check_then_sibling_writes(rt: Any, tid: str, staged: Any) -> None:
        real_check(rt, tid, staged)
        if tid == t.tid and not sibling_wrote:
            sibling_wrote.append(sibling.append("sales.accounts", accounts({7: 70})))

    sibling_wrote: list[int] = []
    monkeypatch.setattr(commit, "check_files", check_then_sibling_writes)
    csn = t.commit()
    assert sibling_wrote == [1]
    record = json.loads(zk.get(f"{chroot}/log/seg-0000000000/r-0000000000")[0])
    assert record["tables"] == ["sales.accounts", "sales.events"]
    assert ids(wh.read("sales.events", csn)) == [1]
    assert wh.read("sales.accounts", csn).to_pylist() == [{"id": 7, "balance": 70}]
