"""The command line and Airflow: `airflow-txn --conn-id ID` opens the warehouse an Airflow connection
describes, and `airflow txn COMMAND ...` (the provider info's `cli` entry) runs the same commands from
the `airflow` command.

The CLI belongs to the core, which never needs Airflow: this module imports Airflow (and the airflow
layer's TxnHook module) inside the functions that use it, which run only for --conn-id or under
`airflow txn`; loading it loads neither (tests/architecture/test_import_graph.py allows the cli exactly these
deferred imports).

Connections are looked up as `airflow connections get` does: with the metadata database's among them
(Airflow's server context), besides AIRFLOW_CONN_* variables and the configured secrets backends.

`airflow txn` builds one argparse command per click command of `airflow_txn.cli.commands.cli`, with the
same options (argparse only collects them; click parses them again, so values, errors and exit codes
are those of airflow-txn). With none of --conn-id, --catalog, --root and --oracle it opens the warehouse
of the `[airflow_txn] conn_id` connection (default `airflow_txn_default`) when Airflow defines it, as
the DAGs and the Transactions page do, else the AIRFLOW_TXN_* environment's.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from airflow_txn import environment

if TYPE_CHECKING:
    from airflow_txn.core.config import WarehouseConfig

GROUP = "txn"
PROG_NAME = f"airflow {GROUP}"
_DEST_PREFIX = "txn_"  # argparse destinations stay clear of Airflow's own (`subcommand`, `func`)
_PROCESS_CONTEXT = environment.AIRFLOW_PROCESS_CONTEXT  # Airflow 3's choice of secrets backends (server: + metadata DB)


def connection_config(conn_id: str) -> WarehouseConfig:
    """The warehouse Airflow connection `conn_id` describes, read as the DAGs' TxnHook reads it; a usage
    error when Airflow knows no such connection or is not installed."""
    config = find_connection_config(conn_id)
    if config is None:
        raise click.UsageError(f"Airflow has no connection {conn_id!r} (--conn-id): define it in the UI, with "
                               f"`airflow connections add`, or as AIRFLOW_CONN_{conn_id.upper()}")
    return config


def find_connection_config(conn_id: str) -> WarehouseConfig | None:
    """connection_config, None when Airflow knows no such connection. What Airflow logs meanwhile goes to
    stderr: its structlog loggers write to sys.stdout, which holds the command's result alone."""
    logs_to_stderr()
    with contextlib.redirect_stdout(sys.stderr), _server_context():
        try:
            from airflow_txn.airflow.hooks.txn import connection_config as airflow_connection_config
        except ImportError as exc:
            raise click.UsageError(f"--conn-id reads an Airflow connection, but Airflow cannot be imported ({exc}): "
                                   "pip install 'airflow-txn[airflow]', or give --catalog / --root / --oracle"
                                   ) from exc
        return airflow_connection_config(conn_id)


@contextlib.contextmanager
def _server_context() -> Iterator[None]:
    """Look connections up as `airflow connections get` does: in Airflow's server context, whose secrets
    backends include the metadata database (a process that is none of Airflow's components sees only the
    AIRFLOW_CONN_* variables and the configured external backends). A context already set is kept."""
    if environment.is_set(_PROCESS_CONTEXT):
        yield
        return
    os.environ[_PROCESS_CONTEXT] = "server"
    try:
        yield
    finally:
        os.environ.pop(_PROCESS_CONTEXT, None)


def default_conn_id() -> str:
    """`[airflow_txn] conn_id` of Airflow's configuration, else `airflow_txn_default`."""
    from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, config_option

    return config_option("conn_id") or DEFAULT_CONN_ID


# -- `airflow txn ...` -------------------------------------------------------------------------------------
def get_cli_commands() -> list[Any]:
    """The provider info's `cli` function: one `airflow txn` group holding every airflow-txn command."""
    from airflow.cli.cli_config import GroupCommand

    from airflow_txn.cli.commands import cli

    subcommands = [_action(name, command) for name, command in sorted(cli.commands.items())]
    return [GroupCommand(name=GROUP, help="Inspect and maintain the airflow_txn warehouse (airflow-txn's commands)",
                         subcommands=subcommands,
                         description=_text("The commands of airflow-txn (docs/CLI.md), on the warehouse of the "
                                           "[airflow_txn] conn_id connection (default airflow_txn_default) unless "
                                           "--conn-id, --catalog, --root or --oracle says otherwise."))]


def _arg(flags: tuple[str, ...], **kwargs: Any) -> Any:
    from airflow.cli.cli_config import Arg

    return Arg(flags, **kwargs)  # type: ignore[no-untyped-call]


def _action(name: str, command: click.Command) -> Any:
    from airflow.cli.cli_config import ActionCommand

    args = []
    for param in command.params:
        dest = _DEST_PREFIX + str(param.name)
        if isinstance(param, click.Argument):
            args.append(_arg((dest,), metavar=param.human_readable_name, help=_help(command.epilog or "")))
            continue
        if not isinstance(param, click.Option):
            continue
        flags = tuple(sorted(param.opts, key=len))  # short first: Airflow sorts options by the second flag
        if param.count:
            args.append(_arg(flags, help=_option_help(param), action="count", dest=dest))
        elif param.is_flag:
            args.append(_arg(flags, help=_option_help(param), action="store_true", dest=dest))
        else:
            choices = param.type.choices if isinstance(param.type, click.Choice) else None
            metavar = f"{{{','.join(map(str, choices))}}}" if choices else param.metavar or str(param.name).upper()
            args.append(_arg(flags, help=_option_help(param), metavar=metavar, dest=dest,
                            action="append" if param.multiple else "store"))
    return ActionCommand(name=name, help=_help(command.get_short_help_str(limit=100)), func=_runner(name, command),
                         args=tuple(args), description=_text(command.help), epilog=_text(command.epilog))


def _text(text: str | None) -> str:
    """A description as Airflow's parser prints it (rich_argparse reads [markup])."""
    return escape(text or "")


def _help(text: str | None) -> str:
    """An argument's help as Airflow's parser prints it (argparse also formats it with %)."""
    return _text(text).replace("%", "%%")


def _option_help(param: click.Option) -> str:
    shown = param.help or ""
    if param.show_default and param.default is not None:
        shown += f" [default: {param.default}]"
    return _help(shown.strip())


def _runner(name: str, command: click.Command) -> Callable[[argparse.Namespace], None]:
    def run(namespace: argparse.Namespace) -> None:
        from airflow_txn.cli import main

        logs_to_stderr()
        sys.exit(main([name, *to_click_args(command, vars(namespace))], prog_name=PROG_NAME,
                      default_conn_id=default_conn_id()))

    return run


def logs_to_stderr() -> None:
    """Point the root logger's handlers that write to stdout (Airflow's console logging: e.g. Alembic's
    lines when the catalog is migrated, the secrets masker's warnings) at stderr, so stdout holds the
    result alone, as Airflow's own commands with `-o json` do."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


def to_click_args(command: click.Command, values: dict[str, Any]) -> list[str]:
    """The airflow-txn arguments of `command` for what argparse collected (`values`, by destination)."""
    options: list[str] = []
    positional: list[str] = []
    for param in command.params:
        value = values.get(_DEST_PREFIX + str(param.name))
        if value is None or value is False:
            continue
        if isinstance(param, click.Argument):
            positional.append(str(value))
            continue
        flag = max(param.opts, key=len)
        if isinstance(param, click.Option) and param.count:
            options += [flag] * int(value)
        elif isinstance(param, click.Option) and param.is_flag:
            options.append(flag)
        else:
            for item in value if isinstance(value, list) else [value]:
                options += [flag, str(item)]
    return [*options, "--", *positional] if positional else options
