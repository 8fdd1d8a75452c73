"""A committer process for the ZooKeeper tests: `python -m tests.zookeeper.worker CATALOG ROOT ORACLE INDEX N`.

Commits N transactions, each appending two fresh ids to TABLE, and prints one JSON line per commit
with its CSN and the wall-clock times just before commit() and just after it returned. A commit that
meets OracleUnavailableError is retried (commit() resumes; bounded by RETRY_SECONDS), so the process
rides out ZooKeeper restarts and leader elections.
"""

from __future__ import annotations

import json
import sys
import time

import pyarrow as pa

from airflow_txn import Warehouse
from airflow_txn.errors import OracleUnavailableError

TABLE = "zk.t"
SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.int64())])
RETRY_SECONDS = 90.0


def emit(payload: object) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def commit_with_retries(wh: Warehouse, ids: list[int], index: int) -> dict[str, object]:
    t = wh.begin(label=f"zk-writer-{index}")
    t.append(TABLE, pa.table({"id": ids, "writer": [index] * len(ids)}, schema=SCHEMA))
    deadline = time.monotonic() + RETRY_SECONDS
    unavailable = 0
    started = time.time()
    while True:
        try:
            csn = t.commit()
            return {"csn": csn, "tid": t.tid, "ids": ids, "t0": started, "t1": time.time(),
                    "unavailable": unavailable}
        except OracleUnavailableError:
            unavailable += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main(argv: list[str]) -> None:
    catalog, root, oracle, index, count = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4])
    pause = float(argv[5]) if len(argv) > 5 else 0.0
    wh = Warehouse.open(catalog=catalog, root=root, oracle=oracle)
    try:
        for n in range(count):
            emit(commit_with_retries(wh, [index * 100_000 + n * 10 + k for k in range(2)], index))
            time.sleep(pause)
        emit({"done": count})
    finally:
        wh.close()


if __name__ == "__main__":
    main(sys.argv[1:])
