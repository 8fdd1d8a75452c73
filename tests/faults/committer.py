"""A committer process for the service-fault tests:
`python -m tests.faults.committer CATALOG ROOT INDEX COUNT PAUSE STOP_FILE`.

Runs COUNT transactions, each appending the same two fresh ids to LEFT and RIGHT, and prints one JSON line per
transaction: {"csn"} when commit() returned (acknowledged), else {"error", "phase"} with the exception's class; after
a failure it tries to roll back (which may fail too while the service is down: then the lease runs out and recovery
settles it). It never stops early on an error, so it rides out a restart of the catalog; it stops before COUNT once
STOP_FILE exists (the test makes it once it has restarted the service, so the committers are at work during the
restart whatever the machine's speed).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pyarrow as pa

from airflow_txn import Warehouse
from airflow_txn.errors import TxnError

LEFT, RIGHT = "faults.left", "faults.right"
SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.int64())])
LEASE_SECONDS = 10.0
"""Long enough for a fresh process's first append on a loaded 2-core machine (3 s ran out there: the append failed,
which the test refuses); short enough for the test's recovery to see abandoned leases end within its minute."""


def emit(payload: object) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def rows(ids: list[int], index: int) -> pa.Table:
    return pa.table({"id": ids, "writer": [index] * len(ids)}, schema=SCHEMA)


def _error(exc: BaseException) -> dict[str, object]:
    return {"error": type(exc).__name__, "txn_error": isinstance(exc, TxnError), "message": str(exc)[:600]}


def one(wh: Warehouse, index: int, n: int) -> dict[str, object]:
    ids = [index * 100_000 + n * 10 + k for k in range(2)]
    try:
        t = wh.begin(label=f"faults-{index}-{n}", lease_seconds=LEASE_SECONDS)
    except Exception as exc:
        return {"n": n, "phase": "begin", **_error(exc)}
    phase = "stage"
    try:
        t.append(LEFT, rows(ids, index))
        t.append(RIGHT, rows(ids, index))
        phase = "commit"
        csn = t.commit()
    except Exception as exc:
        out = {"n": n, "tid": t.tid, "ids": ids, "phase": phase, **_error(exc)}
        try:
            t.rollback(reason=f"{phase} failed")
            out["rolled_back"] = True
        except Exception as again:
            out["rollback_error"] = type(again).__name__
        return out
    return {"n": n, "tid": t.tid, "ids": ids, "csn": csn}


def main(argv: list[str]) -> None:
    catalog, root, index, count, pause = argv[0], argv[1], int(argv[2]), int(argv[3]), float(argv[4])
    stop = Path(argv[5])
    wh = Warehouse.open(catalog=catalog, root=root)
    try:
        n = 0
        while n < count and not stop.exists():
            emit(one(wh, index, n))
            n += 1
            time.sleep(pause)
        emit({"done": n})
    finally:
        wh.close()


if __name__ == "__main__":
    main(sys.argv[1:])
