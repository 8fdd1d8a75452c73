"""Recording write-audit-publish check reports on a transaction, and reading them back (docs/DESIGN.md, D19).

Each report is one row appended to the catalog (catalog/check_reports.py) in one catalog transaction that
first checks the transaction is usable (and renews its lease, as a statement does): two check steps of one
transaction recording at once both keep their reports; nothing is read and rewritten. Reports an
airflow_txn before catalog schema version 6 kept in the transaction's metadata (`{"checks": {key: report}}`)
are read first, then the rows in the order recorded; `as_metadata` folds them into that older shape (the
newest report of each key), which `Warehouse.transaction_info` shows under metadata["checks"].
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from sqlalchemy import Connection

from airflow_txn.catalog import check_reports, txn_records
from airflow_txn.core import bounds
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import CatalogUpgradeRequiredError, InvalidArgumentError
from airflow_txn.model.names import MAX_LABEL_LENGTH
from airflow_txn.model.results import CheckRecord, JsonObject

METADATA_KEY = "checks"
"""Where an airflow_txn before schema version 6 kept the reports inside a transaction's metadata."""
STORED_SINCE = 6
"""The catalog schema version that brought txn_check_reports: on an older catalog (which this package still
uses: schema.MIN_CATALOG_VERSION) only the reports kept in metadata are read, and none can be recorded."""


def check_key(key: object) -> str:
    """A report's key: non-empty text up to MAX_LABEL_LENGTH characters without NUL (InvalidArgumentError)."""
    if not isinstance(key, str) or not key or len(key) > MAX_LABEL_LENGTH or "\x00" in key:
        raise InvalidArgumentError(f"a check report's key must be non-empty text up to {MAX_LABEL_LENGTH} "
                                   f"characters without NUL, got {key!r:.200}")
    return key


def record(rt: Runtime, tid: str, key: str, report: Mapping[str, object]) -> None:
    """Append `report` under `key` to transaction `tid` (usable: active, no failed statement, lease valid).
    Bad input is refused before anything is written (InvalidArgumentError)."""
    check_key(key)
    try:
        text = bounds.metadata_json(report)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"check report {key!r}: {exc}") from exc
    cat = rt.catalog
    if not cat.at_least(STORED_SINCE):
        cat.probe()  # another process may have upgraded it since this one looked
    if not cat.at_least(STORED_SINCE):
        from airflow_txn.catalog import schema

        raise CatalogUpgradeRequiredError(
            f"recording a check report needs catalog schema version {STORED_SINCE} (table txn_check_reports); the "
            f"{cat.where} is older, and opening never upgrades a catalog (docs/DESIGN.md, D23): the catalog must be "
            "upgraded, once, with `airflow-txn upgrade` (by a writer, as a deliberate step: docs/DEPLOYMENT.md, "
            "Versions). Nothing was recorded", None, schema.SCHEMA_VERSION)
    with cat.write() as conn:
        txn_records.lock_usable(conn, cat, tid)
        check_reports.add(conn, tid, key, time.time(), text)


def of_transaction(conn: Connection, tid: str, metadata: JsonObject, stored: bool = True) -> list[CheckRecord]:
    """Every report of `tid` (whose metadata is `metadata`): those kept in its metadata first, then the
    recorded rows, oldest first. `stored`: whether the catalog has txn_check_reports (STORED_SINCE)."""
    return _merged(metadata, check_reports.of_transaction(conn, tid) if stored else [])


def with_reports(conn: Connection, metadata: Mapping[str, JsonObject], stored: bool = True) -> dict[str, JsonObject]:
    """{tid: its metadata with its reports folded in (`as_metadata`)} for {tid: metadata} (a listing's);
    `stored` as for of_transaction."""
    rows = check_reports.of_transactions(conn, list(metadata)) if metadata and stored else {}
    return {tid: as_metadata(m, _merged(m, rows[tid])) if tid in rows else m for tid, m in metadata.items()}


def _merged(metadata: JsonObject, rows: list[check_reports.ReportRow]) -> list[CheckRecord]:
    older = metadata.get(METADATA_KEY)
    found = [CheckRecord(key=str(k), recorded_at=None, report=dict(v))
             for k, v in (older.items() if isinstance(older, Mapping) else []) if isinstance(v, Mapping)]
    found += [CheckRecord(key=r.key, recorded_at=r.recorded_at, report=r.report) for r in rows]
    return found


def as_metadata(metadata: JsonObject, records: list[CheckRecord]) -> JsonObject:
    """`metadata` with every report under metadata["checks"] as {key: its newest report}, keys in the order
    first recorded (unchanged when there is no report)."""
    if not records:
        return metadata
    checks: JsonObject = {}
    for r in records:
        checks[r["key"]] = r["report"]
    return {**metadata, METADATA_KEY: checks}
