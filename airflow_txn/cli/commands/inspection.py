"""`tables`, `read`, `schema`, `watermark` and `log`: what a warehouse holds, read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from airflow_txn.cli import render
from airflow_txn.cli.commands.options import global_options, int64
from airflow_txn.cli.commands.settings import Settings
from airflow_txn.model.csn import PREHISTORIC_CSN

if TYPE_CHECKING:
    pass

@click.command()
@click.option("--csn", type=int64(PREHISTORIC_CSN),
              help="List the tables of this snapshot, by the names they had there [default: the watermark].")
@global_options
@click.pass_obj
def tables(settings: Settings, csn: int | None) -> int:
    """Tables with their partitioning, last commit CSN and visible parts, rows and bytes."""
    wh = settings.open()
    at = wh.readable_csn() if csn is None else csn
    names = wh.tables() if csn is None else wh.tables(csn=csn)
    return settings.emit([wh.table_stats(name, at) for name in names], render.tables)


@click.command()
@click.argument("table")
@click.option("--csn", type=int64(PREHISTORIC_CSN), help="Snapshot to read [default: the watermark].")
@click.option("--tag", metavar="NAME", help="Read at this tag (a named snapshot; see `tags`) instead of a CSN.")
@click.option("--limit", type=int64(0), default=20, show_default=True, help="Rows to print; 0 = all.")
@global_options
@click.pass_obj
def read(settings: Settings, table: str, csn: int | None, tag: str | None, limit: int) -> int:
    """Rows of TABLE at a snapshot."""
    from airflow_txn.model.results import ReadResult

    if tag is not None and csn is not None:
        raise click.UsageError("read at --csn or at --tag, not both")
    wh = settings.open()
    if tag is not None:
        data = wh.read(table, tag=tag)
        snapshot = wh.tag_info(tag)["csn"]
    else:
        snapshot = wh.readable_csn() if csn is None else csn
        data = wh.read(table, csn=snapshot)
    shown = data if limit == 0 else data.slice(0, limit)
    result = ReadResult(table=table, csn=snapshot, num_rows=data.num_rows, rows=shown.to_pylist())
    if tag is not None:
        result["tag"] = tag
    return settings.emit(result, render.rows)


@click.command()
@click.argument("table")
@click.option("--csn", type=int64(PREHISTORIC_CSN), help="Snapshot [default: the watermark].")
@click.option("--tag", metavar="NAME", help="At this tag instead of a CSN.")
@global_options
@click.pass_obj
def schema(settings: Settings, table: str, csn: int | None, tag: str | None) -> int:
    """The columns of TABLE at a snapshot (time travel keeps old schemas): name, type, nullable, column id."""
    if tag is not None and csn is not None:
        raise click.UsageError("read at --csn or at --tag, not both")
    from airflow_txn.model.evolution import column_id, default_of
    from airflow_txn.model.results import ColumnInfo, SchemaInfo

    wh = settings.open()
    found = wh.schema(table, csn=csn, tag=tag)
    columns: list[ColumnInfo] = []
    for field in found:
        default = default_of(field)
        columns.append(ColumnInfo(name=field.name, type=str(field.type), nullable=field.nullable,
                                  column_id=column_id(field), default=None if default is None else default.as_py()))
    at = wh.tag_info(tag)["csn"] if tag is not None else csn
    return settings.emit(SchemaInfo(table=table, partition_by=list(wh.partition_by(table, csn=at)), columns=columns),
                         render.schema)


@click.command()
@global_options
@click.pass_obj
def watermark(settings: Settings) -> int:
    """The readable CSN; the oracle's latest CSN and the lag behind it."""
    return settings.emit(settings.open().watermark_info(), render.mapping)


@click.command("log")
@click.option("--limit", type=int64(1), default=20, show_default=True)
@global_options
@click.pass_obj
def commit_log(settings: Settings, limit: int) -> int:
    """Recent commits, newest first."""
    return settings.emit(settings.open().commit_log(limit=limit), render.commit_log)


COMMANDS = (tables, read, schema, watermark, commit_log,)
