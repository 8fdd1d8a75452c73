"""CommitLogTrigger: an Asset watcher's event trigger on the warehouse's commit log, so that commits made
outside Airflow (a plain Python job, a notebook, another scheduler) schedule the DAGs that read a table.

Airflow runs it in the triggerer for as long as a DAG declares the watched Asset (assets.commit_watcher).
It reads the readable commits above its cursor every `poll_interval` seconds (one index range scan:
Warehouse.commits_after) and fires one TriggerEvent per commit that touched one of its tables; Airflow
turns each into an Asset event whose extra is `{"from_trigger": true, "payload": <the event's payload>}`
(readers.snapshot_of reads the CSN from either form). With `include_airflow=False` the commits an Airflow
task made (their transaction metadata has `"airflow"`: CommitTransactionOperator emits their events on the
table's Asset itself) are left out. Compaction merges write no commit record and never fire.

The cursor (the last CSN looked at) is kept in Airflow's asset state store (`asset_state_store`, key
CURSOR_KEY) after every event and every batch, so a restarted triggerer goes on where it stopped: each
commit fires at least once. A trigger with no stored cursor starts above `after_csn`, else above the
readable watermark it first reads (commits before the watch are not news).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook
from airflow_txn.airflow.version_compat import BaseEventTrigger, TriggerEvent
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.model.names import parse_table_name
from airflow_txn.model.results import LoggedCommit

CURSOR_KEY = "airflow_txn.commit_log_cursor"
"""The asset state store key holding the last CSN the trigger looked at."""
BATCH = 100
"""Commit records read per catalog query (a backlog is read batch after batch without sleeping)."""


class CommitLogTrigger(BaseEventTrigger):
    """Fires `{"table", "tables", "csn", "tid", "committed_at", "metadata", "warehouse_id"}` for each new
    commit that touched one of `tables` (`table`: the first of them it touched), in CSN order.

    :param tables: the tables watched (`ns.name`).
    :param conn_id: the airflow_txn connection of the warehouse.
    :param poll_interval: seconds between two reads of the commit log while nothing is new.
    :param include_airflow: fire for commits made by Airflow tasks too (False: only for the others).
    :param after_csn: where a trigger without a stored cursor starts (None: the readable watermark).
    """

    def __init__(self, tables: Sequence[str], conn_id: str = DEFAULT_CONN_ID, poll_interval: float = 5.0,
                 include_airflow: bool = True, after_csn: int | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.tables = [parse_table_name(t).qualified for t in tables]
        self.conn_id = conn_id
        self.poll_interval = float(poll_interval)
        self.include_airflow = bool(include_airflow)
        self.after_csn = None if after_csn is None else int(after_csn)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"tables": self.tables, "conn_id": self.conn_id, "poll_interval": self.poll_interval,
                 "include_airflow": self.include_airflow, "after_csn": self.after_csn})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        wh = await self._open()
        try:
            warehouse_id = await asyncio.to_thread(lambda: wh.warehouse_id)
            cursor = stored = await self._start(wh)
            self.log.info("watching commits of %s above CSN %d", ", ".join(self.tables), cursor)
            while True:
                try:
                    commits = await asyncio.to_thread(wh.commits_after, cursor, BATCH)
                except Exception:  # the catalog away for a while: the watch goes on when it answers
                    self.log.warning("reading the commit log failed; trying again in %gs", self.poll_interval,
                                     exc_info=True)
                    await asyncio.sleep(self.poll_interval)
                    continue
                for commit in commits:
                    cursor = commit["csn"]
                    payload = self._payload(commit, warehouse_id)
                    if payload is not None:
                        yield TriggerEvent(payload)  # type: ignore[no-untyped-call]
                        stored = await self._store(cursor)
                if cursor != stored:  # the commits of other tables looked at: not looked at again
                    stored = await self._store(cursor)
                if len(commits) < BATCH:
                    await asyncio.sleep(self.poll_interval)
        finally:
            await asyncio.to_thread(wh.close)

    async def _open(self) -> Warehouse:
        """The warehouse, opened once its connection and catalog answer (retried every poll_interval)."""
        while True:
            try:
                config = await TxnHook(conn_id=self.conn_id).aconfig()
                return await asyncio.to_thread(Warehouse.open, config.catalog_url, config.root, config.oracle,
                                               storage_options=dict(config.storage_options),
                                               connect_timeout=config.connect_timeout)
            except Exception:
                self.log.warning("opening the warehouse of %s failed; trying again in %gs", self.conn_id,
                                 self.poll_interval, exc_info=True)
                await asyncio.sleep(self.poll_interval)

    async def _start(self, wh: Warehouse) -> int:
        stored = await self._stored()
        if stored is not None:
            return stored
        if self.after_csn is not None:
            return self.after_csn
        return await asyncio.to_thread(wh.readable_csn)

    def _payload(self, commit: LoggedCommit, warehouse_id: str) -> dict[str, Any] | None:
        touched = [t for t in commit["tables"] if t in self.tables]
        if not touched or ("airflow" in commit["metadata"] and not self.include_airflow):
            return None
        return {"table": touched[0], "tables": touched, "csn": commit["csn"], "tid": commit["tid"],
                "committed_at": commit["committed_at"], "metadata": commit["metadata"], "warehouse_id": warehouse_id}

    async def _stored(self) -> int | None:
        store = getattr(self, "asset_state_store", None)
        if store is None:  # run outside a triggerer (a test, a script): nothing is kept
            return None
        try:
            value = await store.aget(CURSOR_KEY)
        except Exception:  # e.g. one trigger watching two Assets: no single store to keep the cursor in
            self.log.warning("cannot read the stored cursor; starting from the watermark", exc_info=True)
            return None
        return None if value is None else int(value)

    async def _store(self, csn: int) -> int:
        """Keep `csn` as the cursor (where the triggerer gives a store); returns it."""
        store = getattr(self, "asset_state_store", None)
        if store is not None:
            try:
                await store.aset(CURSOR_KEY, csn)
            except Exception:
                self.log.warning("cannot store the cursor (CSN %d); a restart may fire its commits again", csn,
                                 exc_info=True)
        return csn
