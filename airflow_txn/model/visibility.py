"""The visibility rule of invariant 2 (docs/DESIGN.md) as a pure function.

Part p is visible to transaction T with snapshot S iff
    (p.creation_tid == T.tid and p.removal_tid != T.tid)
 or (p.creation_csn set and <= S and not (p.removal_csn set and <= S) and p.removal_tid != T.tid).
A reader outside any transaction uses tid None, which matches no part's tids.
The same rule as the SQL clause every read runs is catalog/visibility_sql.py (the catalog owns every
statement); tests/core/test_visibility.py checks that the two agree on every combination.
"""

from __future__ import annotations

from typing import NamedTuple


class VersionInfo(NamedTuple):
    """The four version columns of a part (a named tuple: one is built per part a lookup returns)."""

    creation_tid: str
    creation_csn: int | None
    removal_tid: str | None
    removal_csn: int | None


def is_visible(part: VersionInfo, tid: str | None, snapshot: int) -> bool:
    """Invariant 2, literally."""
    removed_by_me = tid is not None and part.removal_tid == tid
    if tid is not None and part.creation_tid == tid and not removed_by_me:
        return True
    created = part.creation_csn is not None and part.creation_csn <= snapshot
    removed = part.removal_csn is not None and part.removal_csn <= snapshot
    return created and not removed and not removed_by_me

