"""`add-column`, `rename-column`, `drop-column`, `alter-column`, `set-nullable`, `drop-table` and
`rename-table`: one change of a table, each in a transaction of its own (docs/CONCEPTS.md, "Changing tables")."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from airflow_txn.cli import render
from airflow_txn.cli.commands.options import global_options
from airflow_txn.cli.commands.settings import Settings

if TYPE_CHECKING:
    pass

def _parse_type(text: str) -> object:
    """An Arrow type from its name: int64, string, float64, date32, timestamp[us], decimal128(10, 2), ..."""
    import re

    import pyarrow as pa

    found = re.fullmatch(r"\s*decimal(?:128)?\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*", text)
    if found is not None:
        return pa.decimal128(int(found.group(1)), int(found.group(2)))
    try:
        return pa.type_for_alias(text.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an Arrow type name (int64, string, float64, date32, timestamp[us], "
                                 "decimal128(P, S), ...)") from None


def _change(settings: Settings, table: str, label: str, change: Callable[[Any], None]) -> int:
    """Run one table change as a transaction of its own (committed, or rolled back on an error)."""
    wh = settings.open()
    with wh.begin(label=label) as t:
        change(t)
    return settings.emit({"table": table, "change": label, "tid": t.tid,
                          "csn": wh.transaction_info(t.tid)["commit_csn"]}, render.mapping)


_KEY = click.option("--key", metavar="KEY", help="Staging key of the change (a retry under it replaces it).")


@click.command("add-column")
@click.argument("table")
@click.argument("column")
@click.argument("type_name", metavar="TYPE")
@click.option("--default", metavar="VALUE", help="What rows written before read (cast from text to TYPE).")
@click.option("--not-null", is_flag=True, help="NOT NULL (needs --default).")
@_KEY
@global_options
@click.pass_obj
def add_column(settings: Settings, table: str, column: str, type_name: str, default: str | None, not_null: bool,
               key: str | None) -> int:
    """Add COLUMN of TYPE to TABLE, in a transaction of its own (docs/CONCEPTS.md, "Changing tables")."""
    import pyarrow as pa

    arrow_type = _parse_type(type_name)
    value: object = None
    if default is not None:
        try:
            value = pa.scalar(default).cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise click.BadParameter(f"--default {default!r} is not a {arrow_type}: {exc}") from None
    field = pa.field(column, arrow_type, nullable=not not_null)
    return _change(settings, table, f"add-column {column} {arrow_type}",
                   lambda t: t.add_column(table, field, default=value, key=key))


@click.command("rename-column")
@click.argument("table")
@click.argument("old")
@click.argument("new")
@_KEY
@global_options
@click.pass_obj
def rename_column(settings: Settings, table: str, old: str, new: str, key: str | None) -> int:
    """Rename column OLD of TABLE to NEW (older files are read by column id), in a transaction of its own."""
    return _change(settings, table, f"rename-column {old} {new}",
                   lambda t: t.rename_column(table, old, new, key=key))


@click.command("drop-column")
@click.argument("table")
@click.argument("column")
@_KEY
@global_options
@click.pass_obj
def drop_column(settings: Settings, table: str, column: str, key: str | None) -> int:
    """Drop COLUMN of TABLE (its values stay in the files, unread), in a transaction of its own."""
    return _change(settings, table, f"drop-column {column}", lambda t: t.drop_column(table, column, key=key))


@click.command("alter-column")
@click.argument("table")
@click.argument("column")
@click.argument("type_name", metavar="TYPE")
@_KEY
@global_options
@click.pass_obj
def alter_column(settings: Settings, table: str, column: str, type_name: str, key: str | None) -> int:
    """Widen COLUMN of TABLE to TYPE (int32 -> int64, float32 -> float64, ...), in a transaction of its own."""
    arrow_type = _parse_type(type_name)
    return _change(settings, table, f"alter-column {column} {arrow_type}",
                   lambda t: t.alter_column(table, column, arrow_type, key=key))


@click.command("set-nullable")
@click.argument("table")
@click.argument("column")
@click.argument("nullable", type=click.BOOL)
@_KEY
@global_options
@click.pass_obj
def set_nullable(settings: Settings, table: str, column: str, nullable: bool, key: str | None) -> int:
    """Allow (true) or forbid (false) nulls in COLUMN of TABLE, in a transaction of its own."""
    return _change(settings, table, f"set-nullable {column} {str(nullable).lower()}",
                   lambda t: t.set_nullable(table, column, nullable, key=key))


@click.command("drop-table")
@click.argument("table")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@_KEY
@global_options
@click.pass_obj
def drop_table(settings: Settings, table: str, yes: bool, key: str | None) -> int:
    """Drop TABLE in a transaction of its own: gone from its CSN on (older snapshots still read it)."""
    if not yes:
        click.confirm(f"Drop table {table}?", abort=True, err=True)
    return _change(settings, table, f"drop-table {table}", lambda t: t.drop_table(table, key=key))


@click.command("rename-table")
@click.argument("table")
@click.argument("new")
@_KEY
@global_options
@click.pass_obj
def rename_table(settings: Settings, table: str, new: str, key: str | None) -> int:
    """Rename TABLE to NEW in a transaction of its own: NEW from its CSN on (older snapshots read TABLE); no file
    moves."""
    return _change(settings, table, f"rename-table {table} {new}", lambda t: t.rename_table(table, new, key=key))


COMMANDS = (add_column, rename_column, drop_column, alter_column, set_nullable, drop_table, rename_table,)
