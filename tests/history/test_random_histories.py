"""Randomized concurrent histories (issue 6) on every catalog (SQLite, PostgreSQL, PostgreSQL + ZooKeeper).

Writer and reader processes run random transactions (MERGE and table changes among them) against one warehouse for
a bounded time while the driver SIGKILLs some of them; the recorded history is then judged by tests/history/checker.py,
which shares no code with the engine. Then the same history, corrupted in a few known ways, must be
rejected, so a checker that stopped looking would fail here too.

Knobs: AIRFLOW_TXN_SOAK_SECONDS (run time per catalog, default 30), AIRFLOW_TXN_SOAK_PROCESSES
(worker processes, default 5: a third readers, the rest writers), AIRFLOW_TXN_HISTORY_SEED (the seed
of every random choice; printed). A seed fixes the workload's and the driver's choices, not the
interleaving the operating system picks, so a failure reproduces by rerunning with its seed, maybe a few times.
"""

from __future__ import annotations

import copy
import itertools
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import evidence
from tests.history import checker
from tests.history.driver import RunConfig, RunResult, run_history

SECONDS = float(os.environ.get("AIRFLOW_TXN_SOAK_SECONDS", "30"))
PROCESSES = int(os.environ.get("AIRFLOW_TXN_SOAK_PROCESSES", "5"))
SEED = os.environ.get("AIRFLOW_TXN_HISTORY_SEED")

# a run may stretch to 3x SECONDS on a slow machine, plus start-up, settling and checking
pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(SECONDS * 4) + 300)]
Event = dict[str, Any]


def config() -> RunConfig:
    readers = max(1, PROCESSES // 3)
    return RunConfig(seconds=SECONDS, writers=max(1, PROCESSES - readers), readers=readers)


# -- known corruptions of a real history, and what the checker must call them ----------------------------

def _final(events: list[Event]) -> Event:
    return next(e for e in events if e["ev"] == "snapread" and e["how"] == "final")


def _acked_writes(events: list[Event]) -> list[Event]:
    """The `end` events of acknowledged commits that wrote something (a CSN after their snapshot)."""
    snaps = {e["tok"]: e["snap"] for e in events if e["ev"] == "begin"}
    return [e for e in events if e["ev"] == "end" and e["outcome"] == "committed" and e["csn"] != snaps[e["tok"]]
            and e["tok"] != "setup.1"]


def drop_a_committed_row(events: list[Event], rng: random.Random) -> bool:
    final = _final(events)
    candidates = [(t, r) for t, rows in final["tables"].items() for r in rows]
    if not candidates:
        return False
    table, row = rng.choice(candidates)
    final["tables"][table].remove(row)
    return True


def duplicate_a_row(events: list[Event], rng: random.Random) -> bool:
    reads = [(e, t) for e in events if e["ev"] == "snapread" for t, rows in e["tables"].items() if rows]
    if not reads:
        return False
    read, table = rng.choice(reads)
    read["tables"][table].append(rng.choice(read["tables"][table]))
    return True


def show_an_aborted_row(events: list[Event], rng: random.Random) -> bool:
    aborted = {e["tok"] for e in events if e["ev"] == "end" and e["outcome"] != "committed"}
    listed = _final(events)["tables"]  # not the namespace's tables (`named`)
    rows = [(e["table"], r) for e in events if e["ev"] == "op" and e["op"] == "append" and e["tok"] in aborted
            and e["table"] in listed for r in e["rows"]]
    if not rows:
        return False
    table, row = rng.choice(rows)
    _final(events)["tables"][table].append(row)
    return True


def report_a_commit_as_aborted(events: list[Event], rng: random.Random) -> bool:
    ends = _acked_writes(events)
    if not ends:
        return False
    end = rng.choice(ends)
    end.update(outcome="aborted", err="SerializationError")
    return True


def swap_two_csns(events: list[Event], rng: random.Random) -> bool:
    """Commits a then b, where b began before a committed and began committing after a ended: swapped CSNs."""
    snaps = {e["tok"]: e["snap"] for e in events if e["ev"] == "begin"}
    ends = sorted(_acked_writes(events), key=lambda e: e["csn"])
    pairs = [(a, b) for a, b in itertools.pairwise(ends) if b["t0"] > a["t"] and snaps[b["tok"]] < a["csn"]]
    if not pairs:
        return False
    a, b = rng.choice(pairs)
    a["csn"], b["csn"] = b["csn"], a["csn"]
    return True


def miscount_a_merge(events: list[Event], rng: random.Random) -> bool:
    """A merge reports one row more updated than it had at its snapshot."""
    merges = [e for e in events if e["ev"] == "op" and e["op"] == "merge"]
    if not merges:
        return False
    rng.choice(merges)["n"][0] += 1
    return True


def misname_a_column(events: list[Event], rng: random.Random) -> bool:
    """A read of hist.wide reports one of its columns under another name (a rename seen at the wrong CSN)."""
    reads = [e for e in events if e["ev"] == "snapread" for cols in e.get("schemas", {}).values() if len(cols) > 4]
    if not reads:
        return False
    cols = rng.choice([c for c in rng.choice(reads)["schemas"].values() if len(c) > 4])
    rng.choice(cols[4:])[1] += "_renamed"
    return True


def misname_a_table(events: list[Event], rng: random.Random) -> bool:
    """A snapshot read lists a table of the namespace under a name it did not have at that CSN."""
    namespace = next(e for e in events if e["ev"] == "setup").get("namespace", [])
    reads = [e for e in events if e["ev"] == "snapread" and e.get("named") and len(e["named"]) < len(namespace)]
    if not reads:
        return False
    named = rng.choice(reads)["named"]
    old, new = rng.choice(sorted(named)), rng.choice([n for n in namespace if n not in named])
    named[new] = named.pop(old)
    return True


MUTATIONS: list[tuple[Callable[[list[Event], random.Random], bool], set[str]]] = [
    (miscount_a_merge, {"inconsistent_txn_read", "not_serializable", "unvalidated_merge"}),
    (drop_a_committed_row, {"lost_commit", "torn_read"}),
    (duplicate_a_row, {"duplicate_row"}),
    (show_an_aborted_row, {"dirty_read"}),
    (report_a_commit_as_aborted, {"phantom_commit"}),
    (swap_two_csns, {"csn_order"}),
    (misname_a_column, {"wrong_schema"}),
    (misname_a_table, {"wrong_tables"}),
]


def _check_mutations(events: list[Event], seed: int) -> int:
    rng = random.Random(seed)
    applied = 0
    for mutate, expected in MUTATIONS:
        bad = copy.deepcopy(events)
        if not mutate(bad, rng):
            continue
        applied += 1
        kinds = checker.check(bad).kinds()
        assert kinds & expected, f"{mutate.__name__}: expected {expected}, the checker found {kinds or 'nothing'}"
    return applied


def _crash_report(result: RunResult) -> str:
    """What each crashed worker recorded as its error (type, message, trace), and its stderr's tail, so a
    CI log shows the cause without the history directory."""
    lines: list[str] = []
    for name in result.crashed:
        errors = [e for e in checker.load([result.directory / f"{name}.jsonl"]) if e.get("ev") == "error"]
        for e in errors:
            lines.append(f"{name}: {e.get('err')}: {e.get('msg')}\n{e.get('trace', '')}")
        stderr = result.directory / f"{name}.stderr"
        if stderr.exists():
            lines.append(f"{name} stderr (tail):\n{stderr.read_text(errors='replace')[-3000:]}")
    return "\n".join(lines)


# -- the test -------------------------------------------------------------------------------------------

def test_random_concurrent_histories(catalog_url: str, root: Path, tmp_path: Path, request: pytest.FixtureRequest,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    backend = request.node.callspec.params["catalog_url"]
    seed = int(SEED) if SEED else random.SystemRandom().randrange(1_000_000)
    cfg = config()
    header = (f"history {backend} seed {seed}: {cfg.writers} writers + {cfg.readers} readers for {cfg.seconds:.0f}s; "
              f"reproduce: AIRFLOW_TXN_HISTORY_SEED={seed} pytest tests/history -k '{backend}]'")
    print(header)
    result = run_history(catalog_url, root, tmp_path / "history", seed, cfg)
    events = checker.load(result.directory)
    report = checker.check(events)
    stats = report.stats
    details = {k: stats[k] for k in ("txns", "committed", "committed_writes", "committed_serializable", "aborted",
                                     "rolled_back", "unknown", "unknown_committed", "abandoned", "reads",
                                     "txn_reads", "statements", "committed_merges", "committed_validated_merges",
                                     "committed_changes", "committed_incompatible_changes", "rolled_back_changes",
                                     "killed", "allowed_constraint_breaks")}
    details.update(seed=seed, backend=backend, seconds=round(result.seconds, 1), processes=cfg.writers + cfg.readers,
                   violations=sorted(report.kinds()))
    try:
        assert not result.crashed, (f"workers {result.crashed} failed on their own; see {result.directory}/*.stderr\n"
                                    + _crash_report(result))
        assert not result.hung, f"workers {result.hung} did not stop when asked"
        assert report.ok, f"{header}\nhistory in {result.directory}\n{report.summary()}"
        assert stats["committed_writes"] >= 20, f"too little work to judge: {stats}"
        assert stats["killed"] >= 1 and stats["reads"] >= 10, stats
        assert stats["committed_validated_merges"] >= 1, f"no merge that inserted committed: {stats}"
        assert stats["committed_changes"] >= 1, f"no table change committed: {stats}"
        details["mutations_caught"] = _check_mutations(events, seed)
        assert details["mutations_caught"] >= 4, "the history gave too few chances to corrupt it"
    except AssertionError:
        evidence.record("histories", f"{backend}-seed{seed}", False, **details)
        raise
    evidence.record("histories", f"{backend}-seed{seed}", True, **details)
    with capsys.disabled():
        print(f"\n{header}\n  checked {stats['txns']} transactions ({stats['committed']} committed, "
              f"{stats['aborted']} aborted, {stats['unknown']} unknown outcome, {stats['abandoned']} abandoned), "
              f"{stats['reads']} snapshot reads, {stats['killed']} processes killed, in {result.seconds:.0f}s")
