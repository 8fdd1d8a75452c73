"""What every command of `airflow-txn` shares: where the warehouse is (`Where`), the global options of one
invocation (`Settings`: open the warehouse, emit the result) and the check of a configuration before
anything is opened (`check_config`).

--conn-id reads the warehouse from an Airflow connection through cli/airflow_connections.py, which imports
Airflow only then. Errors are not handled here: they propagate to `airflow_txn.cli.main`, which prints them
and picks the exit code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import click

from airflow_txn.cli import exit_codes, render
from airflow_txn.model.secrets import mask_secrets

if TYPE_CHECKING:
    from airflow_txn.cli.progress import ProgressBars
    from airflow_txn.core.config import WarehouseConfig
    from airflow_txn.core.warehouse import Warehouse

# The engine (SQLAlchemy, pyarrow, the catalog) is imported by the commands that use it, not here: `--help`
# and a usage error answer at once (docs/CLI.md, "Startup").

T = TypeVar("T")


@dataclass(frozen=True)
class Where:
    """Where the warehouse is: the options given (None: the AIRFLOW_TXN_* variable, else the default), or
    what an Airflow connection says (then with its storage options)."""

    catalog: str | None = None
    root: str | None = None
    oracle: str | None = None
    storage_options: Mapping[str, str] | None = None

    @classmethod
    def of(cls, config: WarehouseConfig) -> Where:
        return cls(config.catalog_url, config.root, config.oracle, dict(config.storage_options))


@dataclass
class Settings:
    """The global options of one invocation (None: the AIRFLOW_TXN_* variable, else the default)."""

    catalog: str | None = None
    root: str | None = None
    oracle: str | None = None
    conn_id: str | None = None
    json_output: bool = False
    quiet: bool = False
    verbose: int = 0
    default_conn_id: str | None = None
    """`airflow txn`: the connection used when no warehouse option is given, if Airflow defines it."""
    prog_name: str = "airflow-txn"

    def where(self) -> Where:
        """The warehouse of this invocation: --conn-id's connection, else the options (and the environment)."""
        from airflow_txn.cli import airflow_connections

        given = self.catalog is not None or self.root is not None or self.oracle is not None
        if self.conn_id is not None:
            if given:
                raise click.UsageError("--conn-id names the whole warehouse: leave out --catalog, --root and --oracle")
            return Where.of(airflow_connections.connection_config(self.conn_id))
        if not given and self.default_conn_id is not None:
            config = airflow_connections.find_connection_config(self.default_conn_id)
            if config is not None:
                return Where.of(config)
        return Where(self.catalog, self.root, self.oracle)

    def config(self) -> WarehouseConfig:
        """The warehouse's resolved configuration; a malformed one is bad usage (check_config)."""
        return check_config(self.where())

    def open(self, publish: str | None = None) -> Warehouse:
        """Open the warehouse (nothing is created: `init` creates it; a command that reads a warehouse that
        does not exist fails with WarehouseNotFoundError, exit 3); closed when the command ends. A malformed
        catalog URL, root or oracle spec is bad usage (exit 2), found before anything is opened."""
        from airflow_txn.core.warehouse import Warehouse

        where = self.where()
        check_config(where)
        wh = Warehouse.open(catalog=where.catalog, root=where.root, oracle=where.oracle,
                            storage_options=where.storage_options, publish=publish)
        click.get_current_context().call_on_close(wh.close)
        return wh

    def emit(self, value: T, renderer: render.Renderer[T]) -> int:
        """Print the result: JSON on stdout with --json, else the renderer's tables."""
        if self.json_output:
            click.echo(render.to_json(value))
        else:
            renderer(render.stdout_console(), value)
        return exit_codes.OK

    def progress(self) -> ProgressBars:
        from airflow_txn.cli.progress import ProgressBars

        return ProgressBars(render.stderr_console(), enabled=not self.quiet)


def check_config(where: Where) -> WarehouseConfig:
    """The configuration `where` names (the options, else the AIRFLOW_TXN_* variables, else the defaults), checked
    as far as it can be without opening anything: a catalog URL SQLAlchemy cannot parse or whose dialect it does
    not know, a storage root or an oracle spec of no known form, malformed storage options. Each is bad usage
    (click.UsageError: exit 2, the message naming the value), not an engine error."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    from airflow_txn.core.config import WarehouseConfig
    from airflow_txn.errors import TxnError
    from airflow_txn.oracle.registry import kind_of

    try:
        config = WarehouseConfig.resolve(where.catalog, where.root, where.oracle, storage_options=where.storage_options)
        kind_of(config.oracle).parse(config.oracle)
    except TxnError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        make_url(config.catalog_url).get_dialect()
    except NoSuchModuleError as exc:  # an ArgumentError: first
        raise click.UsageError(f"catalog {_shown(config.catalog_url)}: SQLAlchemy knows no such database or driver "
                               "(sqlite, postgresql+psycopg, ...)") from exc
    except (ArgumentError, ValueError) as exc:
        raise click.UsageError(f"catalog {_shown(config.catalog_url)} is not a SQLAlchemy URL "
                               f"({mask_secrets(str(exc))}); e.g. sqlite:////path/catalog.db or "
                               "postgresql+psycopg://user@host/db") from exc
    return config


def _shown(url: str) -> str:
    """A catalog URL for a message: its secrets masked (model/secrets.py); one SQLAlchemy cannot parse shows its
    scheme only (no password could be told apart in it)."""
    from sqlalchemy.engine import make_url

    try:
        return repr(mask_secrets(make_url(url).render_as_string(hide_password=True)))
    except Exception:
        return repr(url.split("://", 1)[0] + "://...")
