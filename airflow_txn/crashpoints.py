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

ENV_VAR: Final = "AIRFLOW_TXN_CRASH_AT"

STAGE_AFTER_FILES: Final = "stage.after_files"  # part files written, not yet registered
COMMIT_BEFORE_RECORD: Final = "commit.before_record"  # checks passed, no commit record yet
COMMIT_AFTER_RECORD: Final = "commit.after_record"  # record written (committed), nothing applied
COMMIT_MID_APPLY: Final = "commit.mid_apply"  # some tables stamped, others not
ROLLBACK_MID: Final = "rollback.mid"  # state rolled_back, some tables' parts not yet compensated
VACUUM_MID: Final = "vacuum.mid"  # a part's files deleted, its catalog row not yet

ALL: Final = (STAGE_AFTER_FILES, COMMIT_BEFORE_RECORD, COMMIT_AFTER_RECORD, COMMIT_MID_APPLY, ROLLBACK_MID,
              VACUUM_MID)

_armed: set[str] = set()


def arm(name: str) -> None:
    """Make this process die at `name` (tests only)."""
    if name not in ALL:
        raise ValueError(f"unknown crash point {name!r}; known: {', '.join(ALL)}")
    _armed.add(name)


def hit(name: str) -> None:
    """Die here with SIGKILL if this crash point is armed."""
    if name in _armed or os.environ.get(ENV_VAR) == name:
        os.kill(os.getpid(), signal.SIGKILL)
