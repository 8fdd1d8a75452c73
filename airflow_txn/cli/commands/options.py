"""The options every command accepts (--catalog, --root, --oracle, --conn-id, --json, --quiet, --verbose:
before the command name and after it, collected into `Settings`) and the option types the commands share."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import click

from airflow_txn.cli.commands.settings import Settings
from airflow_txn.model.csn import INT64_MAX

F = TypeVar("F", bound=Callable[..., Any])

ORACLE_FORMS = ("sql", "zookeeper://host:port[,host:port]/chroot")
"""How each kind of CSN oracle is written: the `form` of every entry of the oracle registry's KINDS
(oracle/registry.py, `forms()`), in its order. Kept here because `--help` answers before the registry (which
loads SQLAlchemy and the catalog) is imported; tests/core/test_cli_structure.py checks the two agree."""

TID_HELP = "TID may be its first characters if no other tid begins with them (`17-3-9f0c`)."


def int64(minimum: int) -> click.IntRange:
    """An integer option the engine passes on to a 64-bit catalog column: bounded, so a larger one is a
    usage error (exit 2) and not an overflow deep in the driver."""
    return click.IntRange(min=minimum, max=INT64_MAX)


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None and value is not False:
        setattr(ctx.ensure_object(Settings), str(param.name), value)
    return value


def _verbose(ctx: click.Context, param: click.Parameter, value: int) -> int:
    """-v / -vv (before and after the command add up): the engine's log level, set at once."""
    if value:
        settings = ctx.ensure_object(Settings)
        settings.verbose += value
        logging.getLogger("airflow_txn").setLevel(log_level(settings.verbose))
    return value


def log_level(verbose: int) -> int:
    """The engine's log level for a -v count: warnings only, -v info, -vv debug."""
    return logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG


def oracle_help() -> str:
    """--oracle's help: every form of ORACLE_FORMS."""
    return f"CSN oracle: {' or '.join(repr(form) for form in ORACLE_FORMS)} [env AIRFLOW_TXN_ORACLE]."


_GLOBAL_OPTIONS = (
    click.option("--catalog", metavar="URL", expose_value=False, callback=_remember,
                 help="Catalog SQLAlchemy URL [env AIRFLOW_TXN_CATALOG; default sqlite under ~/.airflow_txn]."),
    click.option("--root", metavar="DIR", expose_value=False, callback=_remember,
                 help="Storage root directory [env AIRFLOW_TXN_ROOT; default ~/.airflow_txn/warehouse]."),
    click.option("--oracle", metavar="SPEC", expose_value=False, callback=_remember, help=oracle_help()),
    click.option("--conn-id", metavar="ID", expose_value=False, callback=_remember,
                 help="The warehouse of this Airflow connection (the DAGs' conn_id), instead of --catalog, "
                      "--root and --oracle; needs Airflow installed."),
    click.option("--json", "json_output", is_flag=True, expose_value=False, callback=_remember,
                 help="Print the result (or the error) as JSON on stdout."),
    click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=_remember,
                 help="No progress bars on stderr."),
    click.option("-v", "--verbose", count=True, expose_value=False, callback=_verbose,
                 help="Engine log lines (tid=... csn=...) on stderr: -v info, -vv debug [default: warnings]; "
                      "format from AIRFLOW_TXN_LOG_FORMAT (text or json)."),
)


def global_options(fn: F) -> F:
    for option in reversed(_GLOBAL_OPTIONS):
        fn = option(fn)
    return fn

