"""ZooKeeper oracle with several OS processes and real failures: a committer SIGKILLed between record and
apply, concurrent committers (CSN order = commit order), ZooKeeper stopped and restarted mid-run, and
one member of a three-node ensemble killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.core import crashpoints
from tests import evidence
from tests.core.workers.procs import REPO, Child
from tests.core.workers.txn_worker import CRASH_ACCOUNT_IDS, CRASH_EVENT_IDS
from tests.harness.zookeeper import ZooKeeperServer, ensemble, standalone
from tests.helpers import accounts, events, ids, make_tables, storage_files
from tests.zookeeper.worker import SCHEMA, TABLE

pytestmark = pytest.mark.zookeeper

CHILD_TIMEOUT = 120.0


class Writer:
    """A tests.zookeeper.worker process; its JSON lines are read once it exits."""

    def __init__(self, catalog: str, root: Path, oracle: str, index: int, count: int, pause: float = 0.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.zookeeper.worker", catalog, str(root), oracle, str(index), str(count),
             str(pause)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def results(self, timeout: float = CHILD_TIMEOUT) -> list[dict[str, Any]]:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"writer {self.proc.pid} still ran after {timeout}s") from None
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert self.proc.returncode == 0, f"writer failed ({self.proc.returncode}): {lines[-3:]}\n{err[-3000:]}"
        assert "done" in lines[-1], lines[-3:]
        return lines[:-1]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def writers() -> Iterator[list[Writer]]:
    started: list[Writer] = []
    yield started
    for writer in started:
        writer.kill()


def _check_commits(wh: Warehouse, commits: list[dict[str, Any]], first_csn: int = 2) -> None:
    """Unique, dense CSNs; every id visible exactly once; real-time order respected."""
    csns = sorted(c["csn"] for c in commits)
    assert csns == list(range(first_csn, first_csn + len(commits))), f"CSNs not dense/unique: {csns}"
    assert wh.readable_csn() >= csns[-1]
    expected = sorted(i for c in commits for i in c["ids"])
    assert ids(wh.read(TABLE)) == expected, "a committed id is missing or duplicated"
    log = {r["csn"]: r["tid"] for r in wh.commit_log(limit=10_000)}
    assert {c["csn"]: c["tid"] for c in commits}.items() <= log.items()
    for a in commits:  # a commit that returned before another began has the smaller CSN
        for b in commits:
            if a["t1"] < b["t0"]:
                assert a["csn"] < b["csn"], f"commit order broken: {a} returned before {b} began"


def _check_converged(wh: Warehouse, hosts: str, chroot: str, root: Path) -> dict[str, Any]:
    """After a fault: recovery leaves nothing open or unapplied, the catalog's mirror agrees with the
    ZooKeeper log, and vacuum leaves no orphan file. Returns recovery's report."""
    report = wh.recover()
    assert report["missing_files"] == [] and report["orphan_dirs"] == 0, report
    assert wh.transactions(state="active") == [], "a transaction is still open after recovery"
    log = {r["csn"]: r["tid"] for r in wh.commit_log(limit=100_000)}
    assert all(r["applied"] for r in wh.commit_log(limit=100_000)), "a commit record is left unapplied"
    assert wh.readable_csn() == max(log), "the watermark stops short of the last record"
    zk_log = _zk_log(hosts, chroot)
    assert zk_log.items() <= log.items() and max(zk_log) == max(log), "the catalog mirror differs from the log"
    wh.vacuum(0)
    again = wh.recover()
    assert again["orphan_dirs"] == 0 and again["missing_files"] == [], again
    assert all(f.endswith((".parquet", ".json")) for f in storage_files(root))
    return report


def _zk_log(hosts: str, chroot: str) -> dict[int, str]:
    """CSN -> tid as ZooKeeper holds it (segments not compacted)."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=10)
    try:
        out = {}
        for name in client.get_children(f"{chroot}/log"):
            base = json.loads(client.get(f"{chroot}/log/{name}")[0])["base"]
            for record in client.get_children(f"{chroot}/log/{name}"):
                data = json.loads(client.get(f"{chroot}/log/{name}/{record}")[0])
                out[base + int(record.rsplit("-", 1)[1])] = data["tid"]
        return out
    finally:
        client.stop()
        client.close()


def test_concurrent_committers_keep_csn_order_equal_to_commit_order(
        make_wh: Any, pg_schema_url: str, tmp_path: Path, zookeeper_hosts: str, chroot: str,
        writers: list[Writer]) -> None:
    wh = make_wh()
    wh.create_table(TABLE, SCHEMA)
    oracle = f"zookeeper://{zookeeper_hosts}{chroot}?timeout=10"
    writers += [Writer(pg_schema_url, tmp_path / "warehouse", oracle, index, 12) for index in (1, 2, 3)]
    commits = [c for w in writers for c in w.results()]
    _check_commits(wh, commits)
    zk_log = _zk_log(zookeeper_hosts, chroot)
    assert zk_log == {c["csn"]: c["tid"] for c in commits}, "the catalog mirror differs from the ZooKeeper log"


def test_committer_killed_between_record_and_apply_then_a_reader_process_gets_the_data(
        pg_schema_url: str, tmp_path: Path, zookeeper_hosts: str, chroot: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = f"zookeeper://{zookeeper_hosts}{chroot}?timeout=10"
    monkeypatch.setenv("AIRFLOW_TXN_ORACLE", oracle)  # the worker processes inherit it
    root = tmp_path / "warehouse"
    wh = Warehouse.open(catalog=pg_schema_url, root=str(root))
    started: list[Child] = []
    try:
        make_tables(wh)
        with wh.begin() as t:
            t.append("sales.events", events([1, 2]))
            t.append("sales.accounts", accounts({1: 10}))
        child = Child("crash", pg_schema_url, root, "commit", crash_at=crashpoints.COMMIT_AFTER_RECORD)
        started.append(child)
        assert child.wait(CHILD_TIMEOUT) == -signal.SIGKILL, child.stderr
        tid = next(m["tid"] for m in child.messages() if "tid" in m)
        # the record exists only in ZooKeeper: the catalog still says committing, no mirror, nothing stamped
        assert _zk_log(zookeeper_hosts, chroot)[3] == tid
        with wh.runtime.catalog.read() as conn:
            from airflow_txn.catalog import commit_log, txn_records

            assert commit_log.record_of(conn, tid) is None
            assert txn_records.fetch(conn, tid).state == txn_records.COMMITTING
        assert wh.readable_csn() == 2 and wh.transaction_info(tid)["state"] == "committed"
        reader = Child("read_after", pg_schema_url, root, 3, 3)
        started.append(reader)
        assert reader.wait(CHILD_TIMEOUT) == 0, reader.stderr
        by_read, by_wait = reader.messages()
        assert by_read["events"] == sorted([1, 2, *CRASH_EVENT_IDS]), by_read
        assert by_read["accounts"] == sorted([1, *CRASH_ACCOUNT_IDS]), by_read
        assert by_wait["watermark"] >= 3
        assert wh.readable_csn() == 3 and wh.commit_log(limit=5)[0] == {**wh.commit_log(limit=5)[0], "applied": True}
    finally:
        for child in started:
            child.kill()
        wh.close()


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_zookeeper_stopped_and_restarted_mid_run(pg_schema_url: str, tmp_path: Path, writers: list[Writer],
                                                 how: str) -> None:
    """ZooKeeper stopped (SIGTERM) or killed (SIGKILL) while a writer process commits, then started again."""
    case = f"zookeeper restarted mid-commit|{how}"
    try:
        details = _restart_mid_run(pg_schema_url, tmp_path, writers, how)
    except BaseException as exc:
        evidence.record("zookeeper_faults", case, False, error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    evidence.record("zookeeper_faults", case, True, **details)


def _restart_mid_run(pg_schema_url: str, tmp_path: Path, writers: list[Writer], how: str) -> dict[str, Any]:
    with standalone(tmp_path / "zk") as server:
        oracle = f"zookeeper://{server.hosts}/restart?timeout=2&session_timeout=4"
        wh = Warehouse.open(catalog=pg_schema_url, root=str(tmp_path / "warehouse"), oracle=oracle)
        try:
            wh.create_table(TABLE, SCHEMA)
            writer = Writer(pg_schema_url, tmp_path / "warehouse", oracle, 1, 30, pause=0.1)
            writers.append(writer)
            _wait_for_rows(wh, 4)
            server.kill() if how == "kill" else server.stop()
            t = wh.begin()  # the catalog alone: begin, stage and read work while ZooKeeper is down
            t.append(TABLE, _rows([7, 8]))
            before = ids(wh.read(TABLE))
            with pytest.raises(Exception) as failed:
                t.commit()
            assert type(failed.value).__name__ == "OracleUnavailableError" and t.state == "active"
            time.sleep(1.0)
            server.start()
            csn = t.commit()  # the same transaction commits once ZooKeeper is back
            commits = writer.results()
        finally:
            wh.close()
        wh = Warehouse.open(catalog=pg_schema_url, root=str(tmp_path / "warehouse"), oracle=oracle)
        try:
            mine = {"csn": csn, "tid": t.tid, "ids": [7, 8], "t0": float("-inf"), "t1": float("inf")}
            assert set(before) <= set(ids(wh.read(TABLE)))
            assert any(c["unavailable"] for c in commits), "the writer never met the outage"
            _check_commits(wh, [*commits, mine])
            report = _check_converged(wh, server.hosts, "/restart", tmp_path / "warehouse")
        finally:
            wh.close()
    return {"commits": len(commits) + 1, "retried_commits": sum(1 for c in commits if c["unavailable"]),
            "own_commit_error": "OracleUnavailableError", "recovery": report}


def test_one_ensemble_member_killed_mid_run(pg_schema_url: str, tmp_path: Path, writers: list[Writer]) -> None:
    case = "zookeeper ensemble member killed mid-run"
    try:
        details = _member_killed_mid_run(pg_schema_url, tmp_path, writers)
    except BaseException as exc:
        evidence.record("zookeeper_faults", case, False, error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    evidence.record("zookeeper_faults", case, True, **details)


def _member_killed_mid_run(pg_schema_url: str, tmp_path: Path, writers: list[Writer]) -> dict[str, Any]:
    with ensemble(tmp_path / "ensemble", size=3) as cluster:
        oracle = f"zookeeper://{cluster.hosts}/failover?timeout=15&session_timeout=6"
        wh = Warehouse.open(catalog=pg_schema_url, root=str(tmp_path / "warehouse"), oracle=oracle)
        try:
            wh.create_table(TABLE, SCHEMA)
            writer = Writer(pg_schema_url, tmp_path / "warehouse", oracle, 1, 30, pause=0.1)
            writers.append(writer)
            _wait_for_rows(wh, 4)
            victim = cluster.leader() or cluster.servers[0]
            role = victim.mode
            victim.kill()
            with wh.begin() as t:  # this process commits through the surviving quorum too
                t.append(TABLE, _rows([7, 8]))
            commits = writer.results()
            survivors = [s for s in cluster.servers if s is not victim]
            assert all(s.mode in ("leader", "follower") for s in survivors)
            victim.start()  # it rejoins with its data directory
            mine = {"csn": wh.transaction_info(t.tid)["commit_csn"], "tid": t.tid, "ids": [7, 8],
                    "t0": float("-inf"), "t1": float("inf")}
            _check_commits(wh, [*commits, mine])
            report = _check_converged(wh, cluster.hosts, "/failover", tmp_path / "warehouse")
        finally:
            wh.close()
    return {"commits": len(commits) + 1, "killed": role, "retried_commits": sum(1 for c in commits if c["unavailable"]),
            "recovery": report}


def _rows(values: list[int]) -> Any:
    import pyarrow as pa

    return pa.table({"id": values, "writer": [0] * len(values)}, schema=SCHEMA)


def _wait_for_rows(wh: Warehouse, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(wh.read(TABLE)) < count:
        assert time.monotonic() < deadline, "the writer made no progress"
        time.sleep(0.1)


def test_server_harness_stops_by_pid(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk").start()
    assert server.proc is not None
    pid = server.proc.pid
    assert server.mode == "standalone"
    server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
