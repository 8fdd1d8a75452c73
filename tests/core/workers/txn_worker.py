"""A worker process for the multi-process and crash tests: `python -m tests.core.workers.txn_worker MODE ...`."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn import Transaction, Warehouse
from airflow_txn.core import crashpoints
from airflow_txn.core.leases import LeaseKeeper
from airflow_txn.errors import SerializationError
from tests.helpers import accounts, events

LEFT = "mp.left"
RIGHT = "mp.right"
TARGET = "mp.target"
ID_SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.int64())])

# Data the crash scenarios stage: ids 100/101 (events, a new partition) and 100 (accounts).
CRASH_EVENT_IDS = [100, 101]
CRASH_DAY = "2024-01-02"
CRASH_ACCOUNT_IDS = [100]
CRASH_TAG = "crashed-commit"  # the tag the `commit_tag` scenario names on its commit
CRASH_LEASE_SECONDS = 2.0
"""Short: after the kill the test waits it out. The worker renews it until then (`t.keep_alive`, every half of it,
so a worker that reaches its crash point within a second waits no longer than before): on a loaded machine staging a
MERGE in both tables took longer than the lease, which expired before the crash point (LeaseExpiredError, exit 1, in
the reliability suites of 2026-12-06). The keep_alive scenario renews every quarter (its crash point is in there)."""
# The re-staging scenario: attempts 1 and 2 of one task (one key) in a transaction the parent began;
# attempt 1 stages RETRY_IDS[1] in both tables, attempt 2 dies staging RETRY_IDS[2] (the parent runs attempt 3).
RETRY_KEY = "dag=crash/task=load/map=0"
RETRY_IDS = {1: [300, 301], 2: [400, 401]}
RETRY_DAYS = {1: "2024-01-03", 2: "2024-01-04"}


STATEMENT_VALUES = {1: 5, 2: 7}
"""The statement crash cells: the value attempt 1 stages, and the value every other attempt (and a one-shot
statement) stages."""


def merge_both(t: Transaction, value: int) -> None:
    """The MERGE of the statement crash cells, in both tables: an upsert into sales.events (updates id 1 of day
    2024-01-01, rewriting its part; inserts CRASH_EVENT_IDS on CRASH_DAY) and a sync of sales.accounts (updates id
    1, inserts CRASH_ACCOUNT_IDS, deletes what the source lacks)."""
    t.merge("sales.events", pa.concat_tables([events([1], value=float(value)),
                                              events(CRASH_EVENT_IDS, day=CRASH_DAY, value=float(value))]),
            on=["id", "day"])
    t.merge("sales.accounts", accounts({1: value, **dict.fromkeys(CRASH_ACCOUNT_IDS, value)}), on="id",
            when_not_matched_by_source="delete")


def change_both(t: Transaction, value: int) -> None:
    """The table changes of the statement crash cells, each followed by rows written under the new schema: in
    sales.events a rename (incompatible: value -> amount) and an added column `note`, then CRASH_EVENT_IDS on
    CRASH_DAY; in sales.accounts an added column `tier` with a default, then CRASH_ACCOUNT_IDS."""
    t.rename_column("sales.events", "value", "amount")
    t.add_column("sales.events", pa.field("note", pa.string()))
    rows = events(CRASH_EVENT_IDS, day=CRASH_DAY, value=float(value)).rename_columns(["id", "day", "amount"])
    t.append("sales.events", rows.append_column("note", pa.array([f"n{value}"] * len(CRASH_EVENT_IDS))))
    t.add_column("sales.accounts", pa.field("tier", pa.string()), default="std")
    added = accounts(dict.fromkeys(CRASH_ACCOUNT_IDS, value))
    t.append("sales.accounts", added.append_column("tier", pa.array(["gold"] * len(CRASH_ACCOUNT_IDS))))


STATEMENTS: dict[str, Callable[[Transaction, int], None]] = {"merge": merge_both, "table_change": change_both}
"""Kinds of statement the crash matrix kills a transaction around (tests/core/test_crash_points.py, statement
cells): each stages its change in both crash tables with a value. A schema change adds its kind here."""


def emit(payload: object) -> None:
    """One JSON line on stdout, flushed at once (the parent may be waiting for it)."""
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def id_rows(ids: list[int], writer: int) -> pa.Table:
    return pa.table({"id": ids, "writer": [writer] * len(ids)}, schema=ID_SCHEMA)


def sorted_ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def writer(wh: Warehouse, index: int, commits: int) -> None:
    """`commits` transactions, each appending the same fresh ids to both tables."""
    for n in range(commits):
        ids = [index * 100_000 + n * 10 + k for k in range(2)]
        t = wh.begin(label=f"writer-{index}-{n}")
        try:
            t.append(LEFT, id_rows(ids, index))
            t.append(RIGHT, id_rows(ids, index))
            csn = t.commit()
        except Exception as exc:
            emit({"error": f"{type(exc).__name__}: {exc}", "commit": n})
            raise
        emit({"csn": csn, "tid": t.tid, "ids": ids})
    emit({"done": commits})


def reader(wh: Warehouse, stop_file: str, max_seconds: float, max_reads: int) -> None:
    """Read both tables at one snapshot, again and again, until told to stop (bounded)."""
    deadline = time.monotonic() + max_seconds
    sequence: list[int] = []
    seen: set[tuple[int, tuple[int, ...], tuple[int, ...]]] = set()
    stopping = False
    while len(sequence) < max_reads and time.monotonic() < deadline:
        csn = wh.readable_csn()
        left = sorted_ids(wh.read(LEFT, csn=csn))
        right = sorted_ids(wh.read(RIGHT, csn=csn))
        if not sequence:
            emit({"ready": csn})
        sequence.append(csn)
        seen.add((csn, tuple(left), tuple(right)))
        if stopping:
            break
        stopping = os.path.exists(stop_file)  # one more read after the writers are all done
        time.sleep(0.01)  # leave the writers some CPU (two cores)
    emit({"sequence": sequence, "samples": sorted([c, list(a), list(b)] for c, a, b in seen),
          "stopped": stopping})


def overwriter(wh: Warehouse, index: int) -> None:
    """Line protocol on stdin: `begin` -> {begun}, `go R` -> overwrite TARGET and commit -> {won|lost}."""
    t = None
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            return
        if words[0] == "begin":
            t = wh.begin(label=f"overwriter-{index}")
            emit({"begun": t.snapshot_csn, "tid": t.tid})
        elif words[0] == "go" and t is not None:
            ids = [index * 1000 + int(words[1]) * 10 + k for k in range(3)]
            emit(_overwrite_and_commit(t, ids, index))
            t = None
        else:
            emit({"error": f"unexpected command {line.strip()!r}"})


def _overwrite_and_commit(t: Transaction, ids: list[int], index: int) -> dict[str, object]:
    try:
        t.overwrite(TARGET, id_rows(ids, index))
        csn = t.commit()
    except SerializationError as exc:
        if t.state == "active":
            t.rollback()
        return {"lost": str(exc), "tid": t.tid, "state": t.state}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "tid": t.tid}
    return {"won": csn, "tid": t.tid, "ids": ids}


def renewing(t: Transaction) -> LeaseKeeper:
    """The lease of `t` renewed every half of CRASH_LEASE_SECONDS until the block ends (or the kill)."""
    return t.keep_alive(interval=CRASH_LEASE_SECONDS / 2)


def crash(wh: Warehouse, scenario: str, *args: str) -> None:
    """Run the operation of `scenario`; with AIRFLOW_TXN_CRASH_AT set the process dies inside it."""
    if scenario == "vacuum":
        emit({"vacuum": True})
        emit({"survived": wh.vacuum(0)})
        return
    if scenario == "retry":
        retry(wh, args[0])
        return
    if scenario == "statement":
        statement(wh, *args)
        return
    if scenario == "keep_alive":
        keep_alive(wh)
        return
    if scenario == "compact":
        from airflow_txn.core import compaction

        emit({"compact": True})
        emit({"survived": compaction.compact(wh.runtime, "sales.events", lease_seconds=CRASH_LEASE_SECONDS)})
        return
    if scenario == "publish":
        publish(wh)
        return
    t = wh.begin(label=f"crash-{scenario}", lease_seconds=CRASH_LEASE_SECONDS)
    emit({"tid": t.tid})
    steps: dict[str, list[Callable[[], object]]] = {
        "append": [lambda: t.append("sales.events", events(CRASH_EVENT_IDS, day=CRASH_DAY))],
        "commit": [
            lambda: t.append("sales.events", events(CRASH_EVENT_IDS, day=CRASH_DAY)),
            lambda: t.append("sales.accounts", accounts(dict.fromkeys(CRASH_ACCOUNT_IDS, 1))),
            t.commit,
        ],
        "commit_tag": [
            lambda: t.append("sales.events", events(CRASH_EVENT_IDS, day=CRASH_DAY)),
            lambda: t.append("sales.accounts", accounts(dict.fromkeys(CRASH_ACCOUNT_IDS, 1))),
            lambda: t.commit(tag=CRASH_TAG),
        ],
        "rollback": [
            lambda: t.append("sales.events", events(CRASH_EVENT_IDS, day=CRASH_DAY)),
            lambda: t.update("sales.accounts", pc.field("id") == 1, {"balance": 99}),
            t.rollback,
        ],
    }
    with renewing(t):
        for step in steps[scenario]:
            step()
    emit({"survived": t.state})


def publish(wh: Warehouse) -> None:
    """A commit of both tables through a handle that publishes to Iceberg, then a publishing run: the process
    dies in the run (publish.mid_run: one table published, the other not), whichever thread runs it."""
    pub = Warehouse.open(catalog=wh.config.catalog_url, root=wh.config.root, publish="iceberg")
    t = pub.begin(label="crash-publish", lease_seconds=CRASH_LEASE_SECONDS)
    emit({"tid": t.tid})
    with renewing(t):
        t.append("sales.events", events(CRASH_EVENT_IDS, day=CRASH_DAY))
        t.append("sales.accounts", accounts(dict.fromkeys(CRASH_ACCOUNT_IDS, 1)))
        emit({"csn": t.commit()})
    emit({"survived": pub.publish()})


def retry(wh: Warehouse, tid: str) -> None:
    """Attempt 1 of a task stages both tables under RETRY_KEY; the crash point is armed only then, so
    the process dies inside attempt 2 (a retry re-staging under the same key)."""
    point = os.environ.pop(crashpoints.ENV_VAR, None)
    t = wh.attach(tid).use_key(RETRY_KEY, attempt=1)
    emit({"tid": t.tid})
    t.append("sales.events", events(RETRY_IDS[1], day=RETRY_DAYS[1]))
    t.append("sales.accounts", accounts(dict.fromkeys(RETRY_IDS[1], 3)))
    emit({"attempt": 1})
    if point is not None:
        crashpoints.arm(point)
    t.use_key(RETRY_KEY, attempt=2)
    t.append("sales.events", events(RETRY_IDS[2], day=RETRY_DAYS[2]))
    t.append("sales.accounts", accounts(dict.fromkeys(RETRY_IDS[2], 4)))
    emit({"survived": t.state})


def statement(wh: Warehouse, kind: str, ending: str, tid: str | None = None) -> None:
    """A statement of STATEMENTS[kind] in both crash tables, then `ending`: "commit" or "rollback" (its own
    transaction), or "retry": attempts 1 and 2 of RETRY_KEY in the parent's transaction `tid`, the crash point
    armed only for attempt 2 (as `retry` does)."""
    stage = STATEMENTS[kind]
    if ending == "retry":
        assert tid is not None
        point = os.environ.pop(crashpoints.ENV_VAR, None)
        t = wh.attach(tid).use_key(RETRY_KEY, attempt=1)
        emit({"tid": t.tid})
        stage(t, STATEMENT_VALUES[1])
        emit({"attempt": 1})
        if point is not None:
            crashpoints.arm(point)
        t.use_key(RETRY_KEY, attempt=2)
        stage(t, STATEMENT_VALUES[2])
        emit({"survived": t.state})
        return
    t = wh.begin(label=f"crash-{kind}-{ending}", lease_seconds=CRASH_LEASE_SECONDS)
    emit({"tid": t.tid})
    with renewing(t):
        stage(t, STATEMENT_VALUES[2])
        if ending == "commit":
            t.commit()
        else:
            t.rollback()
    emit({"survived": t.state})


def keep_alive(wh: Warehouse) -> None:
    """Stage both tables (renewing the lease meanwhile, the crash point not armed yet: as `retry` does), then keep
    the lease alive from the background thread with the point armed (it kills the process inside its first
    renewal)."""
    point = os.environ.pop(crashpoints.ENV_VAR, None)
    t = wh.begin(label="crash-keep_alive", lease_seconds=CRASH_LEASE_SECONDS)
    emit({"tid": t.tid})
    with renewing(t):
        t.append("sales.events", events(CRASH_EVENT_IDS, day=CRASH_DAY))
        t.append("sales.accounts", accounts(dict.fromkeys(CRASH_ACCOUNT_IDS, 1)))
    emit({"deadline": wh.transaction_info(t.tid)["lease_deadline"]})  # no renewal runs now: the last one's
    if point is not None:
        crashpoints.arm(point)
    with t.keep_alive(interval=CRASH_LEASE_SECONDS / 4):
        time.sleep(10 * CRASH_LEASE_SECONDS)
    emit({"survived": t.state})


def snapshot_reader(wh: Warehouse, table: str, csns_text: str, stop_file: str, max_seconds: float) -> None:
    """Read `table` at each listed CSN again and again until told to stop (bounded): what did each show?"""
    csns = [int(c) for c in csns_text.split(",")]
    seen: dict[int, set[tuple[int, ...]]] = {c: set() for c in csns}
    deadline = time.monotonic() + max_seconds
    rounds, stopping = 0, False
    while time.monotonic() < deadline:
        for csn in csns:
            seen[csn].add(tuple(sorted_ids(wh.read(table, csn=csn))))
        rounds += 1
        if rounds == 1:
            emit({"ready": csns})
        if stopping:
            break
        stopping = os.path.exists(stop_file)  # one more round after the compaction is done
    emit({"rounds": rounds, "seen": {str(c): sorted(list(v) for v in s) for c, s in seen.items()}})


def read_after(wh: Warehouse, read_csn: int, wait_csn: int) -> None:
    """Read both crash tables at `read_csn` directly, then at `wait_csn` after wait_for_csn."""
    for how, csn in (("read", read_csn), ("wait", wait_csn)):
        watermark = wh.wait_for_csn(csn, timeout=20) if how == "wait" else None
        emit({"how": how, "csn": csn, "watermark": watermark,
              "events": sorted_ids(wh.read("sales.events", csn=csn)),
              "accounts": sorted_ids(wh.read("sales.accounts", csn=csn)), "readable": wh.readable_csn()})


def main(argv: list[str]) -> None:
    mode, catalog, root, *rest = argv
    wh = Warehouse.open(catalog=catalog, root=root)
    try:
        if mode == "writer":
            writer(wh, int(rest[0]), int(rest[1]))
        elif mode == "reader":
            reader(wh, rest[0], float(rest[1]), int(rest[2]))
        elif mode == "overwriter":
            overwriter(wh, int(rest[0]))
        elif mode == "crash":
            crash(wh, rest[0], *rest[1:])
        elif mode == "read_after":
            read_after(wh, int(rest[0]), int(rest[1]))
        elif mode == "snapshot_reader":
            snapshot_reader(wh, rest[0], rest[1], rest[2], float(rest[3]))
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    finally:
        wh.close()


if __name__ == "__main__":
    main(sys.argv[1:])
    # Done: leave without the interpreter's shutdown. On an s3:// root pyarrow's S3 finalization at exit can abort
    # the process ("terminate called without an active exception", SIGABRT) after all its work was reported
    # (apache/arrow#34314, #41087), which a test would read as this worker's failure.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
