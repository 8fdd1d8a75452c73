"""What every CSN oracle provides to the commit protocol and to readers."""

from __future__ import annotations

from abc import ABC, abstractmethod

from sqlalchemy import Connection


class CsnOracle(ABC):
    """Allocates CSNs at commit and tells the readable watermark (invariant 4)."""

    name: str

    @abstractmethod
    def next_csn(self, conn: Connection) -> int:
        """Allocate the next CSN inside the catalog transaction that writes the commit record.

        Holds a lock until that transaction ends, so records appear in CSN order.
        """

    @abstractmethod
    def last_csn(self, conn: Connection) -> int:
        """The largest CSN allocated so far (PREHISTORIC_CSN before any commit)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (ZooKeeper sessions); the SQL oracle has none of its own."""
