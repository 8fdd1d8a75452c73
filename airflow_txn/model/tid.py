"""Transaction ids: `(start_csn, local_tid, host_id)` (docs/DESIGN.md, data model), printable and parseable.

A tid is known at begin, unique across every process of every machine that shares a warehouse:
`host_id` is random per process (64 bits), `local_tid` counts within that process, `start_csn` is
the snapshot the transaction started from (useful for introspection only). `is_prefix` tells whether a
text can begin one (a short tid typed on the command line).
"""

from __future__ import annotations

import itertools
import re
import secrets
import threading
from dataclasses import dataclass

from airflow_txn.errors import InvalidNameError

_TID_RE = re.compile(r"(\d{1,19})-(\d{1,19})-([0-9a-f]{16})")
_PREFIX_RE = re.compile(r"\d{1,19}(?:-(?:\d{1,19}(?:-[0-9a-f]{0,16})?)?)?")


@dataclass(frozen=True, slots=True, order=True)
class Tid:
    """A transaction id; `str(tid)` is `start_csn-local_tid-host_id` and `Tid.parse` reads it back."""

    start_csn: int
    local_tid: int
    host_id: str

    def __str__(self) -> str:
        return f"{self.start_csn}-{self.local_tid}-{self.host_id}"

    @classmethod
    def parse(cls, text: object) -> Tid:
        """Parse a printed tid; a malformed one raises InvalidNameError naming the expected form."""
        if not isinstance(text, str):
            raise InvalidNameError(f"a tid is a string like '5-1-0123456789abcdef', got {type(text).__name__}")
        match = _TID_RE.fullmatch(text.strip())
        if match is None:
            raise InvalidNameError(
                f"malformed tid {text!r}: expected '<start_csn>-<local_tid>-<16 hex digits>', "
                "as printed by Transaction.tid"
            )
        return cls(int(match.group(1)), int(match.group(2)), match.group(3))


def is_prefix(text: str) -> bool:
    """Whether `text` can begin a printed tid (`17`, `17-3-`, `17-3-9f0c`; a whole tid is one too): the
    short form a person may type, like git's abbreviated hashes (Warehouse.resolve_tid)."""
    return _PREFIX_RE.fullmatch(text) is not None


class TidFactory:
    """Makes the tids of one process: a random host id and a thread-safe counter."""

    def __init__(self, host_id: str | None = None) -> None:
        self.host_id = host_id or secrets.token_hex(8)
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def next(self, start_csn: int) -> Tid:
        with self._lock:
            local = next(self._counter)
        return Tid(start_csn, local, self.host_id)
