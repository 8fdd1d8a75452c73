"""A storage root belongs to exactly one warehouse (docs/DESIGN.md, invariant 11 and D22): two catalogs given one
root (explicitly, or by default), a catalog re-created over its root, a catalog restored from an older backup.
Whatever either warehouse's vacuum does, no committed row is lost; the second warehouse is refused with an error
naming both and the way out (`airflow-txn adopt-root`). On a local root and on S3."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_txn import Warehouse
from airflow_txn.cli import doctor
from airflow_txn.cli import main as cli_main
from airflow_txn.core import ownership, vacuum
from airflow_txn.core.config import WarehouseConfig
from airflow_txn.core.manifests import INDEX, csn_dir
from airflow_txn.errors import RootOwnedError
from airflow_txn.storage.roots import open_storage
from tests.helpers import accounts, events, ids, make_tables, storage_files


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def shared_root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One storage root two catalogs will meet on: a local directory, or a fresh prefix on the S3 server (marked
    s3 when collected, so the S3 phase runs it: a mark applied in the fixture comes too late for -m)."""
    if request.param == "s3":
        return str(request.getfixturevalue("s3_root"))
    return str(tmp_path / "shared-root")


@pytest.fixture
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Vacuum judges orphans without waiting out the grace period (files on S3 cannot be aged by hand)."""
    monkeypatch.setattr(vacuum, "ORPHAN_GRACE_SECONDS", 0.0)


@pytest.fixture
def opened() -> Iterator[list[Warehouse]]:
    handles: list[Warehouse] = []
    yield handles
    for wh in handles:
        wh.close()


def _open(opened: list[Warehouse], catalog: Path, root: str | None = None) -> Warehouse:
    wh = Warehouse.open(catalog=f"sqlite:///{catalog}", root=root)
    opened.append(wh)
    return wh


def _commit(wh: Warehouse, rows: list[int], day: str = "2024-01-01") -> int:
    t = wh.begin()
    t.append("sales.events", events(rows, day=day))
    return t.commit()


def test_a_second_warehouse_on_an_owned_root_is_refused_before_anything_is_written(
        shared_root: str, tmp_path: Path, opened: list[Warehouse], no_grace: None) -> None:
    a = _open(opened, tmp_path / "a.db", shared_root)
    make_tables(a)
    _commit(a, [1, 2, 3])
    b = _open(opened, tmp_path / "b.db", shared_root)
    with pytest.raises(RootOwnedError) as refused:
        make_tables(b)
    message = str(refused.value)
    assert a.warehouse_id in message and b.warehouse_id in message and "adopt-root" in message
    with pytest.raises(RootOwnedError):
        b.vacuum(retention_seconds=0)
    assert ids(a.read("sales.events")) == [1, 2, 3]
    assert a.vacuum(retention_seconds=0)["foreign_files_kept"] == 0


def test_whatever_either_vacuum_does_no_committed_row_is_lost(
        shared_root: str, tmp_path: Path, opened: list[Warehouse], no_grace: None) -> None:
    """Roots written before markers existed: A's files lie on a root B then claims. B's vacuum cannot prove
    A's files are its own (their transactions are not in B's catalog): it keeps and reports them."""
    a = _open(opened, tmp_path / "a.db", shared_root)
    make_tables(a)
    _commit(a, [1, 2, 3])
    a.runtime.storage.fs.delete_file(a.runtime.storage.root_path(ownership.MARKER))  # a root made before markers
    b = _open(opened, tmp_path / "b.db", shared_root)
    make_tables(b)
    _commit(b, [7])
    report = b.vacuum(retention_seconds=0)
    assert report["orphan_dirs_removed"] == 0 and report["foreign_files_kept"] == 1
    assert ids(a.read("sales.events")) == [1, 2, 3]
    assert ids(b.read("sales.events")) == [7]
    with pytest.raises(RootOwnedError, match=b.warehouse_id):
        a.vacuum(retention_seconds=0)  # the root is B's now: A neither cleans nor writes it
    assert ids(a.read("sales.events")) == [1, 2, 3]


def test_vacuum_keeps_the_manifests_another_warehouse_wrote(
        shared_root: str, tmp_path: Path, opened: list[Warehouse], no_grace: None) -> None:
    """Manifests (<root>/.manifests/csn-N) are files too: B's vacuum on a root A wrote before markers existed
    removed A's manifest directory as its own (the same table names, a CSN below B's horizon). An index names the
    warehouse that wrote it; vacuum removes or rewrites only its own and counts the others as kept."""
    a = _open(opened, tmp_path / "a.db", shared_root)
    make_tables(a)
    theirs = _commit(a, [1, 2, 3])
    a.write_manifest(csn=theirs)
    storage = a.runtime.storage
    index_before = storage.read_root_file(f"{csn_dir(theirs)}/{INDEX}")
    assert index_before is not None
    storage.fs.delete_file(storage.root_path(ownership.MARKER))  # a root made before markers
    b = _open(opened, tmp_path / "b.db", shared_root)
    make_tables(b)
    mine = [_commit(b, rows) for rows in ([7], [8], [9])]
    assert theirs not in mine[1:]
    b.write_manifest(csn=mine[1])
    report = b.vacuum(retention_seconds=0)
    assert report["manifests_removed"] == 1  # its own, below its horizon
    assert storage.read_root_file(f"{csn_dir(mine[1])}/{INDEX}") is None
    assert storage.read_root_file(f"{csn_dir(theirs)}/{INDEX}") == index_before  # A's, kept as A wrote it
    assert report["foreign_files_kept"] == 2  # A's part file and A's manifest directory
    assert ids(a.read("sales.events")) == [1, 2, 3]


def test_default_roots_follow_the_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          opened: list[Warehouse]) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("AIRFLOW_TXN_HOME", str(home))
    monkeypatch.delenv("AIRFLOW_TXN_ROOT", raising=False)
    monkeypatch.delenv("AIRFLOW_TXN_CATALOG", raising=False)
    assert WarehouseConfig.resolve().root == str(home / "warehouse")  # the embedded default is where it was
    a_root = WarehouseConfig.resolve(catalog=f"sqlite:///{tmp_path / 'a.db'}").root
    b_root = WarehouseConfig.resolve(catalog=f"sqlite:///{tmp_path / 'b.db'}").root
    pg_root = WarehouseConfig.resolve(catalog="postgresql+psycopg://u:secret@db.example:5433/wh").root
    assert len({a_root, b_root, pg_root, str(home / "warehouse")}) == 4
    assert "secret" not in pg_root
    a, b = _open(opened, tmp_path / "a.db"), _open(opened, tmp_path / "b.db")
    for wh, rows in ((a, [1, 2, 3]), (b, [9])):
        make_tables(wh)
        _commit(wh, rows)
    assert ids(a.read("sales.events")) == [1, 2, 3] and ids(b.read("sales.events")) == [9]


def test_two_catalogs_given_no_root_never_lose_a_row_whatever_either_vacuum_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: list[Warehouse], no_grace: None) -> None:
    """The default-root case of the issue: two catalogs opened with no root. New catalogs get a root each; two
    catalogs of an earlier release, which both wrote to the one default root of those releases (no marker, no
    root recorded), reopen it and meet there: neither vacuum deletes the other's files, the first write claims
    the root and the other is refused (its reads go on)."""
    home = tmp_path / "home"
    monkeypatch.setenv("AIRFLOW_TXN_HOME", str(home))
    monkeypatch.delenv("AIRFLOW_TXN_ROOT", raising=False)
    a, b = _open(opened, tmp_path / "a.db"), _open(opened, tmp_path / "b.db")
    for wh, rows in ((a, [1, 2, 3]), (b, [9])):
        make_tables(wh)
        _commit(wh, rows)
    assert a.config.root != b.config.root
    for wh in (a, b, a):
        assert wh.vacuum(retention_seconds=0)["foreign_files_kept"] == 0
    assert ids(a.read("sales.events")) == [1, 2, 3] and ids(b.read("sales.events")) == [9]

    old_default = str(home / "warehouse")  # earlier releases: this root whatever the catalog
    for name, rows in (("c.db", [1, 2, 3]), ("d.db", [7])):
        wh = _open(opened, tmp_path / name, old_default)
        make_tables(wh)
        _commit(wh, rows)
        with wh.runtime.catalog.write() as conn:  # as a catalog of an earlier release: no root recorded
            from airflow_txn.catalog import schema

            conn.execute(schema.meta.delete().where(schema.meta.c.key == ownership.ROOT_KEY))
        (home / "warehouse" / ownership.MARKER).unlink()  # nor a marker
        wh.close()
    c, d = _open(opened, tmp_path / "c.db"), _open(opened, tmp_path / "d.db")
    assert c.config.root == d.config.root == old_default
    for wh in (d, c, d):  # the root is nobody's yet: each vacuum keeps the other's file, and says so
        assert wh.vacuum(retention_seconds=0)["foreign_files_kept"] == 1
    assert ids(c.read("sales.events")) == [1, 2, 3] and ids(d.read("sales.events")) == [7]
    _commit(c, [4], day="2024-01-02")  # c's first write claims the root
    with pytest.raises(RootOwnedError, match="adopt-root") as refused:
        _commit(d, [8])
    assert c.warehouse_id in str(refused.value) and d.warehouse_id in str(refused.value)
    with pytest.raises(RootOwnedError):
        d.vacuum(retention_seconds=0)
    assert c.vacuum(retention_seconds=0)["foreign_files_kept"] == 1
    assert ids(c.read("sales.events")) == [1, 2, 3, 4] and ids(d.read("sales.events")) == [7]


def test_every_write_to_another_warehouse_s_root_is_refused(
        shared_root: str, tmp_path: Path, opened: list[Warehouse]) -> None:
    """Not only a Warehouse's begin and create_table: a write of a transaction attached in another process (an
    Airflow task), a compaction and a manifest written by a process given another warehouse's root are refused
    before anything is written there, the transaction left usable."""
    a = _open(opened, tmp_path / "a.db", shared_root)
    make_tables(a)
    committed = _commit(a, [1, 2, 3])
    a_manifests = a.write_manifest()
    b = _open(opened, tmp_path / "b.db", str(tmp_path / "b-root"))
    make_tables(b)
    for rows in ([7], [8]):
        _commit(b, rows)
    t = b.begin()
    astray = _open(opened, tmp_path / "b.db", shared_root)  # b's catalog, a's root: a misconfigured worker
    before = storage_files(shared_root)
    for write in (lambda: astray.attach(t.tid).append("sales.events", events([5])),
                  lambda: astray.attach(t.tid).overwrite("sales.accounts", accounts({5: 50})),
                  lambda: astray.compact("sales.events"),
                  lambda: astray.write_manifest()):
        with pytest.raises(RootOwnedError) as refused:
            write()
        assert a.warehouse_id in str(refused.value) and b.warehouse_id in str(refused.value)
    assert storage_files(shared_root) == before
    assert t.state == "active"
    t.append("sales.events", events([6]))
    t.commit()
    assert ids(b.read("sales.events")) == [6, 7, 8]
    assert ids(a.read("sales.events")) == [1, 2, 3] and a.write_manifest()["csn"] == a_manifests["csn"] == committed


def test_a_catalog_made_before_roots_were_claimed_keeps_its_old_default_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: list[Warehouse]) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("AIRFLOW_TXN_HOME", str(home))
    monkeypatch.delenv("AIRFLOW_TXN_ROOT", raising=False)
    old_default = str(home / "warehouse")
    a = _open(opened, tmp_path / "a.db", old_default)
    make_tables(a)
    _commit(a, [1, 2])
    with a.runtime.catalog.write() as conn:  # as a catalog of an earlier release: no root recorded
        from airflow_txn.catalog import schema

        conn.execute(schema.meta.delete().where(schema.meta.c.key == ownership.ROOT_KEY))
    again = _open(opened, tmp_path / "a.db")
    assert again.config.root == old_default
    assert ids(again.read("sales.events")) == [1, 2]


def test_a_recreated_catalog_over_its_root_is_refused_until_it_adopts_it(
        shared_root: str, tmp_path: Path, opened: list[Warehouse], no_grace: None) -> None:
    a = _open(opened, tmp_path / "c.db", shared_root)
    make_tables(a)
    _commit(a, [1, 2, 3])
    a.close()
    (tmp_path / "c.db").unlink()
    again = _open(opened, tmp_path / "c.db", shared_root)
    with pytest.raises(RootOwnedError, match="adopt-root"):
        make_tables(again)
    adopted = again.adopt_root()
    assert adopted["previous_warehouse_id"] == a.warehouse_id and adopted["warehouse_id"] == again.warehouse_id
    make_tables(again)
    _commit(again, [5])
    report = again.vacuum(retention_seconds=0)
    assert report["foreign_files_kept"] == 1  # the old catalog's file: not provably this one's, kept
    assert ids(again.read("sales.events")) == [5]


def test_a_catalog_restored_from_an_older_backup_is_refused_until_it_adopts_its_root(
        shared_root: str, tmp_path: Path, opened: list[Warehouse], no_grace: None) -> None:
    a = _open(opened, tmp_path / "c.db", shared_root)
    make_tables(a)
    _commit(a, [1])
    a.close()
    shutil.copy(tmp_path / "c.db", tmp_path / "backup.db")
    a = _open(opened, tmp_path / "c.db", shared_root)
    _commit(a, [2], day="2024-01-02")
    a.vacuum(retention_seconds=0)  # the marker records the CSN the root has seen
    a.close()
    shutil.copy(tmp_path / "backup.db", tmp_path / "c.db")
    restored = _open(opened, tmp_path / "c.db", shared_root)
    with pytest.raises(RootOwnedError, match="restored from a backup"):
        restored.begin()
    with pytest.raises(RootOwnedError, match="restored from a backup"):
        restored.vacuum(retention_seconds=0)
    restored.adopt_root()
    assert ids(restored.read("sales.events")) == [1]
    report = restored.vacuum(retention_seconds=0)
    assert report["foreign_files_kept"] == 1  # the newer commit's file: unknown to the backup, kept for the operator
    _commit(restored, [3], day="2024-01-03")
    assert ids(restored.read("sales.events")) == [1, 3]


def test_adopting_a_root_missing_committed_files_is_refused_and_changes_nothing(
        tmp_path: Path, opened: list[Warehouse]) -> None:
    root = tmp_path / "root"
    a = _open(opened, tmp_path / "c.db", str(root))
    make_tables(a)
    _commit(a, [1, 2])
    marker_before = (root / ownership.MARKER).read_bytes()
    for part in root.rglob("p-*.parquet"):
        part.unlink()
    with pytest.raises(RootOwnedError, match="missing"):
        a.adopt_root()
    assert (root / ownership.MARKER).read_bytes() == marker_before


def test_the_cli_adopts_a_root_and_says_what_it_found(tmp_path: Path, opened: list[Warehouse],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    a = _open(opened, tmp_path / "c.db", str(root))
    make_tables(a)
    _commit(a, [1])
    a.close()
    (tmp_path / "c.db").unlink()
    args = ["--catalog", f"sqlite:///{tmp_path / 'c.db'}", "--root", str(root)]
    assert cli_main(["adopt-root", *args]) == 0
    out = capsys.readouterr().out
    assert "root adopted" in out and a.warehouse_id in out
    assert cli_main(["init", *args]) == 0  # the root is this catalog's now


def test_a_marker_names_no_secret_and_an_unreadable_one_is_never_guessed_at(tmp_path: Path,
                                                                            opened: list[Warehouse]) -> None:
    root = tmp_path / "root"
    a = _open(opened, tmp_path / "c.db", str(root))
    make_tables(a)
    (root / ownership.MARKER).write_text("{not json")
    other = _open(opened, tmp_path / f"{uuid.uuid4().hex}.db", str(root))
    with pytest.raises(RootOwnedError, match="unreadable"):
        make_tables(other)


def test_doctor_says_whose_root_it_is(shared_root: str, tmp_path: Path, opened: list[Warehouse]) -> None:
    """`airflow-txn doctor` reads the marker: unclaimed, this warehouse's, or another's (with the way out)."""
    def owner_check(catalog: Path) -> dict[str, str]:
        found = {c["name"]: c for c in doctor.run(f"sqlite:///{catalog}", shared_root, "sql", timeout=5)["checks"]}
        return dict(found["root owner"])

    a = _open(opened, tmp_path / "a.db", shared_root)
    a.init()
    storage = open_storage(shared_root)  # a root written before roots were claimed: no marker
    storage.fs.delete_file(storage.root_path(ownership.MARKER))
    unclaimed = owner_check(tmp_path / "a.db")
    assert unclaimed["status"] == "ok" and "unclaimed" in unclaimed["detail"]
    a.close()
    a = _open(opened, tmp_path / "a.db", shared_root)  # a Warehouse claims the root at its first write
    make_tables(a)
    _commit(a, [1])
    mine = owner_check(tmp_path / "a.db")
    assert mine["status"] == "ok" and a.warehouse_id in mine["detail"]
    b = _open(opened, tmp_path / "b.db", shared_root)
    with pytest.raises(RootOwnedError):
        b.init()  # its catalog is made, the root refused
    theirs = owner_check(tmp_path / "b.db")
    assert theirs["status"] == "fail"
    assert a.warehouse_id in theirs["detail"] and b.warehouse_id in theirs["detail"]
    assert "adopt-root" in theirs["hint"]
