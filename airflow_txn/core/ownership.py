"""A storage root belongs to exactly one warehouse (docs/DESIGN.md, invariant 11 and D22).

The first write of a warehouse (Warehouse.init: `create_table`, `begin`, `airflow-txn init`) claims its root
with a marker, `_airflow_txn_root.json` at the top of the root, naming the warehouse id its catalog keeps and
the highest CSN the catalog had reached when the marker was last written (a claim, an adoption, the end of
each vacuum). From then on:

- a warehouse whose id is not the marker's may not write to the root or clean it (RootOwnedError, naming both
  ids and the way out): two catalogs given one root, or a catalog re-created over an existing root;
- a catalog whose last CSN is below the marker's is older than the root: restored from a backup taken before
  commits the root has seen (RootOwnedError until the root is adopted);
- `adopt` is the documented way out for an operator who checked: it verifies that every file a committed
  part of this catalog needs is there (none missing), then rewrites the marker for this catalog.

The marker is the early, clear refusal. What keeps another warehouse's files even where no marker could
(roots written before markers existed, two warehouses claiming a fresh object-store root at one instant) is
vacuum's own rule: it deletes an unregistered file only when the transaction named in its name (or its
write dir's sidecar) is one this catalog began (core/vacuum.py). Tids carry 64 random bits, so another
warehouse's tid is never one of ours.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from airflow_txn.catalog import meta_records, part_records, table_registry
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import RootOwnedError
from airflow_txn.model.version import VERSION
from airflow_txn.storage.root import Storage
from airflow_txn.telemetry import logs

MARKER = "_airflow_txn_root.json"
"""The ownership marker's name, at the top of the root (no table or namespace can be named so)."""
ROOT_KEY = "storage_root"
"""The txn_meta key recording the root this catalog last claimed (the default root of a later open)."""
FORMAT = 1

log = logs.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Marker:
    """What a root's ownership marker says."""

    warehouse_id: str
    csn: int
    """The highest CSN the owner's catalog had reached when the marker was written."""
    written_at: float
    version: str

    def to_json(self) -> bytes:
        return (json.dumps({"format": FORMAT, "warehouse_id": self.warehouse_id, "csn": self.csn,
                            "written_at": self.written_at, "airflow_txn": self.version},
                           indent=2, sort_keys=True) + "\n").encode()


def read(rt: Runtime) -> Marker | None:
    """The root's marker; None when the root has none. RootOwnedError when one is there but unreadable (a marker
    is never guessed at: a root whose owner cannot be read is nobody's to write or clean)."""
    return read_marker(rt.storage)


def read_marker(storage: Storage) -> Marker | None:
    """`read`, given the root alone (`airflow-txn doctor` has no runtime)."""
    raw = storage.read_root_file(MARKER)
    if raw is None:
        try:
            there = storage.fs.get_file_info(storage.root_path(MARKER)).type != pafs.FileType.NotFound
        except OSError:
            there = True
        if not there:
            return None
        raw = b"(cannot be read by this process)"
    try:
        loaded: dict[str, Any] = json.loads(raw)
        return Marker(str(loaded["warehouse_id"]), int(loaded["csn"]), float(loaded["written_at"]),
                      str(loaded.get("airflow_txn", "?")))
    except (ValueError, KeyError, TypeError) as exc:
        raise RootOwnedError(f"the ownership marker {storage.uri}/{MARKER} is unreadable ({exc}): restore it "
                           "from a backup, or remove it and adopt the root (`airflow-txn adopt-root`)") from exc


def last_csn(rt: Runtime) -> int:
    """The highest CSN this warehouse's catalog has handed out."""
    with rt.catalog.read() as conn:
        return rt.oracle.last_csn(conn)


def claim(rt: Runtime, warehouse_id: str) -> None:
    """Claim the root for `warehouse_id` (its first write), or check it is this warehouse's already
    (RootOwnedError otherwise). Writing the marker is read back once: two warehouses claiming a fresh root
    at the same instant find out here, or at the loser's next claim or vacuum. Writes only what is missing
    (a process that may not write finds an owned root as it is)."""
    found = read(rt)
    if found is None:
        _write(rt, warehouse_id, last_csn(rt))
        found = read(rt)
        if found is not None and found.warehouse_id == warehouse_id:
            log.info("storage root %s claimed by warehouse %s", rt.storage.uri, warehouse_id)
    check(rt, warehouse_id, found)
    if recorded_root(rt) != rt.storage.uri:  # a catalog of an earlier release, or a root moved: remembered
        with rt.catalog.write() as conn:
            meta_records.put(conn, ROOT_KEY, rt.storage.uri)


def check(rt: Runtime, warehouse_id: str, found: Marker | None = None) -> Marker | None:
    """RootOwnedError unless the root is unclaimed or this warehouse's, at a CSN its catalog has reached;
    returns the marker (None: unclaimed, which a vacuum may clean: only files its own transactions wrote)."""
    marker = read(rt) if found is None else found
    if marker is None:
        return None
    if marker.warehouse_id != warehouse_id:
        raise RootOwnedError(
            f"storage root {rt.storage.uri} belongs to warehouse {marker.warehouse_id} (its marker {MARKER}); this "
            f"catalog is warehouse {warehouse_id}. Give this warehouse a root of its own (`root=`, "
            "$AIRFLOW_TXN_ROOT, the connection's root); or, if this catalog replaces that warehouse's (re-created, "
            "or restored from a backup), check and adopt the root: `airflow-txn adopt-root` (docs/DEPLOYMENT.md)")
    current = last_csn(rt)
    if current < marker.csn:
        raise RootOwnedError(
            f"storage root {rt.storage.uri} has seen commits up to CSN {marker.csn}, but this catalog (warehouse "
            f"{warehouse_id}) has reached only CSN {current}: it is older than its root, as a catalog restored from "
            "a backup is. Nothing is written or cleaned here until an operator checks and adopts the root: "
            "`airflow-txn adopt-root` (docs/DEPLOYMENT.md, restoring a catalog)")
    return marker


def advance(rt: Runtime, warehouse_id: str) -> None:
    """After a vacuum: record the CSN the catalog has reached in the marker (what tells a restored catalog
    from the one that wrote the root). Only an owned marker is rewritten."""
    marker = read(rt)
    if marker is None or marker.warehouse_id != warehouse_id:
        return
    current = last_csn(rt)
    if current > marker.csn:
        _write(rt, warehouse_id, current)


@dataclass(frozen=True, slots=True)
class Adoption:
    """What `adopt` found and did."""

    root: str
    previous: Marker | None
    warehouse_id: str
    csn: int
    parts_checked: int


def adopt(rt: Runtime, warehouse_id: str) -> Adoption:
    """Make the root this warehouse's after an operator's check: every file of every part this catalog
    still needs (every part not rolled back) must be there, else RootOwnedError listing the first missing
    ones and nothing changes. Files of other transactions are left as they are (vacuum keeps what it cannot
    prove is its own and reports it)."""
    previous = read(rt)
    checked = 0
    missing: list[str] = []
    with rt.catalog.read() as conn:
        tables = table_registry.all_tables(conn)
        parts = {t.id: part_records.needed_files(conn, t.id) for t in tables}
    for info in tables:
        for path, files in parts[info.id]:
            checked += 1
            missing.extend(rt.storage.missing_files(info.directory, path, files))
    if missing:
        shown = "\n  ".join(missing[:10])
        raise RootOwnedError(
            f"cannot adopt storage root {rt.storage.uri}: {len(missing)} file(s) that committed parts of this catalog "
            f"need are missing, e.g.\n  {shown}\nfind the root this catalog was written to (or restore those "
            "files), then adopt again")
    csn = last_csn(rt)
    _write(rt, warehouse_id, max(csn, 0))
    log.warning("storage root %s adopted by warehouse %s (was %s)", rt.storage.uri, warehouse_id,
                "unclaimed" if previous is None else f"warehouse {previous.warehouse_id} at CSN {previous.csn}")
    return Adoption(rt.storage.uri, previous, warehouse_id, csn, checked)


def recorded_root(rt: Runtime) -> str | None:
    """The root this catalog last claimed (None: never recorded, a catalog made before roots were claimed)."""
    with rt.catalog.read() as conn:
        return meta_records.value(conn, ROOT_KEY)


def _write(rt: Runtime, warehouse_id: str, csn: int) -> None:
    rt.storage.write_root_file(MARKER, Marker(warehouse_id, csn, time.time(), VERSION).to_json())
    with rt.catalog.write() as conn:
        meta_records.put(conn, ROOT_KEY, rt.storage.uri)
