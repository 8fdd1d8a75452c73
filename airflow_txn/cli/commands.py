"""The click commands of `airflow-txn`: each opens the warehouse, calls the engine, and emits one result.

Global options (--catalog, --root, --oracle, --conn-id, --json, --quiet, --verbose) are accepted before the
command name and after it; they are collected into the `Settings` object click passes down (--version only
before it). --conn-id reads the warehouse from an Airflow connection through cli/in_airflow.py, which
imports Airflow only then. Errors are not handled here: they propagate to `airflow_txn.cli.main`, which
prints them and picks the exit code.
"""

from __future__ import annotations

import getpass
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from airflow_txn import __version__
from airflow_txn.cli import exit_codes, render
from airflow_txn.cli.times import duration_option
from airflow_txn.errors import OracleUnavailableError
from airflow_txn.model.csn import INT64_MAX, PREHISTORIC_CSN
from airflow_txn.model.limits import MAX_RETENTION_SECONDS, MAX_TARGET_FILE_BYTES
from airflow_txn.model.secrets import mask_secrets

if TYPE_CHECKING:
    from airflow_txn.cli.progress import ProgressBars
    from airflow_txn.core.config import WarehouseConfig
    from airflow_txn.core.warehouse import Warehouse
    from airflow_txn.model.results import TransactionInfo

# The engine (SQLAlchemy, pyarrow, the catalog) is imported by the commands that use it, not here: `--help`
# and a usage error answer at once (docs/CLI.md, "Startup").

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

STATES = ("active", "committing", "committed", "rolled_back")


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
        from airflow_txn.cli import in_airflow

        given = self.catalog is not None or self.root is not None or self.oracle is not None
        if self.conn_id is not None:
            if given:
                raise click.UsageError("--conn-id names the whole warehouse: leave out --catalog, --root and --oracle")
            return Where.of(in_airflow.connection_config(self.conn_id))
        if not given and self.default_conn_id is not None:
            config = in_airflow.find_connection_config(self.default_conn_id)
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


def _int64(minimum: int) -> click.IntRange:
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


_GLOBAL_OPTIONS = (
    click.option("--catalog", metavar="URL", expose_value=False, callback=_remember,
                 help="Catalog SQLAlchemy URL [env AIRFLOW_TXN_CATALOG; default sqlite under ~/.airflow_txn]."),
    click.option("--root", metavar="DIR", expose_value=False, callback=_remember,
                 help="Storage root directory [env AIRFLOW_TXN_ROOT; default ~/.airflow_txn/warehouse]."),
    click.option("--oracle", metavar="SPEC", expose_value=False, callback=_remember,
                 help="CSN oracle: 'sql' or 'zookeeper://host:port[,...]/chroot' [env AIRFLOW_TXN_ORACLE]."),
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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, "--version", message="%(prog)s %(version)s",
                      help="Print the version of airflow-txn and exit.")
@global_options
def cli() -> None:
    """Inspect and maintain an airflow_txn warehouse (exit codes and JSON shapes: docs/CLI.md)."""


# -- warehouse and tables ----------------------------------------------------------------------------------
@cli.command()
@global_options
@click.pass_obj
def init(settings: Settings) -> int:
    """Create the catalog, the storage root (and the ZooKeeper log) if needed; safe to run again."""
    from airflow_txn.cli import doctor as doctor_checks
    from airflow_txn.model.results import InitResult

    wh = settings.open()
    wh.init()
    marks = wh.watermark_info()
    if "oracle_error" in marks:
        raise OracleUnavailableError(marks["oracle_error"])
    result = InitResult(catalog=doctor_checks.safe_url(wh.config.catalog_url), root=str(wh.config.root),
                        oracle=wh.config.oracle, readable_csn=marks["readable_csn"], tables=len(wh.tables()))
    return settings.emit(result, render.mapping)


@cli.command()
@global_options
@click.pass_obj
def upgrade(settings: Settings) -> int:
    """Migrate the catalog's schema to this airflow_txn's (Alembic revisions), saying from and to; safe to run again.
    The explicit step: opening a warehouse never migrates its catalog."""
    from airflow_txn.catalog import Catalog, migrate, schema
    from airflow_txn.cli import doctor as doctor_checks

    config = settings.config()
    catalog = Catalog(config.catalog_url, connect_timeout=config.connect_timeout)
    click.get_current_context().call_on_close(catalog.dispose)
    done = catalog.upgrade()
    before = f"schema version {done.before_schema_version} ({done.before or 'made before Alembic'})"
    after = f"schema version {done.schema_version} ({done.after})"
    if done.before_schema_version is None:
        outcome = f"created at {after}"
    elif done.applied:
        outcome = f"upgraded from {before} to {after}"
    elif done.schema_version > schema.SCHEMA_VERSION or done.after not in migrate.REVISIONS:
        outcome = (f"left at {before}: newer than this airflow-txn (schema version {schema.SCHEMA_VERSION}), "
                   "which may still use it")
    else:
        outcome = f"already at {after}: nothing to do"
    result = {"catalog": doctor_checks.safe_url(catalog.url), "result": outcome,
              "from_schema_version": done.before_schema_version, "to_schema_version": done.schema_version,
              "from_revision": done.before, "to_revision": done.after, "applied": done.applied,
              "schema_version": done.schema_version, "min_client_version": done.min_client_version}
    return settings.emit(result, render.mapping)


@cli.command("adopt-root")
@global_options
@click.pass_obj
def adopt_root(settings: Settings) -> int:
    """Make the storage root this catalog's, after checking it: for a catalog re-created over its old root or
    restored from a backup older than the root (writes and vacuum refuse both until then). Refused, changing
    nothing, when a file a committed part of this catalog needs is missing from the root."""
    wh = settings.open()
    return settings.emit(wh.adopt_root(), render.adoption)


@cli.command()
@click.option("--csn", type=_int64(PREHISTORIC_CSN),
              help="List the tables of this snapshot, by the names they had there [default: the watermark].")
@global_options
@click.pass_obj
def tables(settings: Settings, csn: int | None) -> int:
    """Tables with their partitioning, last commit CSN and visible parts, rows and bytes."""
    wh = settings.open()
    at = wh.readable_csn() if csn is None else csn
    names = wh.tables() if csn is None else wh.tables(csn=csn)
    return settings.emit([wh.table_stats(name, at) for name in names], render.tables)


@cli.command()
@click.argument("table")
@click.option("--csn", type=_int64(PREHISTORIC_CSN), help="Snapshot to read [default: the watermark].")
@click.option("--tag", metavar="NAME", help="Read at this tag (a named snapshot; see `tags`) instead of a CSN.")
@click.option("--limit", type=_int64(0), default=20, show_default=True, help="Rows to print; 0 = all.")
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


@cli.command()
@click.argument("table")
@click.option("--csn", type=_int64(PREHISTORIC_CSN), help="Snapshot [default: the watermark].")
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


def _parse_type(text: str) -> object:
    """An Arrow type from its name: int64, string, float64, date32, timestamp[us], decimal128(10, 2), ..."""
    import re

    import pyarrow as pa

    found = re.fullmatch(r"\s*decimal(?:128)?\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*", text)
    if found is not None:
        return pa.decimal128(int(found.group(1)), int(found.group(2)))
    try:
        return pa.type_for_alias(text.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an Arrow type name (int64, string, float64, date32, timestamp[us], "
                                 "decimal128(P, S), ...)") from None


def _change(settings: Settings, table: str, label: str, change: Callable[[Any], None]) -> int:
    """Run one table change as a transaction of its own (committed, or rolled back on an error)."""
    wh = settings.open()
    with wh.begin(label=label) as t:
        change(t)
    return settings.emit({"table": table, "change": label, "tid": t.tid,
                          "csn": wh.transaction_info(t.tid)["commit_csn"]}, render.mapping)


_KEY = click.option("--key", metavar="KEY", help="Staging key of the change (a retry under it replaces it).")


@cli.command("add-column")
@click.argument("table")
@click.argument("column")
@click.argument("type_name", metavar="TYPE")
@click.option("--default", metavar="VALUE", help="What rows written before read (cast from text to TYPE).")
@click.option("--not-null", is_flag=True, help="NOT NULL (needs --default).")
@_KEY
@global_options
@click.pass_obj
def add_column(settings: Settings, table: str, column: str, type_name: str, default: str | None, not_null: bool,
               key: str | None) -> int:
    """Add COLUMN of TYPE to TABLE, in a transaction of its own (docs/CONCEPTS.md, "Changing tables")."""
    import pyarrow as pa

    arrow_type = _parse_type(type_name)
    value: object = None
    if default is not None:
        try:
            value = pa.scalar(default).cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise click.BadParameter(f"--default {default!r} is not a {arrow_type}: {exc}") from None
    field = pa.field(column, arrow_type, nullable=not not_null)
    return _change(settings, table, f"add-column {column} {arrow_type}",
                   lambda t: t.add_column(table, field, default=value, key=key))


@cli.command("rename-column")
@click.argument("table")
@click.argument("old")
@click.argument("new")
@_KEY
@global_options
@click.pass_obj
def rename_column(settings: Settings, table: str, old: str, new: str, key: str | None) -> int:
    """Rename column OLD of TABLE to NEW (older files are read by column id), in a transaction of its own."""
    return _change(settings, table, f"rename-column {old} {new}",
                   lambda t: t.rename_column(table, old, new, key=key))


@cli.command("drop-column")
@click.argument("table")
@click.argument("column")
@_KEY
@global_options
@click.pass_obj
def drop_column(settings: Settings, table: str, column: str, key: str | None) -> int:
    """Drop COLUMN of TABLE (its values stay in the files, unread), in a transaction of its own."""
    return _change(settings, table, f"drop-column {column}", lambda t: t.drop_column(table, column, key=key))


@cli.command("alter-column")
@click.argument("table")
@click.argument("column")
@click.argument("type_name", metavar="TYPE")
@_KEY
@global_options
@click.pass_obj
def alter_column(settings: Settings, table: str, column: str, type_name: str, key: str | None) -> int:
    """Widen COLUMN of TABLE to TYPE (int32 -> int64, float32 -> float64, ...), in a transaction of its own."""
    arrow_type = _parse_type(type_name)
    return _change(settings, table, f"alter-column {column} {arrow_type}",
                   lambda t: t.alter_column(table, column, arrow_type, key=key))


@cli.command("set-nullable")
@click.argument("table")
@click.argument("column")
@click.argument("nullable", type=click.BOOL)
@_KEY
@global_options
@click.pass_obj
def set_nullable(settings: Settings, table: str, column: str, nullable: bool, key: str | None) -> int:
    """Allow (true) or forbid (false) nulls in COLUMN of TABLE, in a transaction of its own."""
    return _change(settings, table, f"set-nullable {column} {str(nullable).lower()}",
                   lambda t: t.set_nullable(table, column, nullable, key=key))


@cli.command("drop-table")
@click.argument("table")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@_KEY
@global_options
@click.pass_obj
def drop_table(settings: Settings, table: str, yes: bool, key: str | None) -> int:
    """Drop TABLE in a transaction of its own: gone from its CSN on (older snapshots still read it)."""
    if not yes:
        click.confirm(f"Drop table {table}?", abort=True, err=True)
    return _change(settings, table, f"drop-table {table}", lambda t: t.drop_table(table, key=key))


@cli.command("rename-table")
@click.argument("table")
@click.argument("new")
@_KEY
@global_options
@click.pass_obj
def rename_table(settings: Settings, table: str, new: str, key: str | None) -> int:
    """Rename TABLE to NEW in a transaction of its own: NEW from its CSN on (older snapshots read TABLE); no file
    moves."""
    return _change(settings, table, f"rename-table {table} {new}", lambda t: t.rename_table(table, new, key=key))


@cli.command()
@click.argument("name")
@click.option("--csn", type=_int64(PREHISTORIC_CSN), help="The snapshot to name [default: the watermark].")
@click.option("--table", "tables_", multiple=True, help="Only this table (repeatable) [default: every table].")
@click.option("--note", metavar="TEXT", help="Why: kept with the tag and shown by `tags`.")
@global_options
@click.pass_obj
def tag(settings: Settings, name: str, csn: int | None, tables_: Sequence[str], note: str | None) -> int:
    """Name a snapshot NAME: readable with `read --tag NAME` (and by the DAGs) whatever vacuum's retention."""
    result = settings.open().tag(name, csn=csn, tables=list(tables_) or None, note=note)
    return settings.emit(result, render.mapping)


@cli.command("tags")
@global_options
@click.pass_obj
def list_tags(settings: Settings) -> int:
    """Tags (named snapshots), the newest CSN first."""
    return settings.emit(settings.open().tags(), render.tags)


@cli.command()
@click.argument("name")
@global_options
@click.pass_obj
def untag(settings: Settings, name: str) -> int:
    """Remove tag NAME; the next vacuum may delete the files only it kept."""
    return settings.emit(settings.open().untag(name), render.mapping)


@cli.command()
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


@cli.command()
@click.option("--csn", type=_int64(PREHISTORIC_CSN), help="The snapshot [default: the watermark].")
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


@cli.command()
@global_options
@click.pass_obj
def watermark(settings: Settings) -> int:
    """The readable CSN; the oracle's latest CSN and the lag behind it."""
    return settings.emit(settings.open().watermark_info(), render.mapping)


# -- transactions --------------------------------------------------------------------------------------------
@cli.command("list")
@click.option("--state", type=click.Choice(STATES), help="Only transactions in this state.")
@click.option("--dag-id", metavar="DAG_ID",
              help="Only transactions labelled `<DAG_ID>/<run_id>` (BeginTransactionOperator's default label).")
@click.option("--run-id", metavar="RUN_ID", help="Only transactions labelled `<dag_id>/<RUN_ID>`.")
@click.option("--limit", type=_int64(1), default=50, show_default=True)
@global_options
@click.pass_obj
def list_transactions(settings: Settings, state: str | None, dag_id: str | None, run_id: str | None,
                      limit: int) -> int:
    """Transactions, newest first."""
    from airflow_txn.catalog.txn_records import LabelFilter

    labels = None
    if dag_id is not None or run_id is not None:
        labels = LabelFilter(dags=None if dag_id is None else frozenset({dag_id}), no_dag=False, run_id=run_id)
    return settings.emit(settings.open().transactions(state=state, limit=limit, labels=labels), render.transactions)


_TID_HELP = "TID may be its first characters if no other tid begins with them (`17-3-9f0c`)."


@cli.command(epilog=_TID_HELP)
@click.argument("tid")
@global_options
@click.pass_obj
def show(settings: Settings, tid: str) -> int:
    """One transaction: state, CSNs, times, and the parts it wrote or removed, table by table."""
    wh = settings.open()
    return settings.emit(wh.transaction_info(wh.resolve_tid(tid)), render.transaction)


class NotConfirmed(click.ClickException):
    """The person asked answered no: nothing was done (exit 1)."""

    exit_code = exit_codes.ERROR


@cli.command(epilog=_TID_HELP)
@click.argument("tid")
@click.option("--reason", metavar="TEXT", help="Why: recorded with your user name as the transaction's failed_reason.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (needed when stdin is not a terminal).")
@global_options
@click.pass_obj
def rollback(settings: Settings, tid: str, reason: str | None, yes: bool) -> int:
    """Roll back an active transaction (its staged parts never become visible); asks first."""
    from airflow_txn.model.results import RollbackResult

    wh = settings.open()
    tid = wh.resolve_tid(tid)
    info = wh.transaction_info(tid)
    if info["state"] == "active" and not yes:  # a rolled-back one is left as it is, a committed one refused
        _confirm_rollback(info, settings.prog_name)
    wh.attach(tid).rollback(reason=rollback_reason(reason, settings.prog_name))
    after = wh.transaction_info(tid)
    result = RollbackResult(tid=tid, state=after["state"], reason=after["failed_reason"])
    return settings.emit(result, render.mapping)


def _confirm_rollback(info: TransactionInfo, prog_name: str) -> None:
    tid = info["tid"]
    if sys.stdin is None or not sys.stdin.isatty():
        raise click.UsageError(f"{prog_name} rollback asks before rolling back {tid}, and stdin is not a terminal: "
                               "pass --yes (-y) to roll it back without asking")
    staged = [p for p in info["parts"] if p["role"] == "created"]
    tables = ", ".join(info["tables"]) or "no table"
    question = (f"Roll back transaction {tid} (label {info['label'] or '-'}, {len(staged)} part(s) staged in "
                f"{tables})? Its writes will never become visible.")
    if not click.confirm(question, default=False, err=True):
        raise NotConfirmed(f"transaction {tid} was not rolled back (not confirmed)")


def rollback_reason(reason: str | None, prog_name: str = "airflow-txn") -> str:
    """What `rollback` records: who rolled back, with which command, and why (`--reason`)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name in the environment and none for this uid
        user = "an unknown user"
    recorded = f"rolled back by {user} with `{prog_name} rollback`"
    return f"{recorded}: {reason}" if reason else recorded


@cli.command("log")
@click.option("--limit", type=_int64(1), default=20, show_default=True)
@global_options
@click.pass_obj
def commit_log(settings: Settings, limit: int) -> int:
    """Recent commits, newest first."""
    return settings.emit(settings.open().commit_log(limit=limit), render.commit_log)


# -- maintenance ---------------------------------------------------------------------------------------------
@cli.command()
@global_options
@click.pass_obj
def recover(settings: Settings) -> int:
    """Roll committed records forward, roll back expired transactions, check storage (safe any time)."""
    wh = settings.open()
    with settings.progress() as bars:
        report = wh.recover(progress=bars)
    return settings.emit(report, render.generic)


@cli.command()
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


def _parse_partitions(_ctx: click.Context, _param: click.Parameter,
                      values: Sequence[str]) -> list[dict[str, str | None]]:
    return [_parse_partition(v) for v in values]


def _parse_partition(text: str) -> dict[str, str | None]:
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


@cli.command()
@click.argument("table")
@click.option("--partition", "partitions", multiple=True, metavar="COL=VALUE[,COL=VALUE]", callback=_parse_partitions,
              help="Only this partition (repeat for more; a JSON object works too) [default: all].")
@click.option("--target-file-bytes", type=click.IntRange(min=1, max=MAX_TARGET_FILE_BYTES),
              help="Size to aim for per merged part [default: the engine's].")
@click.option("--min-parts", type=_int64(2), help="Merge only groups of at least this many parts.")
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


@cli.command()
@click.argument("table")
@click.option("--seconds", metavar="DURATION", callback=duration_option(maximum=MAX_RETENTION_SECONDS),
              help="Keep TABLE readable at least this long back: seconds or a duration (30d; ISO 8601: P30D).")
@click.option("--versions", type=_int64(1), help="Keep TABLE's last N commits readable.")
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


@cli.command()
@click.option("--csn", type=_int64(PREHISTORIC_CSN), help="Snapshot [default: the watermark].")
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


@cli.command()
@click.option("--timeout", default="5", show_default=True, metavar="DURATION", callback=duration_option(minimum=0.1),
              help="How long to wait for the catalog and the oracle: seconds or a duration (10s; ISO 8601: PT10S).")
@global_options
@click.pass_obj
def doctor(settings: Settings, timeout: float) -> int:
    """Check catalog, oracle, storage root, disk space and recovery backlog (exit 4 if a check fails)."""
    from airflow_txn.cli import doctor as doctor_checks

    where = settings.where()
    report = doctor_checks.run(where.catalog, where.root, where.oracle, timeout, storage_options=where.storage_options)
    settings.emit(report, render.doctor)
    if report["ok"]:
        return exit_codes.OK
    failed = [c["name"] for c in report["checks"] if c["status"] == doctor_checks.FAIL]
    click.echo(f"error: doctor: {len(failed)} check(s) failed: {', '.join(failed)}", err=True)
    return exit_codes.DOCTOR_FAILED


def _formats(value: str | None) -> tuple[str, ...]:
    """--format of publish and published (InvalidArgumentError, bad usage, names a bad one)."""
    from airflow_txn.publish.settings import command_formats

    return command_formats(value)
