"""Changing a table's schema inside a transaction (docs/DESIGN.md, D27; docs/CONCEPTS.md, "Changing tables").

A change is a statement: it stages version n+1 of the table's schema under the transaction and its staging key, and
takes the removal lock on version n (the one the statement sees) by compare-and-swap, in ONE catalog transaction
after the key's earlier attempts are withdrawn (as a write's registration does: a keyed retry replaces the earlier
attempt's change). Everything the caller passed is checked first (model/evolution.py: an unknown column, a narrowing,
a partition column: SchemaMismatchError or InvalidNameError, nothing staged). The commit's apply stamps the version
with the transaction's parts, at its CSN; rollback stamps it RollbackCSN. The transaction's next statements check
their data against the new version (staging.load_table); other transactions see it from that CSN on.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from sqlalchemy import Connection

from airflow_txn.catalog import compaction_records, part_records, schema, table_registry, table_versions
from airflow_txn.core import retries, staging
from airflow_txn.core.runtime import Runtime
from airflow_txn.core.staging import Statement
from airflow_txn.errors import CatalogUpgradeRequiredError, InvalidNameError, SchemaMismatchError
from airflow_txn.model import evolution
from airflow_txn.model.names import parse_table_name
from airflow_txn.model.partitioning import WHOLE_TABLE

Make = Callable[[pa.Schema, str, tuple[str, ...]], tuple[pa.Schema, evolution.Change]]
"""(the schema the statement sees, the table's name, its partition columns) -> (the new schema, the change)."""


def require_versions(rt: Runtime) -> None:
    """CatalogUpgradeRequiredError (nothing staged, the transaction usable) on a catalog older than schema version
    7, which has no txn_table_versions (docs/DESIGN.md, D23)."""
    cat = rt.catalog
    if not cat.at_least(schema.VERSIONED_SINCE):
        cat.probe()  # another process may have upgraded it since this one looked
    if not cat.at_least(schema.VERSIONED_SINCE):
        raise CatalogUpgradeRequiredError(
            f"changing a table needs catalog schema version {schema.VERSIONED_SINCE} (table txn_table_versions); the "
            f"{cat.where} is older, and opening never upgrades a catalog (docs/DESIGN.md, D23): the catalog must be "
            "upgraded, once, with `airflow-txn upgrade` (by a writer, as a deliberate step: docs/DEPLOYMENT.md, "
            "Versions). Nothing was staged", None, schema.SCHEMA_VERSION)


def change(rt: Runtime, stmt: Statement, table: object, make: Make) -> evolution.Change:
    """Stage one change of `table`'s schema (module doc); returns what it did."""
    seen = staging.table_seen(rt, stmt, table)
    # a column id is never given twice, not even one a withdrawn or rolled-back version gave (D27)
    evolved, what = make(seen.numbered(), seen.info.name.qualified, seen.info.partition_by)
    if what.kind == "set_nullable" and not what.compatible:
        _check_no_nulls(rt, stmt, seen.info, what.column)

    def body(conn: Connection) -> None:
        staging.lock_statement(conn, rt, stmt)
        table_versions.stage(conn, stmt.tid, stmt.key, stmt.attempt, seen.version, evolved, what.detail,
                             what.compatible)

    rt.catalog.write_retrying(body, f"changing table {seen.info.name}")
    return what


def create_table(rt: Runtime, stmt: Statement, table: object, arrow_schema: object, partition_by: object) -> None:
    """Create `table` inside the transaction: its first version staged by it (visible to others from its commit's
    CSN; a read at an older CSN finds no such table). Checked first as Warehouse.create_table checks; TableExistsError
    for a name with a committed table; SerializationError when another transaction is creating it."""
    if not isinstance(table, str):
        raise InvalidNameError(f"table must be a table name, got {type(table).__name__}")
    if not isinstance(partition_by, (list, tuple)):
        raise InvalidNameError(f"partition_by must be a list of distinct column names, got {partition_by!r}")
    by: list[str] = list(partition_by)
    name, checked = table_registry.validate_new_table(table, arrow_schema, by)

    def body(conn: Connection) -> None:
        staging.lock_statement(conn, rt, stmt)
        table_registry.create_staged(conn, stmt.tid, stmt.key, stmt.attempt, name, checked, by)

    rt.catalog.write_retrying(body, f"creating table {name}")


def drop_table(rt: Runtime, stmt: Statement, table: object) -> None:
    """Drop `table` inside the transaction: a tombstone version (docs/DESIGN.md, D27) and the removal of every part
    the statement sees, so a read at the commit's CSN or later finds no table, an older CSN still reads it, and the
    name is free again at that CSN (t.create_table makes a new table of it, empty). Not compatible: it conflicts with
    concurrent writers of the table, first committer wins."""
    seen = staging.table_seen(rt, stmt, table, with_parts=True)
    staging.check_free(stmt.tid, {p.id: p.version.removal_tid for p in seen.parts})
    info = seen.info

    def body(conn: Connection) -> None:
        staging.lock_statement(conn, rt, stmt)
        locked = compaction_records.follow_merges(conn, [p.id for p in seen.parts], rt.catalog)
        part_records.lock_for_removal(conn, stmt.tid, stmt.key, locked, stmt.attempt, info.id)
        retries.record(conn, stmt.tid, stmt.key, stmt.attempt, info.id, [WHOLE_TABLE])
        table_versions.stage(conn, stmt.tid, stmt.key, stmt.attempt, seen.version, info.schema,
                             f"dropped table {info.name}", compatible=False, dropped=True)

    rt.catalog.write_retrying(body, f"dropping table {info.name}")


def rename_table(rt: Runtime, stmt: Statement, table: object, new: object) -> None:
    """Rename `table` inside the transaction (docs/DESIGN.md, D27): version n+1 carries the new name, the
    directory stays (no file moves). Readers find the table by its old name before the commit's CSN and by the new
    one from it (time travel keeps the old name); the transaction itself sees the new name at once. The new name
    is taken at once (TableExistsError when a table holds it, SerializationError when another transaction is
    creating or renaming a table to it); rollback or a keyed retry gives it back. Not compatible: it conflicts
    with concurrent writers of the table, first committer wins."""
    if not isinstance(table, str):
        raise InvalidNameError(f"table must be a table name, got {type(table).__name__}")
    old_name, new_name = parse_table_name(table), parse_table_name(new)
    if new_name == old_name:
        raise InvalidNameError(f"cannot rename table {old_name} to its own name")
    seen = staging.table_seen(rt, stmt, table)

    def body(conn: Connection) -> None:
        staging.lock_statement(conn, rt, stmt)
        table_registry.reserve(conn, stmt.tid, seen.info.id, old_name.qualified, new_name)
        table_versions.stage(conn, stmt.tid, stmt.key, stmt.attempt, seen.version, seen.info.schema,
                             f"renamed table {old_name} to {new_name}", compatible=False, name=new_name.qualified)

    rt.catalog.write_retrying(body, f"renaming table {old_name}")


def _check_no_nulls(rt: Runtime, stmt: Statement, info: table_registry.TableInfo, column: str) -> None:
    """Forbidding nulls in a column: no row the transaction sees may hold one (a concurrent writer's may: that is
    why the change is not compatible, and conflicts with it at commit)."""
    from airflow_txn.core import reading

    rows = reading.read(rt, info, stmt.tid, stmt.snapshot)
    nulls = rows.column(column).null_count
    if nulls:
        raise SchemaMismatchError(f"column {column!r} of {info.name} holds {nulls} null(s): it cannot be made NOT "
                                  "NULL (update them first)")


# -- the changes, as `Make`s ------------------------------------------------------------------------------------
def add_column(field: object, default: object) -> Make:
    return lambda s, table, by: evolution.add_column(s, field, default, table=table, partition_by=by)


def rename_column(old: object, new: object) -> Make:
    return lambda s, table, by: evolution.rename_column(s, _column(old), new, table=table, partition_by=by)


def drop_column(name: object) -> Make:
    return lambda s, table, by: evolution.drop_column(s, _column(name), table=table, partition_by=by)


def alter_column(name: object, type_: object) -> Make:
    return lambda s, table, by: evolution.alter_column(s, _column(name), type_, table=table, partition_by=by)


def set_nullable(name: object, nullable: object) -> Make:
    if not isinstance(nullable, bool):
        raise InvalidNameError(f"nullable must be True or False, got {nullable!r}")
    return lambda s, table, by: evolution.set_nullable(s, _column(name), nullable, table=table, partition_by=by)


def _column(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidNameError(f"a column name must be a str, got {type(name).__name__}")
    return name
