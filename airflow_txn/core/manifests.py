"""Snapshot manifests: JSON listings of the part files visible at one CSN, for engines outside airflow_txn,
and the same listing of a transaction's own view (its snapshot plus its staged parts), kept in memory.

What a manifest lists is what a read sees: every table's parts are planned by the read planner (reading.plan),
at the CSN (readable, not below the table's retention horizon), at a tag (the tag confirmed once the manifests
are written), or in a transaction's own view (its read recorded as Transaction.read records it). A CSN below a
table's horizon is read there at a tag at exactly that CSN holding the table (D18: tags.holding)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from airflow_txn.catalog import commit_log, part_records
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import identity, reading, tags, versions
from airflow_txn.core.reading import Planned
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import SnapshotTooOldError, StorageError
from airflow_txn.model import evolution
from airflow_txn.model.names import parse_table_name
from airflow_txn.model.results import (
    ManifestColumn,
    ManifestFile,
    ManifestIndex,
    ManifestIndexEntry,
    ManifestPart,
    ManifestReport,
    TableManifest,
)
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)

# A directory name no namespace can take: namespaces match [a-z_][a-z0-9_]*, so never start with '.'.
MANIFEST_DIR = ".manifests"
FORMAT = "airflow_txn.manifest"
VERSION = 1
INDEX = "index.json"


def csn_dir(csn: int) -> str:
    """The directory (prefix) holding the manifests of snapshot `csn`, relative to the storage root."""
    return f"{MANIFEST_DIR}/csn-{csn}"


def manifest_name(info: TableInfo) -> str:
    return f"{info.name.qualified}.json"


def table_manifest(rt: Runtime, info: TableInfo, parts: Sequence[part_records.PartRow], csn: int) -> TableManifest:
    """The manifest of one table at `csn` from its visible parts (no timestamps: same CSN, same content)."""
    entries: list[ManifestPart] = []
    file_count = 0
    with rt.catalog.read() as conn:
        written = versions.written_schemas(conn, info, parts)
    for part in parts:
        try:
            found = rt.storage.part_uris(info.directory, part.path, part.files)
        except OSError as exc:
            raise StorageError(f"a file of part {part.id} of {info.name.qualified} is unreadable: {exc}") from exc
        files = [ManifestFile(path=uri, size_bytes=size) for uri, size in found]
        file_count += len(files)
        entries.append(ManifestPart(
            id=part.id, partition=dict(part.partition), row_count=part.row_count,
            size_bytes=part.size_bytes, creation_tid=part.version.creation_tid,
            creation_csn=part.version.creation_csn, files=files,
        ))
        older = written.get(part.schema_version) if part.schema_version != info.version else None
        if older is not None and not evolution.reads_by_name(older, info.schema):
            entries[-1]["columns"] = evolution.file_columns(older, info.schema)
    return TableManifest(
        format=FORMAT, version=VERSION, table=info.name.qualified, csn=csn,
        schema=str(info.schema),
        columns=[ManifestColumn(name=f.name, type=str(f.type), nullable=f.nullable) for f in info.schema],
        partition_by=list(info.partition_by),
        row_count=sum(p.row_count for p in parts),
        file_count=file_count,
        parts=entries,
    )


def view_manifest(rt: Runtime, planned: Planned) -> TableManifest:
    """The manifest of one table as a transaction sees it (`planned` by reading.plan in its view: its own staged
    parts included): what a check before its commit reads (Transaction.manifest). Never written to storage."""
    manifest = table_manifest(rt, planned.info, planned.parts, planned.snapshot)
    if planned.tid is not None:
        manifest["tid"] = planned.tid
    return manifest


def write_manifests(rt: Runtime, csn: int, tables: Sequence[str] | None = None) -> ManifestReport:
    """Write the manifests of snapshot `csn` for `tables` (None: all) and the index, each table planned by the read
    planner at `csn` (TxnError if it is not readable yet), or, below its retention horizon, at a tag at exactly
    `csn` holding it (SnapshotTooOldError naming the tables no such tag holds)."""
    return _write(rt, csn, planned_at(rt, csn, tables))


def write_at_tag(rt: Runtime, name: str, tables: Sequence[str] | None = None) -> ManifestReport:
    """The manifests of tag `name`'s snapshot of `tables` (None: every table it holds), each planned at the tag:
    TagNotFoundError, TableNotFoundError, TableNotInTagError; TagNotFoundError too when the tag went away while
    they were written."""
    tag = tags.get(rt, name)
    names = list(tag["tables"]) if tables is None else list(tables)
    planned = [reading.plan(rt, table, tag=name) for table in names]
    return _write(rt, planned[0].snapshot if planned else tag["csn"], planned)


def planned_at(rt: Runtime, csn: int, tables: Sequence[str] | None) -> list[Planned]:
    """Every table of `tables` (None: all) as a read at snapshot `csn` sees it (reading.plan); a table `csn` is
    below the retention horizon of, as a read at a tag at exactly `csn` holding it sees it (tags.holding:
    SnapshotTooOldError naming the tables no such tag holds)."""
    if tables is None:  # the tables there, by the names they had there (a table renamed since: its old name)
        with rt.catalog.read() as conn:
            tables = [i.name.qualified for i in versions.tables_seen(conn, None, csn)]
    planned: list[Planned] = []
    below: list[str] = []
    for table in tables:
        try:
            planned.append(reading.plan(rt, table, csn=csn))
        except SnapshotTooOldError:
            below.append(table)
    if below:
        rows = tags.holding(rt, csn, below)
        for table in below:
            name = parse_table_name(table).qualified
            holder = next(r for r in rows if name in r.tables)  # the names the tables had at the tag's CSN
            planned.append(reading.plan(rt, table, tag=holder.name))
    return planned


def _write(rt: Runtime, csn: int, planned: Sequence[Planned]) -> ManifestReport:
    """Write the manifests of the planned reads (at `csn`) and, last, the index; then confirm their tags."""
    chosen = sorted({p.info.id: p for p in planned}.values(), key=lambda p: p.info.name.qualified)
    manifests = [table_manifest(rt, p.info, p.parts, csn) for p in chosen]
    target = csn_dir(csn)
    written: dict[str, str] = {}
    for p, manifest in zip(chosen, manifests, strict=True):
        written[p.info.name.qualified] = _write_json(rt, f"{target}/{manifest_name(p.info)}", manifest)
    index = ManifestIndex(
        format=FORMAT, version=VERSION, csn=csn,
        tables=[ManifestIndexEntry(table=m["table"], manifest=manifest_name(p.info), row_count=m["row_count"],
                                   file_count=m["file_count"]) for p, m in zip(chosen, manifests, strict=True)],
        warehouse_id=identity.warehouse_id(rt.catalog),
    )
    index_path = _write_json(rt, f"{target}/{INDEX}", index)  # last: a complete index names complete manifests
    for row in {(p.tag.name, p.tag.created_at): p.tag for p in chosen if p.tag is not None}.values():
        tags.confirm(rt, row)  # each tag read at still exists: vacuum kept every file the manifests list
    return ManifestReport(csn=csn, directory=index_path.rpartition("/")[0], index=index_path, tables=written)


def indexed_tables(rt: Runtime, directory: str) -> tuple[list[str], str | None] | None:
    """The tables the index of a manifest directory (csn_dir) lists and the warehouse that wrote it (None: an
    index written before indexes named it); None without a readable index."""
    try:
        index = json.loads(rt.storage.read_root_file(f"{directory}/{INDEX}") or b"")
        writer = index.get("warehouse_id")
        return [str(entry["table"]) for entry in index["tables"]], None if writer is None else str(writer)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def listed_part_ids(rt: Runtime, directory: str, info: TableInfo) -> set[int] | None:
    """The part ids one table's manifest in `directory` lists; None if it is missing or unreadable."""
    try:
        manifest = json.loads(rt.storage.read_root_file(f"{directory}/{manifest_name(info)}") or b"")
        return {int(part["id"]) for part in manifest["parts"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_on_commit(rt: Runtime, tid: str, csn: int) -> ManifestReport | None:
    """Manifests on every commit (WarehouseConfig.manifests == "on-commit"): the manifests of `csn`
    for the tables transaction `tid` wrote. Never raises: the commit already stands; a failure is
    logged and `Warehouse.write_manifest(csn)` can write them later. None for a read-only commit."""
    try:
        with rt.catalog.read() as conn:
            record = commit_log.record_of(conn, tid)
            readable = rt.oracle.readable_csn(conn)
        if record is None or record.csn != csn:
            return None
        if csn > readable:
            log.warning("manifests of CSN %d not written: not readable yet (watermark %d)", csn, readable)
            return None
        return write_manifests(rt, csn, list(record.tables))
    except Exception:
        log.warning("writing the manifests of CSN %d failed; write them with write_manifest(%d)", csn, csn,
                    exc_info=True)
        return None


def _write_json(rt: Runtime, relative: str, payload: TableManifest | ManifestIndex) -> str:
    """Write a manifest file whole (Storage.write_root_file: replaced atomically, or one PUT); its URI."""
    text = json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        return rt.storage.write_root_file(relative, text.encode("utf-8"))
    except OSError as exc:
        raise StorageError(f"could not write manifest {relative}: {exc}") from exc
