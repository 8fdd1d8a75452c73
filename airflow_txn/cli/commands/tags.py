"""`tag`, `tags` and `untag`: named snapshots (Warehouse.tags), kept by vacuum whatever the retention."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from airflow_txn.cli import render
from airflow_txn.cli.commands.options import global_options, int64
from airflow_txn.cli.commands.settings import Settings
from airflow_txn.model.csn import PREHISTORIC_CSN

if TYPE_CHECKING:
    pass

@click.command()
@click.argument("name")
@click.option("--csn", type=int64(PREHISTORIC_CSN), help="The snapshot to name [default: the watermark].")
@click.option("--table", "tables_", multiple=True, help="Only this table (repeatable) [default: every table].")
@click.option("--note", metavar="TEXT", help="Why: kept with the tag and shown by `tags`.")
@global_options
@click.pass_obj
def tag(settings: Settings, name: str, csn: int | None, tables_: Sequence[str], note: str | None) -> int:
    """Name a snapshot NAME: readable with `read --tag NAME` (and by the DAGs) whatever vacuum's retention."""
    result = settings.open().tag(name, csn=csn, tables=list(tables_) or None, note=note)
    return settings.emit(result, render.mapping)


@click.command("tags")
@global_options
@click.pass_obj
def list_tags(settings: Settings) -> int:
    """Tags (named snapshots), the newest CSN first."""
    return settings.emit(settings.open().tags(), render.tags)


@click.command()
@click.argument("name")
@global_options
@click.pass_obj
def untag(settings: Settings, name: str) -> int:
    """Remove tag NAME; the next vacuum may delete the files only it kept."""
    return settings.emit(settings.open().untag(name), render.mapping)


COMMANDS = (tag, list_tags, untag,)
