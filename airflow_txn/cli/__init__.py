"""The `airflow-txn` command line: inspect and maintain a warehouse (tables, transactions, recovery,
vacuum, compaction, health checks). docs/CLI.md documents every command, its JSON and the exit codes.

`main(argv) -> int` is the console-script entry point (`airflow txn`, cli/in_airflow.py, calls it too).
Results go to stdout (rich tables, or JSON with --json); progress bars and errors go to stderr, an error
as one line `error: <message>` (with --json also as `{"error": {...}}` on stdout), worded for the command
line (a missing table: run `airflow-txn tables`). The engine's log lines go to stderr too (logs.configure:
text, or JSON with AIRFLOW_TXN_LOG_FORMAT=json), warnings only unless -v/--verbose. Exit codes:
airflow_txn.cli.exit_codes.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence

import click

from airflow_txn.cli import exit_codes
from airflow_txn.cli.commands import Settings, cli, log_level
from airflow_txn.cli.render import to_json
from airflow_txn.errors import CatalogUpgradeRequiredError, TableNotFoundError, WarehouseNotFoundError
from airflow_txn.telemetry import logs

__all__ = ["cli", "exit_codes", "main"]


def main(argv: Sequence[str] | None = None, prog_name: str = "airflow-txn",
         default_conn_id: str | None = None) -> int:
    """Run one command; return its exit code (never raises for a usage or an engine error). `prog_name` is
    the command people typed (`airflow txn` there); `default_conn_id` the Airflow connection to use when
    no warehouse option is given, if Airflow defines it (`airflow txn`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    settings = Settings(default_conn_id=default_conn_id, prog_name=prog_name)
    try:
        logs.formatter()  # a bad AIRFLOW_TXN_LOG_FORMAT is refused before anything runs
    except ValueError as exc:
        return _fail(str(exc), "UsageError", exit_codes.USAGE, "--json" in args)
    try:
        with _engine_logs():
            result = cli.main(args, prog_name=prog_name, standalone_mode=False, obj=settings)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message(), err=True)
        return exit_codes.USAGE
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        as_json = settings.json_output or "--json" in args
        return _fail(exc.format_message() + hint, "UsageError", exit_codes.USAGE, as_json)
    except click.ClickException as exc:  # declining a confirmation (exit 1)
        return _fail(exc.format_message(), type(exc).__name__, exc.exit_code, settings.json_output)
    except click.Abort:
        click.echo("interrupted", err=True)
        return exit_codes.INTERRUPTED
    except exit_codes.handled() as exc:
        return _fail(_message(exc, prog_name), type(exc).__name__, exit_codes.for_error(exc), settings.json_output)
    return result if isinstance(result, int) else exit_codes.OK


def _message(exc: BaseException, prog_name: str) -> str:
    """An engine error's message, worded for the command line where the engine's speaks to Python callers."""
    if isinstance(exc, TableNotFoundError) and exc.table is not None:
        return f"table {exc.table} does not exist: run `{prog_name} tables` to list them"
    if isinstance(exc, WarehouseNotFoundError):
        return str(exc).replace("`airflow-txn init`", f"`{prog_name} init`")
    if isinstance(exc, CatalogUpgradeRequiredError):
        return str(exc).replace("`airflow-txn upgrade`", f"`{prog_name} upgrade`")
    return str(exc) or type(exc).__name__


def _fail(message: str, kind: str, code: int, as_json: bool) -> int:
    one_line = " ".join(message.split())
    click.echo(f"error: {one_line}", err=True)
    if as_json:
        click.echo(to_json({"error": {"type": kind, "message": one_line, "exit_code": code}}))
    return code


@contextlib.contextmanager
def _engine_logs() -> Iterator[None]:
    """The engine's logs on stderr (-v raises the level while the options are parsed); the logger's
    earlier handlers and level are back afterwards (main may run inside another program or a test)."""
    logger = logging.getLogger("airflow_txn")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        logs.configure(level=log_level(0))
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
