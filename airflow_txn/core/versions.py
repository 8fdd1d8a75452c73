"""Which version of a table's schema a statement or a read uses, and reading a part written under another one
(docs/DESIGN.md, D27).

A table's schema at snapshot S, to transaction T, is its one version visible there (invariant 2's rule, on
txn_table_versions): a statement checks its data against the version its transaction sees (its own DDL included), a
read at CSN c reads under the version visible at c. A part records the version it was written under; read under
another, it goes through evolution.projection (by column id: a renamed column takes its new name, a widened one is
cast, one added since is null or its default, a dropped one is not read). Nothing is rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import pyarrow as pa
from sqlalchemy import Connection

from airflow_txn.catalog import part_records, table_registry, table_versions
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import retries
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import SchemaMismatchError, SerializationError, TableNotFoundError
from airflow_txn.model import evolution

Schemas = Mapping[int, pa.Schema]
"""{version: schema} of the versions a read's parts were written under (besides the reader's own)."""


def table_at(conn: Connection, info: TableInfo, tid: str | None, snapshot: int) -> TableInfo:
    """`info` as of the version of its schema visible to (tid, snapshot); TableNotFoundError when it has none there
    or it is dropped. A catalog without versions (schema version 6) has only version 1, the schema in txn_tables."""
    if not table_versions.present(conn):
        return info if info.version == 1 else replace(info, version=1)
    found = table_versions.visible(conn, [info.id], tid, snapshot).get(info.id)
    if found is None or found.dropped or found.name != info.name.qualified:
        # renamed (docs/DESIGN.md, D27): the name means, at this snapshot, the table whose version there has it
        named = table_versions.visible_named(conn, info.name.qualified, tid, snapshot)
        if named is not None:
            return table_registry.at_version(table_registry.by_id(conn, named.table_id), named)
        found = None
    if found is None or found.dropped:
        raise TableNotFoundError(f"table {info.name} does not exist at snapshot {snapshot}"
                                 + ("" if tid is None else f" of transaction {tid}"), table=str(info.name))
    if found.version == info.version and info.committed and found.state.creation_csn is not None:
        return info  # the cached lookup was of this version: its schema already decoded
    return table_registry.at_version(info, found)


def table_for_statement(conn: Connection, info: TableInfo, tid: str, snapshot: int, key: str | None,
                        attempt: int | None) -> TableInfo:
    """`info` as of the version a statement of `tid` under (key, attempt) sees: table_at, with the key's earlier
    attempts (and the keys built on them) withdrawn as its registration will withdraw them, so a retried attempt
    checks its data against the schema it will be registered under, not one only an older attempt staged."""
    withdrawn = retries.withdrawn(conn, tid, key, attempt) if table_versions.present(conn) else {}
    if not withdrawn:
        return table_at(conn, info, tid, snapshot)
    found = table_versions.visible_for_statement(conn, info.id, tid, snapshot, withdrawn)
    if found is None or found.dropped:
        raise TableNotFoundError(f"table {info.name} does not exist at snapshot {snapshot} of transaction {tid}",
                                 table=str(info.name))
    return table_registry.at_version(info, found)


def tables_seen(conn: Connection, tid: str | None, snapshot: int) -> list[TableInfo]:
    """Every table transaction `tid` (None: a read of committed snapshot `snapshot`) sees at its snapshot, as it sees
    it, by the names they have there: those it created included, those it dropped left out, one it renamed under its
    new name, one renamed after `snapshot` under its old name (a transaction's own view of `Warehouse.tables`; the
    tables a tag or a manifest of an older CSN holds). One query besides the table rows."""
    infos = table_registry.all_tables(conn)
    if not table_versions.present(conn):
        return [table_at(conn, i, tid, snapshot) for i in infos]  # version 1 of every table, sorted by name
    found = table_versions.visible(conn, [i.id for i in infos], tid, snapshot)
    seen = [table_registry.at_version(i, found[i.id]) for i in infos if i.id in found and not found[i.id].dropped]
    return sorted(seen, key=lambda t: t.name.qualified)


def written_schemas(conn: Connection, info: TableInfo, parts: Iterable[PartRow]) -> dict[int, pa.Schema]:
    """The schemas of the other versions `parts` were written under (one catalog read; none when all are the
    reader's)."""
    wanted = sorted({p.schema_version for p in parts} - {info.version})
    if not wanted or not table_versions.present(conn):
        return {}
    rows = table_versions.of_table(conn, info.id, wanted)
    return {v: evolution.with_ids(r.schema) for v, r in rows.items()}


def read_part(rt: Runtime, info: TableInfo, part: PartRow, schemas: Schemas) -> pa.Table:
    """The rows of one part as the table's version `info.version` reads them: read as written, then projected."""
    written = schemas.get(part.schema_version) if part.schema_version != info.version else None
    if written is None:
        return rt.storage.read_part(info.directory, part.path, part.files, info.schema, part.partition)
    rows = rt.storage.read_part(info.directory, part.path, part.files, written, part.partition)
    return evolution.projection(written, info.schema)(rows)


def with_version(info: TableInfo, version: int, arrow_schema: pa.Schema) -> TableInfo:
    """`info` as of another version (compaction merges the parts of one version under that version)."""
    return replace(info, schema=arrow_schema, version=version)


def check_current(conn: Connection, info: TableInfo, tid: str, snapshot: int) -> None:
    """SchemaMismatchError unless `info.version` is the version of its table (tid, snapshot) sees (an append that
    used a cached lookup, checked as it registers: the table changed since, so it is looked up again)."""
    if not table_versions.present(conn):
        return
    seen = table_versions.visible(conn, [info.id], tid, snapshot).get(info.id)
    if seen is None or seen.version != info.version or seen.dropped:
        raise SchemaMismatchError(f"table {info.name} changed since this statement looked it up (version "
                                  f"{info.version}; the transaction sees {seen.version if seen else 'none'}): "
                                  "nothing was staged")


def touched(conn: Connection, tid: str) -> table_versions.Touched:
    """What `tid` changed: the tables of its live parts and of its staged versions (one query)."""
    if not table_versions.present(conn):  # an older catalog has parts only
        return table_versions.Touched(tuple(part_records.tables_touched(conn, tid)), (), False)
    return table_versions.touched(conn, tid)


def tables_touched(conn: Connection, tid: str) -> list[int]:
    """The tables `tid` changed: where it staged or removed parts, or staged a version of the schema (what its
    commit record names)."""
    return touched(conn, tid).tables


def pending_tables(conn: Connection, tid: str) -> list[int]:
    """The tables rollback still has to stamp for `tid`: parts or versions."""
    return sorted(set(part_records.pending_tables(conn, tid)) | set(table_versions.pending_tables(conn, tid)))


def validate(conn: Connection, tid: str, snapshot: int, changed: table_versions.Touched | None = None) -> None:
    """D27 point 4 at commit: SerializationError naming the table and the change when `tid` changed a table
    incompatibly that others wrote since its snapshot, or wrote a table others changed incompatibly since.
    `changed`: what `touched` read for `tid` in the caller's catalog transaction, if it did."""
    if not table_versions.present(conn):
        return
    found = table_versions.conflicts(conn, tid, snapshot, touched(conn, tid) if changed is None else changed)
    if found is not None:
        raise SerializationError(found)
