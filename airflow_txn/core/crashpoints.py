"""Named crash points: places in the protocols where a test may SIGKILL the process.

A process dies at point P when the environment variable AIRFLOW_TXN_CRASH_AT equals P (or when
`arm(P)` was called in it). Tests start a child with the variable set, let it die there, then
check that `Warehouse.recover()` converges to the invariants. In production nothing is armed and
`hit` is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from typing import Final

from airflow_txn import environment

ENV_VAR: Final = environment.CRASH_AT

STAGE_AFTER_FILES: Final = "stage.after_files"  # part files written, not yet registered
# A keyed write (a task attempt) re-staging: its files written, the key's earlier attempts still staged.
STAGE_RETRY_AFTER_FILES: Final = "stage.retry_after_files"
# Inside the registering catalog transaction: earlier attempts compensated, new parts not yet
# registered; the kill must abort that transaction as a whole (nothing compensated, nothing registered).
STAGE_RETRY_MID_REGISTER: Final = "stage.retry_mid_register"
COMMIT_BEFORE_RECORD: Final = "commit.before_record"  # checks passed, no commit record yet
# The commit point being taken, not yet taken: SQL oracle - CSN allocated inside the open catalog
# transaction that writes the record; ZooKeeper - the catalog says committing, the log has no record.
COMMIT_MID_RECORD: Final = "commit.mid_record"
# ZooKeeper: record written (committed), nothing applied. SQL oracle: the record, the state flip and
# the stamps are ONE catalog transaction, so at this point and the next two the commit is whole.
COMMIT_AFTER_RECORD: Final = "commit.after_record"
# ZooKeeper: the record is in the catalog too (mirrored, state committed), nothing applied.
COMMIT_AFTER_MIRROR: Final = "commit.after_mirror"
COMMIT_MID_APPLY: Final = "commit.mid_apply"  # ZooKeeper: some tables stamped, others not
ROLLBACK_MID: Final = "rollback.mid"  # state rolled_back, some tables' parts not yet compensated
VACUUM_MID: Final = "vacuum.mid"  # a batch of garbage parts' files deleted, their catalog rows not yet
LEASE_MID_RENEW: Final = "lease.mid_renew"  # a heartbeat's lease extension written, not committed
COMPACT_AFTER_FILES: Final = "compact.after_files"  # a merge's files written, its swap not done
COMPACT_AFTER_SWAP: Final = "compact.after_swap"  # one merge swapped, the compaction's later groups not begun
# A publishing run (after a commit stands): one table's Iceberg snapshot committed, the run's other tables not yet.
PUBLISH_MID_RUN: Final = "publish.mid_run"

ALL: Final = (STAGE_AFTER_FILES, STAGE_RETRY_AFTER_FILES, STAGE_RETRY_MID_REGISTER, COMMIT_BEFORE_RECORD,
              COMMIT_MID_RECORD, COMMIT_AFTER_RECORD, COMMIT_AFTER_MIRROR, COMMIT_MID_APPLY, ROLLBACK_MID,
              VACUUM_MID, LEASE_MID_RENEW, COMPACT_AFTER_FILES, COMPACT_AFTER_SWAP, PUBLISH_MID_RUN)

_armed: set[str] = set()


def arm(name: str) -> None:
    """Make this process die at `name` (tests only)."""
    if name not in ALL:
        raise ValueError(f"unknown crash point {name!r}; known: {', '.join(ALL)}")
    _armed.add(name)


def hit(name: str) -> None:
    """Die here with SIGKILL if this crash point is armed."""
    if name in _armed or environment.crash_point() == name:
        os.kill(os.getpid(), signal.SIGKILL)
