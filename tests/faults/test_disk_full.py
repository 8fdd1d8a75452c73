"""Service fault: the storage volume fills up during a part write.

The storage root lives on a real small filesystem (a tmpfs mounted for the test, which needs root in a
container); where mounting is not permitted the `filesystem` case falls back to the storage layer's
injected quota (storage.local_root.FAULT_QUOTA_ENV), and the `injected` case always uses that hook. The evidence
record names which one ran. Expected: the append raises a StorageError naming the full volume, the catalog
and the storage are exactly as before that statement (no partial part file left behind), the transaction
rolls back, writes succeed once space is freed, and recovery and vacuum converge with no orphan.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import StorageError, TransactionClosedError
from airflow_txn.storage.local_root import FAULT_QUOTA_ENV
from tests import evidence
from tests.helpers import accounts, events, ids, make_tables, storage_files

VOLUME_BYTES = 8 * 1024 * 1024
ROOM = 64 * 1024  # left free for the first case: a small part fits, a big one does not
EVENTS_T, ACCOUNTS_T = "sales.events", "sales.accounts"


class Volume:
    """The directory holding the storage root, and a way to fill it up and free it again."""

    def __init__(self, path: Path, how: str, monkeypatch: pytest.MonkeyPatch, fallback: str | None) -> None:
        self.path, self.how, self._mp = path, how, monkeypatch
        self.fallback = fallback  # why a `filesystem` case runs on the injected quota instead (None: it did not)
        self._filler = path / "filler"

    def fill(self, leave: int) -> None:
        """Leave only `leave` bytes free for the storage root."""
        self.free()
        if self.how == "injected":
            used = sum(f.stat().st_size for f in (self.path / "warehouse").rglob("*") if f.is_file())
            self._mp.setenv(FAULT_QUOTA_ENV, str(used + leave))
            return
        stat = os.statvfs(self.path)
        size = stat.f_bavail * stat.f_frsize - leave
        with open(self._filler, "wb") as fh:
            chunk = b"\xff" * (1 << 20)
            while size > 0:
                size -= fh.write(chunk[: min(size, len(chunk))])

    def free(self) -> None:
        self._mp.delenv(FAULT_QUOTA_ENV, raising=False)
        self._filler.unlink(missing_ok=True)


def _mount_tmpfs(path: Path) -> str | None:
    """Mount a small tmpfs at `path`; the reason it could not, or None."""
    if os.geteuid() != 0:
        return "not root"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={VOLUME_BYTES}", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False, timeout=30)
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


@pytest.fixture(params=["filesystem", "injected"])
def volume(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Volume]:
    path = tmp_path / "volume"
    path.mkdir()
    problem = _mount_tmpfs(path) if request.param == "filesystem" else "injected by request"
    how = "tmpfs" if problem is None else "injected"
    vol = Volume(path, how, monkeypatch, problem if request.param == "filesystem" else None)
    try:
        yield vol
    finally:
        vol.free()
        if problem is None:
            subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True, timeout=30)


@pytest.fixture
def root(volume: Volume) -> Path:
    """The storage root of the `wh` fixture, on the small volume (overrides tests/conftest.py's)."""
    return volume.path / "warehouse"


def _big_events() -> pa.Table:
    """Two partitions: a few rows of 2024-02-01, then ~1.2 MB of incompressible rows of 2024-02-02."""
    small = events([500, 501], day="2024-02-01")
    n = 150_000
    rng = random.Random(7)
    values = [rng.random() for _ in range(n)]
    big = pa.table({"id": pa.array(range(10_000, 10_000 + n), pa.int64()), "day": ["2024-02-02"] * n,
                    "value": pa.array(values, pa.float64())}, schema=small.schema)
    return pa.concat_tables([small, big])


def _state(wh: Warehouse, root: Path) -> tuple[set[str], list[int], list[int], int]:
    return storage_files(root), ids(wh.read(EVENTS_T)), ids(wh.read(ACCOUNTS_T)), wh.readable_csn()


def _full_write_fails(wh: Warehouse, volume: Volume, root: Path, leave: int) -> str:
    """One case: a transaction stages a small part (fits when `leave` > 0), then a big two-partition append
    meets the full volume. Returns the error message."""
    before = _state(wh, root)
    volume.fill(leave)
    t = wh.begin(label=f"disk-full-{leave}")
    staged_small = leave > 0
    if staged_small:
        t.append(ACCOUNTS_T, accounts({7: 7}))
    after_small = storage_files(root)
    with pytest.raises(StorageError, match="storage volume is full") as failed:
        t.append(EVENTS_T, _big_events())
        if not staged_small:
            pytest.fail("the append on a full volume succeeded")
    # nothing partial: the failed statement left no file (not even its first partition's) and no part row
    assert storage_files(root) == after_small, "the failed write left files behind"
    created = [p for p in wh.transaction_info(t.tid)["parts"] if p["role"] == "created"]
    assert [p["table"] for p in created] == ([ACCOUNTS_T] if staged_small else []), created
    with pytest.raises(TransactionClosedError, match="failed a statement"):
        t.commit()
    t.rollback()
    volume.free()
    assert _state(wh, root)[1:] == before[1:], "readers see a change"
    assert wh.transaction_info(t.tid)["state"] == "rolled_back"
    return str(failed.value)


def test_disk_full_during_a_part_write(wh: Warehouse, volume: Volume, root: Path) -> None:
    case = f"disk full during a part write|{wh.runtime.catalog.dialect}|{volume.how}"
    try:
        make_tables(wh)
        with wh.begin() as t:
            t.append(EVENTS_T, events([1, 2]))
            t.append(ACCOUNTS_T, accounts({1: 10}))
        messages = [_full_write_fails(wh, volume, root, leave) for leave in (ROOM, 0)]
        with wh.begin() as t:  # space is back: the same writes succeed
            t.append(ACCOUNTS_T, accounts({7: 7}))
            t.append(EVENTS_T, _big_events())
        assert ids(wh.read(ACCOUNTS_T)) == [1, 7] and len(wh.read(EVENTS_T)) == 2 + 2 + 150_000
        report = wh.recover()
        assert report["missing_files"] == [] and report["orphan_dirs"] == 0, report
        wh.vacuum(0)  # the rolled-back small parts go; nothing visible does
        assert ids(wh.read(ACCOUNTS_T)) == [1, 7] and len(wh.read(EVENTS_T)) == 150_004
        assert wh.recover()["orphan_dirs"] == 0
        files = {f for f in storage_files(root) if f.endswith(".parquet")}
        assert len(files) == 5, files  # events: 2024-01-01, 2024-02-01, 2024-02-02; accounts: two appends
    except BaseException as exc:
        evidence.record("service_faults", case, False, error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    evidence.record("service_faults", case, True, how=volume.how, mount_problem=volume.fallback, errors=messages)
