"""Several OS processes committing to the same tables at once: no lost commit, atomic visibility, conflicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_txn import Warehouse
from tests.core.workers.procs import Child, Spawn
from tests.core.workers.txn_worker import ID_SCHEMA, LEFT, RIGHT, TARGET, id_rows, sorted_ids

pytestmark = pytest.mark.slow

WRITERS = 2
COMMITS = 10
ROUNDS = 4
STEP_TIMEOUT = 30.0

def _writer_results(writer: Child) -> list[dict[str, Any]]:
    code = writer.wait(STEP_TIMEOUT * 3)
    lines = writer.messages()
    assert code == 0, f"writer failed ({code}): {lines}\n{writer.stderr}"
    assert lines[-1] == {"done": COMMITS}, lines
    commits = lines[:-1]
    assert len(commits) == COMMITS and all("csn" in c for c in commits), commits
    return commits


def _check_commit_log(wh: Warehouse, commits: list[dict[str, Any]]) -> None:
    """Every reported commit has its own record, CSNs are unique and contiguous, all applied."""
    csns = [c["csn"] for c in commits]
    assert len(set(csns)) == len(csns), f"two commits got the same CSN: {sorted(csns)}"
    log = sorted(wh.commit_log(limit=10_000), key=lambda r: r["csn"])
    assert [r["csn"] for r in log] == list(range(2, 2 + len(commits))), "commit log CSNs not contiguous from 2"
    assert {r["csn"]: r["tid"] for r in log} == {c["csn"]: c["tid"] for c in commits}
    assert all(r["applied"] and sorted(r["tables"]) == sorted([LEFT, RIGHT]) for r in log), log
    assert wh.readable_csn() == log[-1]["csn"]


def _check_reader(report: dict[str, Any], commits: list[dict[str, Any]]) -> None:
    """Every snapshot the reader took shows both tables with exactly the ids committed at or below it."""
    sequence = report["sequence"]
    assert sequence == sorted(sequence), "the readable watermark went backwards"
    assert len(set(sequence)) >= 2, f"the reader saw only CSNs {set(sequence)}: it never overlapped the writers"
    per_csn: dict[int, int] = {}
    for csn, left, right in report["samples"]:
        per_csn[csn] = per_csn.get(csn, 0) + 1
        expected = sorted(i for c in commits if c["csn"] <= csn for i in c["ids"])
        assert left == right, f"at CSN {csn} the tables differ: {set(left) ^ set(right)} (atomicity broken)"
        assert left == expected, f"at CSN {csn} the reader saw {left}, the commits up to it hold {expected}"
    assert all(n == 1 for n in per_csn.values()), f"one CSN read two different ways: {per_csn}"


def test_concurrent_writers_lose_nothing_and_reader_sees_atomic_snapshots(
        wh: Warehouse, spawn: Spawn, tmp_path: Path) -> None:
    wh.create_table(LEFT, ID_SCHEMA)
    wh.create_table(RIGHT, ID_SCHEMA)
    stop_file = tmp_path / "writers-done"
    reader = spawn("reader", stop_file, 90, 5_000)
    assert "ready" in reader.next(STEP_TIMEOUT)  # its first snapshot predates every commit
    writers = [spawn("writer", index + 1, COMMITS) for index in range(WRITERS)]
    commits = [c for w in writers for c in _writer_results(w)]
    stop_file.touch()
    assert reader.wait(STEP_TIMEOUT) == 0, reader.stderr
    (report,) = reader.messages()
    assert report["stopped"], "the reader hit its own bound before the writers finished"

    all_ids = sorted(i for c in commits for i in c["ids"])
    assert len(all_ids) == len(set(all_ids)) == WRITERS * COMMITS * 2
    _check_commit_log(wh, commits)
    csn = wh.readable_csn()
    assert sorted_ids(wh.read(LEFT, csn=csn)) == all_ids, "a committed id is missing or duplicated in LEFT"
    assert sorted_ids(wh.read(RIGHT, csn=csn)) == all_ids, "a committed id is missing or duplicated in RIGHT"
    _check_reader(report, commits)


def _round(a: Child, b: Child, number: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both begin (same snapshot), then both overwrite TARGET and commit at the same time."""
    a.send("begin")
    b.send("begin")
    begun = [a.next(STEP_TIMEOUT), b.next(STEP_TIMEOUT)]
    assert begun[0].get("begun") == begun[1].get("begun"), f"round {number}: snapshots differ: {begun}"
    a.send(f"go {number}")
    b.send(f"go {number}")
    return a.next(STEP_TIMEOUT), b.next(STEP_TIMEOUT)


def test_concurrent_overwrites_exactly_one_wins(wh: Warehouse, spawn: Spawn) -> None:
    wh.create_table(TARGET, ID_SCHEMA)
    with wh.begin() as t:
        t.append(TARGET, id_rows([1, 2, 3], 0))
    a, b = spawn("overwriter", 1, interactive=True), spawn("overwriter", 2, interactive=True)
    winners: list[dict[str, Any]] = []
    for number in range(ROUNDS):
        results = _round(a, b, number)
        assert not any("error" in r for r in results), results
        won = [r for r in results if "won" in r]
        lost = [r for r in results if "lost" in r]
        assert len(won) == 1 and len(lost) == 1, f"round {number}: expected one winner, one loser: {results}"
        assert lost[0]["state"] == "rolled_back", lost
        assert wh.transaction_info(lost[0]["tid"])["state"] == "rolled_back"
        winner = won[0]
        winners.append(winner)
        assert wh.readable_csn() == winner["won"]
        assert sorted_ids(wh.read(TARGET)) == winner["ids"], f"round {number}: not the winner's data"
    for child in (a, b):
        child.send("quit")
        assert child.wait(STEP_TIMEOUT) == 0, child.stderr
    assert sorted_ids(wh.read(TARGET)) == winners[-1]["ids"]
    assert [r["csn"] for r in sorted(wh.commit_log(limit=100), key=lambda r: r["csn"])] == list(range(2, 3 + ROUNDS))
    assert {w["won"] for w in winners} == set(range(3, 3 + ROUNDS))
    old = wh.read(TARGET, csn=winners[0]["won"])
    assert sorted_ids(old) == winners[0]["ids"], "time travel to the first winner's CSN shows other data"
