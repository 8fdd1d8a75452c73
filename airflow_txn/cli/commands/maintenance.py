"""`recover`, `vacuum`, `compact` and `retention`: maintenance (Warehouse.maintenance), each safe to run any
time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from airflow_txn.cli import render
from airflow_txn.cli.commands.options import global_options, int64
from airflow_txn.cli.commands.settings import Settings
from airflow_txn.cli.times import duration_option
from airflow_txn.model.limits import MAX_RETENTION_SECONDS, MAX_TARGET_FILE_BYTES

if TYPE_CHECKING:
    pass

@click.command()
@global_options
@click.pass_obj
def recover(settings: Settings) -> int:
    """Roll committed records forward, roll back expired transactions, check storage (safe any time)."""
    wh = settings.open()
    with settings.progress() as bars:
        report = wh.recover(progress=bars)
    return settings.emit(report, render.generic)


@click.command()
@click.option("--retention", metavar="DURATION",
              callback=duration_option(since_allowed=True, maximum=MAX_RETENTION_SECONDS),
              help="Time travel to keep: seconds, a duration (7d, 12h, 30m, 45s; ISO 8601: P7D, PT12H) or the point "
                   "in time to keep snapshots since (2026-01-01T00:00:00Z) [default: the engine's (7 days)].")
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@global_options
@click.pass_obj
def vacuum(settings: Settings, retention: float | None, dry_run: bool) -> int:
    """Delete the files no snapshot in the retention window can see, and orphans of dead writers."""
    wh = settings.open()
    kwargs: dict[str, Any] = {} if retention is None else {"retention_seconds": retention}
    with settings.progress() as bars:
        report = wh.vacuum(dry_run=dry_run, progress=bars, **kwargs)
    return settings.emit(report, render.vacuum)


def parse_partitions(_ctx: click.Context, _param: click.Parameter,
                      values: Sequence[str]) -> list[dict[str, str | None]]:
    return [parse_partition(v) for v in values]


def parse_partition(text: str) -> dict[str, str | None]:
    """`col=value[,col=value...]`, or a JSON object for values holding commas (null: a NULL partition)."""
    if text.lstrip().startswith("{"):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"{text!r} is not a JSON object: {exc}", param_hint="--partition") from exc
        if not isinstance(loaded, dict):
            raise click.BadParameter(f"{text!r} is not a JSON object", param_hint="--partition")
        return {str(k): None if v is None else str(v) for k, v in loaded.items()}
    out: dict[str, str | None] = {}
    for item in text.split(","):
        column, sep, value = item.partition("=")
        if not sep or not column.strip():
            raise click.BadParameter(f"{text!r}: expected col=value[,col=value...] or a JSON object",
                                     param_hint="--partition")
        out[column.strip()] = value
    return out


@click.command()
@click.argument("table")
@click.option("--partition", "partitions", multiple=True, metavar="COL=VALUE[,COL=VALUE]", callback=parse_partitions,
              help="Only this partition (repeat for more; a JSON object works too) [default: all].")
@click.option("--target-file-bytes", type=click.IntRange(min=1, max=MAX_TARGET_FILE_BYTES),
              help="Size to aim for per merged part [default: the engine's].")
@click.option("--min-parts", type=int64(2), help="Merge only groups of at least this many parts.")
@global_options
@click.pass_obj
def compact(settings: Settings, table: str, partitions: list[dict[str, str | None]],
            target_file_bytes: int | None, min_parts: int | None) -> int:
    """Merge TABLE's small parts into larger ones; readers see the same rows (docs/COMPACTION.md)."""
    wh = settings.open()
    kwargs: dict[str, Any] = {"partitions": partitions or None}
    if target_file_bytes is not None:
        kwargs["target_file_bytes"] = target_file_bytes
    if min_parts is not None:
        kwargs["min_parts"] = min_parts
    with settings.progress() as bars:
        report = wh.compact(table, progress=bars, **kwargs)
    return settings.emit(report, render.compaction)


@click.command()
@click.argument("table")
@click.option("--seconds", metavar="DURATION", callback=duration_option(maximum=MAX_RETENTION_SECONDS),
              help="Keep TABLE readable at least this long back: seconds or a duration (30d; ISO 8601: P30D).")
@click.option("--versions", type=int64(1), help="Keep TABLE's last N commits readable.")
@click.option("--clear", is_flag=True, help="Drop TABLE's own policy (vacuum's --retention rules again).")
@global_options
@click.pass_obj
def retention(settings: Settings, table: str, seconds: float | None, versions: int | None, clear: bool) -> int:
    """Show TABLE's retention policy and horizon; set one part of it with --seconds / --versions."""
    if clear and (seconds is not None or versions is not None):
        raise click.UsageError("--clear cannot be combined with --seconds or --versions")
    wh = settings.open()
    if clear:
        wh.set_retention(table)
    elif seconds is not None or versions is not None:
        current = wh.retention(table)
        wh.set_retention(table, seconds=current["seconds"] if seconds is None else seconds,
                         versions=current["versions"] if versions is None else versions)
    return settings.emit(wh.retention(table), render.mapping)


COMMANDS = (recover, vacuum, compact, retention,)
