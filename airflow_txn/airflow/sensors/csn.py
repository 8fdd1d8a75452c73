"""CommitCSNSensor: wait until a commit is readable (or a tag exists), then hand its snapshot to the readers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from airflow_txn.airflow.assets.lineage import LineageMixin, TxnLineage, read_versions
from airflow_txn.airflow.hooks.txn import (
    DEFAULT_CONN_ID,
    TxnHook,
    coerce_csn,
    coerce_tables,
    coerce_tag,
    default_deferrable,
    snapshot_ready,
    tag_ready,
)
from airflow_txn.airflow.triggers.csn import FINAL_ERRORS, CommitCSNTrigger
from airflow_txn.airflow.version_compat import AirflowFailException, BaseSensorOperator, Context, PokeReturnValue
from airflow_txn.errors import InvalidArgumentError, TxnError


class CommitCSNSensor(LineageMixin, BaseSensorOperator):
    """Wait until the readable watermark covers `csn` (and, with `tables`, until each table has a
    readable commit at or after it); the XCom return value is the snapshot to read: `csn`, or the
    latest of those table commits. Pending commit records it finds are applied, not waited for.

    :param csn: the CSN to wait for (an int or the commit task's XCom; None: any commit).
    :param tables: tables that must each have a commit at or after `csn` (with `tag`: that the tag must hold).
    :param tag: wait instead until the tag of this name exists (Warehouse.tag, CommitTransactionOperator(tag=));
        the XCom value is then the tag's CSN: read with `tag=` (it stays readable while tagged) or at that CSN.
        Templated (e.g. `month-end-{{ ds }}`). A tag that exists without one of `tables` fails the task for good.
    :param deferrable: wait in the triggerer (CommitCSNTrigger) instead of a worker slot. None (default):
        `[operators] default_deferrable` of Airflow's configuration (False unless set), read when the DAG
        is parsed, as Airflow's own deferrable sensors do.
    :param conn_id: the airflow_txn connection.

    `mode="reschedule"`, `poke_interval` and `timeout` work as for every sensor. Bad input (a `csn` that
    is no CSN, malformed `tables`) fails the task without retry; any other error (the catalog down, in
    a poke or in the triggerer) fails this try, and Airflow retries it when retries are left.

    Lineage (OpenLineage provider): `tables` as inputs, each at the version its readers see at the snapshot.
    """

    template_fields: Sequence[str] = ("csn", "tables", "tag", "conn_id")
    ui_color = "#b4d7f0"

    def __init__(self, *, csn: Any = None, tables: Sequence[str] | str | None = None, conn_id: str = DEFAULT_CONN_ID,
                 deferrable: bool | None = None, tag: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.csn = csn
        self.tables = tables or []
        self.tag = tag
        self.conn_id = conn_id
        self.deferrable = default_deferrable() if deferrable is None else bool(deferrable)

    def _arguments(self) -> tuple[int, list[str], str | None]:
        """The rendered `csn`, `tables` and `tag`; bad ones fail the task for good (no retry can fix them)."""
        try:
            tag = coerce_tag(self.tag)
            if tag is not None and self.csn not in (None, "", "None"):
                raise InvalidArgumentError(f"wait for csn {self.csn!r} or for tag {tag!r}, not both")
            return coerce_csn(self.csn), coerce_tables(self.tables), tag
        except TxnError as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc

    def _check(self) -> int | None:
        csn, tables, tag = self._arguments()
        with TxnHook(conn_id=self.conn_id).warehouse() as wh:
            try:
                snapshot = snapshot_ready(wh, csn, tables) if tag is None else tag_ready(wh, tag, tables)
            except FINAL_ERRORS as exc:  # a table name no table can have, a tag without a table
                raise AirflowFailException(f"{self.task_id}: {exc}") from exc
            if snapshot is None and tag is not None:
                self.log.info("waiting for tag %r", tag)
            elif snapshot is None:
                readable = str(wh.readable_csn()) if wh.exists() else "none: the warehouse does not exist yet"
                self.log.info("waiting for CSN %d%s (readable: %s)", csn,
                              f" with a commit of each of {tables}" if tables else "", readable)
        return snapshot

    def _found(self, context: Context, snapshot: int) -> int:
        """`snapshot`, the wait's result, with the tables' versions there recorded as the task's lineage."""
        tables = coerce_tables(self.tables)
        if tables:
            self.record_lineage(context, lambda: self._read_at(tables, snapshot))
        return snapshot

    def _read_at(self, tables: list[str], snapshot: int) -> TxnLineage:
        with TxnHook(conn_id=self.conn_id).warehouse() as wh:
            return TxnLineage(None, inputs=read_versions(wh, tables, snapshot, wh.warehouse_id))

    def poke(self, context: Context) -> PokeReturnValue:
        snapshot = self._check()
        if snapshot is not None:
            self._found(context, snapshot)
        return PokeReturnValue(is_done=snapshot is not None, xcom_value=snapshot)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        snapshot = self._check()
        if snapshot is not None:
            return self._found(context, snapshot)
        csn, tables, tag = self._arguments()
        self.defer(
            trigger=CommitCSNTrigger(csn=csn, tables=tables, conn_id=self.conn_id, poke_interval=self.poke_interval,
                                     tag=tag),
            method_name="execute_complete",
            timeout=dt.timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> int:
        """The trigger's verdict. An error fails this try: for good when the trigger marks it final (bad
        input), else as any error does, so Airflow retries the task (which waits again) when retries are left."""
        if not event or event.get("status") != "success":
            message = (event or {}).get("message", "no event")
            waited = f"tag {self.tag!r}" if self.tag else f"CSN {self.csn}"
            failure = f"{self.task_id}: waiting for {waited} failed in the triggerer: {message}"
            if (event or {}).get("final"):
                raise AirflowFailException(failure)
            raise TxnError(failure)
        self.log.info("%s readable: snapshot %s", f"tag {self.tag!r}" if self.tag else f"CSN {self.csn}", event["csn"])
        return self._found(context, int(event["csn"]))
