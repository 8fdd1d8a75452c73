"""`publish`, `published` and `manifest`: a snapshot for other engines (Iceberg, Delta, JSON manifests)."""

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
@click.option("--table", "tables_", multiple=True, help="Only this table (repeatable) [default: every table].")
@click.option("--republish", is_flag=True,
              help="Drop the --table's published tables and publish them again from their oldest readable commit.")
@click.option("--format", "format_", metavar="FORMATS",
              help="iceberg, delta or iceberg,delta [default: $AIRFLOW_TXN_PUBLISH, else iceberg].")
@global_options
@click.pass_obj
def publish(settings: Settings, tables_: Sequence[str], republish: bool, format_: str | None) -> int:
    """Publish every commit not published yet as Iceberg snapshots and/or Delta versions (docs/INTEROP.md), up
    to the watermark."""
    wh = settings.open(publish=",".join(_formats(format_)))
    if republish:
        if not tables_:
            raise click.UsageError("--republish rebuilds the tables named by --table: name at least one")
        done: dict[str, object] = {}
        for name in tables_:
            done[name] = wh.republish(name)["tables"]
        return settings.emit(done, render.generic)
    return settings.emit(wh.publish(tables=list(tables_) or None), render.generic)


@click.command()
@click.option("--csn", type=int64(PREHISTORIC_CSN), help="The snapshot [default: the watermark].")
@click.option("--tag", metavar="NAME", help="At this tag instead of a CSN.")
@click.option("--table", "tables_", multiple=True, help="Only this table (repeatable) [default: every table].")
@click.option("--format", "format_", metavar="FORMATS",
              help="iceberg, delta or iceberg,delta [default: $AIRFLOW_TXN_PUBLISH, else iceberg].")
@global_options
@click.pass_obj
def published(settings: Settings, csn: int | None, tag: str | None, tables_: Sequence[str],
              format_: str | None) -> int:
    """Each table's Iceberg snapshot (Delta version) holding its version at a CSN or tag: what an external job
    reads so that every table is read at the same commit (publishing is caught up first where it is behind)."""
    found = settings.open(publish=",".join(_formats(format_))).published(csn=csn, tag=tag,
                                                                         tables=list(tables_) or None)
    return settings.emit([{"table": name, **info} for name, info in found.items()], render.published)


@click.command()
@click.option("--csn", type=int64(PREHISTORIC_CSN), help="Snapshot [default: the watermark].")
@click.option("--tag", metavar="NAME", help="The snapshot of this tag (its tables by default) instead of a CSN.")
@click.option("--table", "tables_", multiple=True, help="Only this table (repeatable).")
@global_options
@click.pass_obj
def manifest(settings: Settings, csn: int | None, tag: str | None, tables_: Sequence[str]) -> int:
    """Write JSON manifests of a snapshot for other engines (docs/MANIFESTS.md)."""
    if tag is not None and csn is not None:
        raise click.UsageError("write manifests at --csn or at --tag, not both")
    result = settings.open().write_manifest(csn=csn, tables=list(tables_) or None, tag=tag)
    return settings.emit(result, render.generic)


def _formats(value: str | None) -> tuple[str, ...]:
    """--format of publish and published (InvalidArgumentError, bad usage, names a bad one)."""
    from airflow_txn.publish.settings import command_formats

    return command_formats(value)



COMMANDS = (publish, published, manifest,)
