"""CommitCSNSensor: wait until a commit is readable, then hand its snapshot to the readers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook, coerce_csn, coerce_tables, snapshot_ready
from airflow_txn.airflow.triggers.csn import CommitCSNTrigger
from airflow_txn.airflow.version_compat import AirflowFailException, BaseSensorOperator, Context, PokeReturnValue


class CommitCSNSensor(BaseSensorOperator):
    """Wait until the readable watermark covers `csn` (and, with `tables`, until each table has a
    readable commit at or after it); the XCom return value is the snapshot to read: `csn`, or the
    latest of those table commits. Pending commit records it finds are applied, not waited for.

    :param csn: the CSN to wait for (an int or the commit task's XCom; None: any commit).
    :param tables: tables that must each have a commit at or after `csn`.
    :param deferrable: wait in the triggerer (CommitCSNTrigger) instead of a worker slot.
    :param conn_id: the airflow_txn connection.

    `mode="reschedule"`, `poke_interval` and `timeout` work as for every sensor.
    """

    template_fields: Sequence[str] = ("csn", "tables", "conn_id")
    ui_color = "#b4d7f0"

    def __init__(self, *, csn: Any = None, tables: Sequence[str] | str | None = None, conn_id: str = DEFAULT_CONN_ID,
                 deferrable: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.csn = csn
        self.tables = tables or []
        self.conn_id = conn_id
        self.deferrable = deferrable

    def _check(self) -> int | None:
        csn, tables = coerce_csn(self.csn), coerce_tables(self.tables)
        with TxnHook(conn_id=self.conn_id).warehouse() as wh:
            snapshot = snapshot_ready(wh, csn, tables)
            if snapshot is None:
                self.log.info("waiting for CSN %d%s (readable: %d)", csn,
                              f" with a commit of each of {tables}" if tables else "", wh.readable_csn())
        return snapshot

    def poke(self, context: Context) -> PokeReturnValue:
        snapshot = self._check()
        return PokeReturnValue(is_done=snapshot is not None, xcom_value=snapshot)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        snapshot = self._check()
        if snapshot is not None:
            return snapshot
        self.defer(
            trigger=CommitCSNTrigger(csn=coerce_csn(self.csn), tables=coerce_tables(self.tables), conn_id=self.conn_id,
                                     poke_interval=self.poke_interval),
            method_name="execute_complete",
            timeout=dt.timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> int:
        if not event or event.get("status") != "success":
            message = (event or {}).get("message", "no event")
            raise AirflowFailException(f"{self.task_id}: waiting for CSN {self.csn} failed: {message}")
        self.log.info("CSN %s readable: snapshot %s", self.csn, event["csn"])
        return int(event["csn"])
