"""What a reader DAG needs from the commits that scheduled it: the ONE snapshot to read its tables at.

    @task
    def check(triggering_asset_events):
        csn = snapshot_of(triggering_asset_events, ["shop.orders", "shop.order_items"])
        ...  airflow_txn.spark.read(spark, wh, "shop.orders", csn=csn), the items at the same csn

Every commit event (CommitTransactionOperator: one per table written) carries its table and its CSN in the
extra (tables.event_extra); an event of a commit made outside Airflow (commit_watcher's trigger) carries them
in the extra's `payload` (Airflow wraps a trigger's event so). A reader scheduled on several tables may be
triggered by several commits: the newest of their CSNs is the snapshot that holds all of them, and reading
every table at it gives one consistent state (invariant 4), never a mix of commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def snapshot_of(events: Mapping[Any, Iterable[Any]] | None, tables: Sequence[str] | None = None) -> int | None:
    """The CSN to read `tables` at (None: any table) from `triggering_asset_events` or `inlet_events`: the
    newest commit CSN among their airflow_txn events for those tables; None when there is none (a manual run:
    read the watermark, or wait with CommitCSNSensor)."""
    wanted = None if tables is None else set(tables)
    found = [int(extra["csn"]) for listed in (events or {}).values() for event in listed
             if isinstance(extra := _extra(event), Mapping) and "csn" in extra and "table" in extra
             and (wanted is None or extra["table"] in wanted)]
    return max(found, default=None)


def _extra(event: Any) -> Any:
    """The commit fields of an Asset event: its extra, or the extra's `payload` for a trigger's event."""
    extra = event.get("extra") if isinstance(event, Mapping) else getattr(event, "extra", None)
    if isinstance(extra, Mapping) and extra.get("from_trigger") and isinstance(extra.get("payload"), Mapping):
        return extra["payload"]
    return extra
