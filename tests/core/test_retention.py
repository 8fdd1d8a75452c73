"""Per-table retention (issue 9): policies by time and by versions, horizons that never go down, dry runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from airflow_txn import Warehouse
from airflow_txn.catalog import schema
from airflow_txn.errors import SnapshotTooOldError, TableNotFoundError, TxnError
from tests.helpers import accounts, events, ids, make_tables, storage_files

EVENTS_T, ACCOUNTS_T = "sales.events", "sales.accounts"


def _versions(wh: Warehouse, count: int) -> list[int]:
    """`count` commits, each overwriting both tables (so every older version is garbage); their CSNs."""
    make_tables(wh)
    csns = []
    for n in range(count):
        with wh.begin() as t:
            t.overwrite(EVENTS_T, events([n]))
            t.overwrite(ACCOUNTS_T, accounts({n: n}))
        csns.append(wh.readable_csn())
    return csns


def test_policy_is_stored_described_and_cleared(wh: Warehouse) -> None:
    make_tables(wh)
    assert wh.retention(EVENTS_T) == {"table": EVENTS_T, "seconds": None, "versions": None, "horizon": 1}
    assert wh.set_retention(EVENTS_T, seconds=3600) == {"table": EVENTS_T, "seconds": 3600.0, "versions": None,
                                                       "horizon": 1}
    assert wh.set_retention(EVENTS_T, seconds=60.5, versions=3)["versions"] == 3
    assert wh.retention(EVENTS_T)["seconds"] == 60.5
    assert wh.retention(ACCOUNTS_T)["versions"] is None
    assert wh.set_retention(EVENTS_T) == {"table": EVENTS_T, "seconds": None, "versions": None, "horizon": 1}


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"seconds": -1}, TxnError, "seconds"),
    ({"seconds": "3600"}, TxnError, "seconds"),
    ({"seconds": True}, TxnError, "seconds"),
    ({"seconds": math.nan}, TxnError, "seconds"),
    ({"seconds": math.inf}, TxnError, "seconds"),
    ({"versions": 0}, TxnError, "versions"),
    ({"versions": 2.5}, TxnError, "versions"),
    ({"versions": False}, TxnError, "versions"),
    ({"table": "sales.nope", "versions": 2}, TableNotFoundError, "does not exist"),
])
def test_bad_policies_are_refused_and_change_nothing(wh: Warehouse, kwargs: dict[str, Any],
                                                     error: type[Exception], message: str) -> None:
    make_tables(wh)
    wh.set_retention(EVENTS_T, versions=5)
    with pytest.raises(error, match=message):
        wh.set_retention(**{"table": EVENTS_T, **kwargs})
    assert wh.retention(EVENTS_T)["versions"] == 5 and wh.retention(EVENTS_T)["seconds"] is None
    with pytest.raises(TxnError, match="retention_seconds"):
        wh.vacuum(retention_seconds=-1)


def test_a_table_keeps_its_last_versions(wh: Warehouse) -> None:
    csns = _versions(wh, 5)
    wh.set_retention(ACCOUNTS_T, versions=2)
    result = wh.vacuum(retention_seconds=0)
    assert result["horizons"] == {ACCOUNTS_T: csns[-2], EVENTS_T: csns[-1]}
    assert wh.retention(ACCOUNTS_T)["horizon"] == csns[-2]
    assert ids(wh.read(ACCOUNTS_T, csn=csns[-2])) == [3]
    assert ids(wh.read(ACCOUNTS_T, csn=csns[-1])) == [4]
    with pytest.raises(SnapshotTooOldError) as too_old:
        wh.read(ACCOUNTS_T, csn=csns[-3])
    message = str(too_old.value)
    assert ACCOUNTS_T in message and str(csns[-3]) in message and f"horizon {csns[-2]}" in message
    with pytest.raises(SnapshotTooOldError, match=EVENTS_T):  # no policy: the global rules
        wh.read(EVENTS_T, csn=csns[-2])
    assert wh.recover()["missing_files"] == []


def test_a_table_keeps_its_time_window(wh: Warehouse, root: Path) -> None:
    csns = _versions(wh, 4)
    wh.set_retention(EVENTS_T, seconds=3600)
    files = storage_files(root)
    result = wh.vacuum(retention_seconds=0)
    assert result["horizons"][EVENTS_T] == 1 and result["horizons"][ACCOUNTS_T] == csns[-1]
    assert result["parts_removed"] == 3  # the old accounts versions only
    assert [ids(wh.read(EVENTS_T, csn=c)) for c in csns] == [[0], [1], [2], [3]]
    with pytest.raises(SnapshotTooOldError):
        wh.read(ACCOUNTS_T, csn=csns[0])
    assert {f for f in files if "events" in f} <= storage_files(root)


def test_a_policy_only_keeps_more_than_vacuums_own_window(wh: Warehouse) -> None:
    csns = _versions(wh, 3)
    wh.set_retention(EVENTS_T, seconds=0, versions=1)
    result = wh.vacuum(retention_seconds=3600)
    assert result["parts_removed"] == 0 and result["horizons"][EVENTS_T] == 1
    assert [ids(wh.read(EVENTS_T, csn=c)) for c in csns] == [[0], [1], [2]]


def test_horizons_never_go_down(wh: Warehouse) -> None:
    csns = _versions(wh, 4)
    wh.vacuum(retention_seconds=0)  # files of every older version are gone now
    assert wh.set_retention(EVENTS_T, versions=10)["horizon"] == csns[-1]
    wh.vacuum(retention_seconds=0)
    assert wh.retention(EVENTS_T)["horizon"] == csns[-1]
    with pytest.raises(SnapshotTooOldError):
        wh.read(EVENTS_T, csn=csns[0])
    with wh.begin() as t:  # newer versions are kept from now on
        t.overwrite(EVENTS_T, events([9]))
    wh.vacuum(retention_seconds=0)
    assert ids(wh.read(EVENTS_T, csn=csns[-1])) == [3]
    wh.set_retention(EVENTS_T)  # cleared: the global rules apply again at the next vacuum
    assert wh.vacuum(retention_seconds=0)["horizons"][EVENTS_T] == wh.readable_csn()
    with pytest.raises(SnapshotTooOldError):
        wh.read(EVENTS_T, csn=csns[-1])
    with wh.runtime.catalog.read() as conn:
        assert conn.execute(select(schema.table_retention)).all() == []


def test_dry_run_reports_and_deletes_nothing(wh: Warehouse, root: Path) -> None:
    csns = _versions(wh, 3)
    orphan = wh.begin()
    orphan.append(EVENTS_T, events([99]))
    orphan.rollback()
    files = storage_files(root)
    seen: list[tuple[str, int, int]] = []
    dry = wh.vacuum(retention_seconds=0, dry_run=True, progress=lambda s, d, t: seen.append((s, d, t)))
    assert dry["dry_run"] and dry["parts_removed"] == 5 and dry["bytes_freed"] > 0
    assert storage_files(root) == files
    assert ids(wh.read(EVENTS_T, csn=csns[0])) == [0], "a dry run must not raise the horizon"
    assert {s for s, _, _ in seen} == {"parts", "orphans", "purge"} and ("parts", 2, 2) in seen
    real = wh.vacuum(retention_seconds=0)
    assert {k: real[k] for k in ("parts_removed", "bytes_freed", "horizon")} == \
        {k: dry[k] for k in ("parts_removed", "bytes_freed", "horizon")}
    assert storage_files(root) != files


def test_a_catalog_of_schema_version_2_is_upgraded(catalog_url: str, root: Path) -> None:
    """Version 3 added txn_keys and txn_scans (attempt fences, invalidated keys, statement scans): an older
    catalog gains them when opened with upgrade=True (opening alone never upgrades: D23)."""
    with Warehouse.open(catalog=catalog_url, root=str(root)) as wh:
        make_tables(wh)
        with wh.runtime.catalog.write() as conn:
            conn.execute(text("DROP TABLE txn_keys"))
            conn.execute(text("DROP TABLE txn_scans"))
            conn.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="2"))
    with Warehouse.open(catalog=catalog_url, root=str(root), upgrade=True) as wh:
        t = wh.begin().use_key("load", attempt=1)
        t.append(EVENTS_T, events([1]))
        t.commit()
        assert wh.read(EVENTS_T).num_rows == 1


def test_a_catalog_of_schema_version_1_is_upgraded(catalog_url: str, root: Path) -> None:
    with Warehouse.open(catalog=catalog_url, root=str(root)) as wh:
        make_tables(wh)
        with wh.runtime.catalog.write() as conn:  # what a warehouse of the previous version looks like
            conn.execute(text("DROP TABLE txn_table_retention"))
            conn.execute(text("DROP TABLE txn_compactions"))
            conn.execute(text("DROP TABLE txn_keys"))
            conn.execute(text("DROP TABLE txn_scans"))
            conn.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="1"))
    with Warehouse.open(catalog=catalog_url, root=str(root), upgrade=True) as wh:
        with wh.runtime.catalog.read() as conn:
            version = conn.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")).scalar()
        assert version == str(schema.SCHEMA_VERSION) == "7"
        assert wh.set_retention(EVENTS_T, versions=2)["versions"] == 2
        with wh.begin() as t:
            t.append(EVENTS_T, events([1]))
        with wh.begin() as t:
            t.append(EVENTS_T, events([2]))
        assert wh.compact(EVENTS_T)["merged"] == 1
    with Warehouse.open(catalog=catalog_url, root=str(root)) as wh, wh.runtime.catalog.write() as conn:
        conn.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value="99"))
        conn.execute(schema.meta.update().where(schema.meta.c.key == "min_client_version").values(value="99"))
    with pytest.raises(TxnError, match="newer than this airflow-txn"):
        Warehouse.open(catalog=catalog_url, root=str(root))
