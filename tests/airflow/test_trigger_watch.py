"""CommitCSNTrigger's shared watermark watch: a commit releases deferred sensors without waiting for
their poke_interval, the triggers of one warehouse share one watch (one of them polls at a time),
and nothing keeps polling once they are done."""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from tests.airflow.helpers import PROBE_SCHEMA

pytestmark = pytest.mark.airflow

TABLE = "probe.watched"
HOUR = 3600.0  # a poke_interval no test waits for: only the watch can release the triggers in time


def _commit(wh: Warehouse, value: int) -> int:
    t = wh.begin(label="watched commit")
    t.append(TABLE, pa.table({"id": [value]}))
    return t.commit()


def test_commit_releases_every_waiting_trigger_through_one_shared_watch(txn_conn: Warehouse) -> None:
    from airflow_txn.airflow.triggers.csn import CommitCSNTrigger, _Watch

    wh = txn_conn
    wh.create_table(TABLE, PROBE_SCHEMA)
    first, second = wh.readable_csn() + 1, wh.readable_csn() + 2
    triggers = [CommitCSNTrigger(csn=first, poke_interval=HOUR, watch_interval=0.05),
                CommitCSNTrigger(csn=first, tables=[TABLE], poke_interval=HOUR, watch_interval=0.05),
                CommitCSNTrigger(csn=second, poke_interval=HOUR, watch_interval=0.05)]

    async def scenario() -> tuple[list[Any], int, bool]:
        async def first_event(trigger: CommitCSNTrigger) -> Any:
            async for event in trigger.run():
                return event.payload
            raise AssertionError("no event")

        tasks = [asyncio.create_task(first_event(t)) for t in triggers]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60  # each trigger opens the warehouse first: slow on a loaded machine
        while not any(w.polling for w in _Watch._registry.get(loop, {}).values()):
            assert loop.time() < deadline, "no trigger came to wait on the watch"
            await asyncio.sleep(0.05)
        assert not any(task.done() for task in tasks)
        [watch] = _Watch._registry[loop].values()  # one watch for the warehouse
        assert watch.polling  # one of the three reads the watermark, the others wait on it
        assert await asyncio.to_thread(_commit, wh, 1) == first
        done, _ = await asyncio.wait(tasks[:2], timeout=60)  # far below poke_interval
        assert len(done) == 2 and not tasks[2].done()  # the later CSN still waits
        assert await asyncio.to_thread(_commit, wh, 2) == second
        payloads = await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
        return payloads, watch.polling, watch.value

    payloads, polling, watermark = asyncio.run(scenario())
    assert payloads == [{"status": "success", "csn": first}, {"status": "success", "csn": first},
                        {"status": "success", "csn": second}]
    assert not polling and watermark == second  # nobody left polling: the watch holds nothing open
    assert wh.read(TABLE).column("id").to_pylist() == [1, 2]


def test_serialized_trigger_keeps_its_watch_interval() -> None:
    from airflow_txn.airflow.triggers.csn import WATCH_INTERVAL, CommitCSNTrigger

    classpath, kwargs = CommitCSNTrigger(csn=5, poke_interval=30, watch_interval=0.5).serialize()
    assert classpath == "airflow_txn.airflow.triggers.csn.CommitCSNTrigger"
    assert kwargs["watch_interval"] == 0.5 and kwargs["poke_interval"] == 30.0
    legacy = {k: v for k, v in kwargs.items() if k != "watch_interval"}  # serialized before the option existed
    assert CommitCSNTrigger(**legacy).watch_interval == WATCH_INTERVAL
