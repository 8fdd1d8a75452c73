"""The click commands of `airflow-txn`, in groups of one module each: each command opens the warehouse, calls
the engine, and emits one result.

    settings.py       Where / Settings / check_config: the warehouse of one invocation, and emitting a result
    options.py        the global options (--catalog, --root, --oracle, --conn-id, --json, -q, -v) and shared types
    lifecycle.py      init, upgrade, adopt-root, doctor
    inspection.py     tables, read, schema, watermark, log
    table_changes.py  add-column, rename-column, drop-column, alter-column, set-nullable, drop-table, rename-table
    transactions.py   list, show, rollback
    maintenance.py    recover, vacuum, compact, retention
    tags.py           tag, tags, untag
    publishing.py     publish, published, manifest

Global options are accepted before the command name and after it; they are collected into the `Settings`
object click passes down (--version only before it). Errors are not handled here: they propagate to
`airflow_txn.cli.main`, which prints them and picks the exit code. Nothing here imports cli/in_airflow.py
(`airflow txn`), which runs these commands.
"""

from __future__ import annotations

import click

from airflow_txn import __version__
from airflow_txn.cli.commands import (
    inspection,
    lifecycle,
    maintenance,
    publishing,
    table_changes,
    tags,
    transactions,
)
from airflow_txn.cli.commands.options import global_options, log_level
from airflow_txn.cli.commands.settings import Settings, Where, check_config

__all__ = ["GROUPS", "Settings", "Where", "check_config", "cli", "log_level"]

GROUPS = (lifecycle, inspection, table_changes, transactions, maintenance, tags, publishing)
"""The modules of commands; each lists its own in COMMANDS."""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, "--version", message="%(prog)s %(version)s",
                      help="Print the version of airflow-txn and exit.")
@global_options
def cli() -> None:
    """Inspect and maintain an airflow_txn warehouse (exit codes and JSON shapes: docs/CLI.md)."""


for _group in GROUPS:
    for _command in _group.COMMANDS:
        cli.add_command(_command)
