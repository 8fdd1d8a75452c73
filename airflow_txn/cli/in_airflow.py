"""`airflow txn COMMAND ...` (the provider info's `cli` entry): the airflow-txn commands run from the
`airflow` command.

`airflow txn` builds one argparse command per click command of `airflow_txn.cli.commands.cli`, with the
same options (argparse only collects them; click parses them again, so values, errors and exit codes
are those of airflow-txn). With none of --conn-id, --catalog, --root and --oracle it opens the warehouse
of the `[airflow_txn] conn_id` connection (default `airflow_txn_default`) when Airflow defines it, as
the DAGs and the Transactions page do, else the AIRFLOW_TXN_* environment's.

This module runs the commands and nothing imports it back: the commands find an Airflow connection
(--conn-id) through cli/airflow_connections.py. Airflow's CLI classes are imported inside the functions
that build the group (tests/architecture/test_import_graph.py allows the cli exactly these deferred imports).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.markup import escape

from airflow_txn.cli import main
from airflow_txn.cli.airflow_connections import default_conn_id, logs_to_stderr
from airflow_txn.cli.commands import cli

GROUP = "txn"
PROG_NAME = f"airflow {GROUP}"
_DEST_PREFIX = "txn_"  # argparse destinations stay clear of Airflow's own (`subcommand`, `func`)


def get_cli_commands() -> list[Any]:
    """The provider info's `cli` function: one `airflow txn` group holding every airflow-txn command."""
    from airflow.cli.cli_config import GroupCommand

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
        logs_to_stderr()
        sys.exit(main([name, *to_click_args(command, vars(namespace))], prog_name=PROG_NAME,
                      default_conn_id=default_conn_id()))

    return run


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
