"""CommitCSNTrigger: wait in the triggerer until a CSN is readable, or a tag exists (CommitCSNSensor, deferred).

A trigger does the sensor's full check (`snapshot_ready`: applies pending records, checks the
tables) when it starts, then whenever the readable watermark moves, and at the latest every
`poke_interval`. The watermark (two index look-ups) is read every `watch_interval` seconds by ONE of
the triggers waiting on a warehouse in the event loop, taking turns (`_Watch`); the others are woken
by it. So a commit releases its waiters within about `watch_interval` whatever their poke_interval,
and a thousand deferred sensors cost the catalog one small query per interval, not a thousand. The
poller reads through its own warehouse handle, so the watch owns nothing that could outlive a
trigger. A committer that died before applying its record does not move the watermark: the check
every poke_interval applies its record, as the poking sensor does. A wait for a tag (`tag`) is the same
loop with `tag_ready` as its check: making a tag does not move the watermark, so it is seen at the latest
every poke_interval.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook, snapshot_ready, tag_ready
from airflow_txn.airflow.version_compat import BaseTrigger, TriggerEvent
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import ConnectionNotFoundError, InvalidArgumentError, InvalidNameError, TableNotInTagError

log = logging.getLogger(__name__)

WATCH_INTERVAL = 0.2
"""Seconds between two reads of a warehouse's readable watermark in a triggerer (default)."""

FINAL_ERRORS = (ConnectionNotFoundError, InvalidArgumentError, InvalidNameError, TableNotInTagError)
"""Errors in what the wait was asked (a CSN out of the catalog's range, a malformed table name, a tag that
does not hold a table the wait names): no try
can get past them. Any other error (the catalog or the oracle unreachable, a connection being fixed) may
pass by the next try, so the sensor leaves it to Airflow's retries."""


class CommitCSNTrigger(BaseTrigger):
    """Fires one TriggerEvent once `csn` (and a commit of each of `tables` at or after it) is readable, or,
    with `tag`, once that tag exists (holding each of `tables`); the event's csn is then the tag's.

    The event payload is `{"status": "success", "csn": snapshot}` or `{"status": "error", "csn": csn,
    "message": ..., "final": bool}` (`final`: the error is one of FINAL_ERRORS, no retry can help).
    Catalog calls run in a worker thread: the triggerer's event loop never blocks.
    """

    def __init__(self, csn: int, tables: Sequence[str] | None = None, conn_id: str = DEFAULT_CONN_ID,
                 poke_interval: float = 5.0, watch_interval: float = WATCH_INTERVAL, tag: str | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.csn = int(csn)
        self.tables = list(tables or [])
        self.tag = tag
        self.conn_id = conn_id
        self.poke_interval = float(poke_interval)
        self.watch_interval = float(watch_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"csn": self.csn, "tables": self.tables, "conn_id": self.conn_id,
                 "poke_interval": self.poke_interval, "watch_interval": self.watch_interval, "tag": self.tag})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            snapshot = await self._wait()
        except Exception as exc:
            self.log.exception("waiting for %s failed", f"tag {self.tag!r}" if self.tag else f"CSN {self.csn}")
            yield TriggerEvent(  # type: ignore[no-untyped-call]
                {"status": "error", "csn": self.csn, "message": f"{type(exc).__name__}: {exc}",
                 "final": isinstance(exc, FINAL_ERRORS)})
            return
        yield TriggerEvent({"status": "success", "csn": snapshot})  # type: ignore[no-untyped-call]

    async def _wait(self) -> int:
        config = await TxnHook(conn_id=self.conn_id).aconfig()
        watch = _Watch.of((config.catalog_url, str(config.root), config.oracle))
        wh = await asyncio.to_thread(Warehouse.open, config.catalog_url, config.root, config.oracle,
                                     storage_options=dict(config.storage_options),
                                     connect_timeout=config.connect_timeout)
        try:
            while True:
                seen = watch.value
                if self.tag is None:
                    snapshot = await asyncio.to_thread(snapshot_ready, wh, self.csn, self.tables)
                else:
                    snapshot = await asyncio.to_thread(tag_ready, wh, self.tag, self.tables)
                if snapshot is not None:
                    self.log.info("%s is readable: snapshot %d", f"tag {self.tag!r}" if self.tag else f"CSN {self.csn}",
                                  snapshot)
                    return snapshot
                await watch.moved_past(seen, wh, self.watch_interval, timeout=self.poke_interval)
        finally:
            await asyncio.to_thread(wh.close)


class _Watch:
    """The readable watermark of one warehouse as the triggers of one event loop last saw it.

    A waiting trigger finding nobody polling becomes the poller: it reads the watermark every
    interval through its own handle until the watermark passes what it waits for or its time is up,
    then hands over to the next waiter. Every read wakes every waiter."""

    _registry: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str, str], _Watch]] = (
        weakref.WeakKeyDictionary())

    def __init__(self) -> None:
        self.value = -1  # the last watermark read (-1: none yet)
        self.polling = False
        self._tick = asyncio.Event()

    @classmethod
    def of(cls, key: tuple[str, str, str]) -> _Watch:
        """The watch of warehouse `key` (catalog URL, root, oracle) in the running event loop."""
        watches = cls._registry.setdefault(asyncio.get_running_loop(), {})
        return watches.setdefault(key, cls())

    async def moved_past(self, seen: int, wh: Warehouse, interval: float, timeout: float) -> None:
        """Return once the watermark is above `seen` (or was since `seen` was read), or after `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.value <= seen:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            if self.polling:  # another trigger reads: wait for its next read (or its hand-over)
                tick = self._tick
                try:
                    await asyncio.wait_for(tick.wait(), remaining)
                except TimeoutError:
                    return
                continue
            self.polling = True
            try:
                await asyncio.sleep(min(interval, remaining))
                value = await asyncio.to_thread(wh.readable_csn)
                self.value = max(self.value, value)
            except Exception:  # the full check reports catalog errors; the watch just wakes nobody
                log.debug("reading the readable watermark failed", exc_info=True)
            finally:
                self.polling = False
                self._tick.set()
                self._tick = asyncio.Event()
