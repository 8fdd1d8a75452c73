"""The table registry: creating tables, looking them up, and their Arrow schemas in the catalog."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from sqlalchemy import Connection, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_txn.catalog import schema, table_versions
from airflow_txn.errors import (
    InvalidNameError,
    SchemaMismatchError,
    SerializationError,
    TableExistsError,
    TableNotFoundError,
)
from airflow_txn.model import evolution
from airflow_txn.model.names import TableName, check_column_name, parse_table_name
from airflow_txn.model.partitioning import is_partition_type, normalize_partitions, partition_key
from airflow_txn.model.types import check_column_type


@dataclass(frozen=True, slots=True)
class TableInfo:
    """What the catalog knows of one table."""

    id: int
    name: TableName
    schema: pa.Schema
    partition_by: tuple[str, ...]
    directory: str  # relative to the storage root
    version: int = 1
    """The version of the table's schema `schema` is (docs/DESIGN.md, D27): a statement writes under it and a read
    reads every part as it (model/evolution.projection)."""
    committed: bool = True
    """Whether that version is committed (False: staged by the transaction that looked it up)."""

    def partition_keys(self, partitions: Sequence[Mapping[str, Any]] | None) -> list[str] | None:
        """The keys of the listed partitions, checked against the table (None: no list, the whole table)."""
        if partitions is None:
            return None
        return [partition_key(p) for p in normalize_partitions(partitions, self.schema, self.partition_by)]


CACHED = 0
"""TableInfo.version of a table as txn_tables holds it: the newest committed version of its schema, its number not
known (core/versions.table_at gives the version a snapshot sees)."""


def encode_schema(arrow_schema: pa.Schema) -> bytes:
    return bytes(arrow_schema.serialize().to_pybytes())


def decode_schema(blob: bytes) -> pa.Schema:
    """A stored schema, with column ids on every field: a table created before ids existed gets them here, the same
    ones every time (evolution.with_ids, in schema order), so its parts are matched by name as its version 1."""
    return evolution.with_ids(pa.ipc.read_schema(pa.py_buffer(blob)))


def validate_new_table(name: str, arrow_schema: object, partition_by: Sequence[str]) -> tuple[TableName, pa.Schema]:
    """Check a create_table request completely before anything is written."""
    table_name = parse_table_name(name)
    if not isinstance(arrow_schema, pa.Schema):
        raise SchemaMismatchError(f"schema of {name} must be a pyarrow.Schema, got {type(arrow_schema).__name__}")
    if len(arrow_schema) == 0:
        raise SchemaMismatchError(f"schema of {name} has no columns")
    for field in arrow_schema:
        check_column_name(field.name)
        check_column_type(field.name, field.type, name)
    if len(set(arrow_schema.names)) != len(arrow_schema.names):
        raise SchemaMismatchError(f"schema of {name} has duplicate column names {arrow_schema.names}")
    if isinstance(partition_by, str) or len(set(partition_by)) != len(partition_by):
        raise InvalidNameError(f"partition_by must be a list of distinct column names, got {partition_by!r}")
    for col in partition_by:
        if col not in arrow_schema.names:
            raise InvalidNameError(f"partition column {col!r} is not a column of {name}")
        if not is_partition_type(arrow_schema.field(col).type):
            raise SchemaMismatchError(
                f"partition column {col!r} has type {arrow_schema.field(col).type}; use an integer, "
                "string, date, boolean or timestamp column"
            )
    if len(partition_by) == len(arrow_schema):
        raise SchemaMismatchError(f"{name} needs at least one column that is not a partition column")
    return table_name, evolution.with_ids(arrow_schema.remove_metadata(), fresh=True)


def create(conn: Connection, name: TableName, arrow_schema: pa.Schema, partition_by: Sequence[str]) -> TableInfo:
    """Register a table and (on a catalog with versions) its version 1, committed at the prehistoric snapshot."""
    table_id = create_row(conn, name, arrow_schema, partition_by)
    if table_versions.present(conn):
        table_versions.create_first(conn, table_id, arrow_schema, partition_by, name.qualified)
    return TableInfo(table_id, name, arrow_schema, tuple(partition_by), f"{name.namespace}/{name.table}")


def create_row(conn: Connection, name: TableName, arrow_schema: pa.Schema, partition_by: Sequence[str]) -> int:
    """The table's row in txn_tables (TableExistsError when the name has one); returns its id. Its directory is
    `namespace/table`, or, when another table has that one (a table renamed away from the name, or dropped and its
    name taken), `namespace/table-2`, `-3`, ...: no table name holds a '-', and two tables never share a directory
    (vacuum lists each table's directory for its orphans: it would take the other table's files for its own)."""
    directory = _free_directory(conn, f"{name.namespace}/{name.table}")
    try:
        result = conn.execute(
            insert(schema.tables).values(
                name=name.qualified,
                schema_ipc=encode_schema(arrow_schema),
                partition_by=json.dumps(list(partition_by)),
                directory=directory,
                created_at=time.time(),
            )
        )
    except IntegrityError as exc:
        raise TableExistsError(f"table {name} exists already") from exc
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def _free_directory(conn: Connection, base: str) -> str:
    taken = select(schema.tables.c.id).where(schema.tables.c.directory == bindparam("b_directory")).limit(1)
    directory, n = base, 1
    while conn.execute(taken, {"b_directory": directory}).first() is not None:
        n += 1
        directory = f"{base}-{n}"
    return directory


def at_version(info: TableInfo, row: table_versions.VersionRow) -> TableInfo:
    """`info` as of one version of its schema."""
    return TableInfo(info.id, parse_table_name(row.name), evolution.with_ids(row.schema), row.partition_by,
                     info.directory,
                     row.version, row.state.creation_csn is not None)


RELEASED = table_versions.RELEASED


def _from_row(conn: Connection, row: object) -> TableInfo:
    name = str(row.name)  # type: ignore[attr-defined]
    if name.startswith(RELEASED):  # its name was taken by a rename (`release`): the name its last version had (none
        # left, every one rolled back and purged by vacuum: `~.<id>`, which names nothing)
        had = table_versions.last_name(conn, int(row.id))  # type: ignore[attr-defined]
        table_name = parse_table_name(had) if had is not None else TableName(RELEASED, name[len(RELEASED):])
    else:
        table_name = parse_table_name(name)
    return TableInfo(
        id=int(row.id),  # type: ignore[attr-defined]
        name=table_name,
        schema=decode_schema(row.schema_ipc),  # type: ignore[attr-defined]
        partition_by=tuple(json.loads(row.partition_by)),  # type: ignore[attr-defined]
        directory=row.directory,  # type: ignore[attr-defined]
        version=CACHED,
    )


def find(conn: Connection, name: str, historical: bool = True) -> TableInfo | None:
    """The table `name` names: the one txn_tables names so (its newest name, a rename staged by a transaction
    included: `reserve`), else the one whose live version is named so (being renamed: readers still find it by its
    old name), else, with `historical`, the one a version ever named so (time travel; a renamed table's old name).
    The name at a given snapshot is checked by versions.table_at (docs/DESIGN.md, D27)."""
    table_name = parse_table_name(name)
    row = conn.execute(select(schema.tables).where(schema.tables.c.name == table_name.qualified)).first()
    if row is not None:
        return _from_row(conn, row)
    table_id = table_versions.named(conn, table_name.qualified, historical)
    if table_id is None:
        return None
    return replace(by_id(conn, table_id), name=table_name)


def get(conn: Connection, name: str) -> TableInfo:
    info = find(conn, name)
    if info is None:
        raise TableNotFoundError(f"table {name} does not exist; create it with Warehouse.create_table", table=name)
    return info


def by_id(conn: Connection, table_id: int) -> TableInfo:
    row = conn.execute(select(schema.tables).where(schema.tables.c.id == table_id)).one()
    return _from_row(conn, row)


def names_and_directories(conn: Connection, table_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """{table id: (qualified name, directory)} in one query, without decoding schemas (the commit path)."""
    ids = list(table_ids)
    if not ids:
        return {}
    t = schema.tables.c
    match = t.id == ids[0] if len(ids) == 1 else t.id.in_(ids)  # one table, the usual case: no IN expansion
    rows = conn.execute(select(t.id, t.name, t.directory).where(match))
    return {int(r.id): (str(r.name), str(r.directory)) for r in rows}


def all_tables(conn: Connection) -> list[TableInfo]:
    """Every table row (one created inside a transaction not committed yet, or rolled back, too: vacuum, recovery)."""
    return [_from_row(conn, r) for r in conn.execute(select(schema.tables).order_by(schema.tables.c.name)).all()]


def listed_tables(conn: Connection, dropped: bool = False) -> list[TableInfo]:
    """The tables readers list (Warehouse.tables, manifests, tags of every table): those with a committed version
    (docs/DESIGN.md, D27), not one created inside a transaction not committed yet (or rolled back), by their
    committed names (not a name a transaction is renaming them to). With `dropped`, the dropped ones too (by the
    name they had): what publishing goes through."""
    committed = table_versions.committed_names(conn, dropped)
    if committed is None:
        return all_tables(conn)
    listed = [replace(t, name=parse_table_name(committed[t.id])) for t in all_tables(conn) if t.id in committed]
    return sorted(listed, key=lambda t: t.name.qualified)


def create_staged(conn: Connection, tid: str, key: str | None, attempt: int | None, name: TableName,
                  arrow_schema: pa.Schema, partition_by: Sequence[str]) -> int:
    """Transaction.create_table's catalog step: the table's row (a new one, or that of a name whose table was never
    committed) and its first version, staged by `tid`. TableExistsError when the name has a committed table;
    SerializationError when another transaction is creating it. Returns the table id."""
    found = find(conn, name.qualified, historical=False)
    if found is None:
        try:
            table_id = create_row(conn, name, arrow_schema, partition_by)
        except TableExistsError as exc:  # created by another transaction meanwhile (this catalog transaction fails)
            raise SerializationError(f"table {name} was created by another transaction meanwhile; transaction "
                                     f"{tid} conflicts and can only roll back") from exc
    else:
        committed = table_versions.committed_names(conn)
        if committed is not None and found.id in committed and committed[found.id] != name.qualified:
            raise SerializationError(f"table {name}: another transaction is renaming table {committed[found.id]} "
                                     f"to it; transaction {tid} conflicts and can only roll back")
        if committed is None or found.id in committed:
            raise TableExistsError(f"table {name} exists already")
        table_id = found.id
        _claim(conn, tid, table_id, name.qualified, f"table {name}")
    table_versions.stage_first(conn, tid, key, attempt, table_id, arrow_schema, partition_by, name.qualified)
    return table_id


def reserve(conn: Connection, tid: str, table_id: int, old: str, new: TableName) -> None:
    """Transaction.rename_table's catalog step before its version is staged: txn_tables.name of `table_id` becomes
    `new` at once (its unique index keeps two tables from taking one name, concurrent renames and creations
    included; readers still find the table by its old name through its live version until the rename commits,
    and rollback or a keyed retry gives the name back: table_versions.sync_names). TableExistsError when a table
    holds the name, SerializationError when another transaction is creating or renaming a table to it. The name of
    a dropped table (committed) or of one whose creation rolled back is free: that row gives it up (`release`)."""
    found = find(conn, new.qualified, historical=False)
    if found is not None and found.id != table_id:
        committed = table_versions.committed_names(conn)
        if committed is not None and found.id in committed and committed[found.id] != new.qualified:
            raise SerializationError(f"cannot rename table {old} to {new}: another transaction is renaming table "
                                     f"{committed[found.id]} to {new}; transaction {tid} conflicts and can only roll "
                                     "back")
        creator = table_versions.creator(conn, found.id)
        if committed is not None and found.id not in committed and creator not in (None, tid):
            raise SerializationError(f"cannot rename table {old} to {new}: transaction {creator} is creating table "
                                     f"{new}; transaction {tid} conflicts and can only roll back")
        if committed is None or found.id in committed or creator is not None:
            raise TableExistsError(f"cannot rename table {old} to {new}: table {new} exists already")
        release(conn, tid, found.id, new.qualified, f"cannot rename table {old} to {new}")
    try:
        conn.execute(update(schema.tables).where(schema.tables.c.id == table_id).values(name=new.qualified))
    except IntegrityError as exc:  # taken by another transaction meanwhile (this catalog transaction fails)
        raise SerializationError(f"cannot rename table {old} to {new}: another transaction took the name meanwhile; "
                                 f"transaction {tid} conflicts and can only roll back") from exc


def release(conn: Connection, tid: str, table_id: int, name: str, what: str) -> None:
    """A table whose name is free (dropped, committed, or its creation rolled back; nothing staged) gives it up for a
    rename: its txn_tables.name becomes `~<id>` for good (its versions keep their names, so time travel still finds
    it by the name: versions.table_at; nothing can be staged on it any more, and table_versions.sync_names leaves it
    so). Checked again once its row is locked, so a transaction creating the name again meanwhile (`_claim`,
    table_versions.revive) and this one never both win: SerializationError."""
    released = conn.execute(update(schema.tables).where(schema.tables.c.id == table_id, schema.tables.c.name == name)
                            .values(name=f"{RELEASED}{table_id}")).rowcount
    if released != 1 or not table_versions.free(conn, table_id):
        raise SerializationError(f"{what}: another transaction took the name meanwhile; transaction {tid} conflicts "
                                 "and can only roll back")


def _claim(conn: Connection, tid: str, table_id: int, name: str, what: str) -> None:
    """Creating a table again in the row that has the name: the row locked by a no-op update that still finds it
    named so (a rename that took the name meanwhile released it: `release`), else SerializationError."""
    kept = conn.execute(update(schema.tables).where(schema.tables.c.id == table_id, schema.tables.c.name == name)
                        .values(name=name)).rowcount
    if kept != 1:
        raise SerializationError(f"{what}: another transaction took the name meanwhile; transaction {tid} conflicts "
                                 "and can only roll back")
