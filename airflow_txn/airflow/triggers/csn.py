"""CommitCSNTrigger: wait in the triggerer until a CSN is readable (CommitCSNSensor, deferred)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook, config_from_extra, snapshot_ready
from airflow_txn.airflow.version_compat import BaseTrigger, TriggerEvent
from airflow_txn.warehouse import Warehouse


class CommitCSNTrigger(BaseTrigger):
    """Fires one TriggerEvent once `csn` (and a commit of each of `tables` at or after it) is readable.

    The event payload is `{"status": "success", "csn": snapshot}` or `{"status": "error",
    "message": ...}`. Catalog calls run in a worker thread: the triggerer's event loop never blocks.
    """

    def __init__(self, csn: int, tables: Sequence[str] | None = None, conn_id: str = DEFAULT_CONN_ID,
                 poke_interval: float = 5.0) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.csn = int(csn)
        self.tables = list(tables or [])
        self.conn_id = conn_id
        self.poke_interval = float(poke_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"csn": self.csn, "tables": self.tables, "conn_id": self.conn_id,
                 "poke_interval": self.poke_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            snapshot = await self._wait()
        except Exception as exc:
            self.log.exception("waiting for CSN %d failed", self.csn)
            yield TriggerEvent(  # type: ignore[no-untyped-call]
                {"status": "error", "csn": self.csn, "message": f"{type(exc).__name__}: {exc}"})
            return
        yield TriggerEvent({"status": "success", "csn": snapshot})  # type: ignore[no-untyped-call]

    async def _wait(self) -> int:
        config = config_from_extra(await TxnHook(conn_id=self.conn_id).aextra())
        wh = await asyncio.to_thread(Warehouse.open, config.catalog_url, config.root, config.oracle)
        try:
            while True:
                snapshot = await asyncio.to_thread(snapshot_ready, wh, self.csn, self.tables)
                if snapshot is not None:
                    self.log.info("CSN %d is readable: snapshot %d", self.csn, snapshot)
                    return snapshot
                await asyncio.sleep(self.poke_interval)
        finally:
            await asyncio.to_thread(wh.close)
