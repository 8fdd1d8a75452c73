"""`init`, `upgrade`, `adopt-root` and `doctor`: make a warehouse, migrate its catalog, claim its storage
root, check its health."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from airflow_txn.cli import exit_codes, render
from airflow_txn.cli.commands.options import global_options
from airflow_txn.cli.commands.settings import Settings
from airflow_txn.cli.times import duration_option
from airflow_txn.errors import OracleUnavailableError

if TYPE_CHECKING:
    pass

@click.command()
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


@click.command()
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


@click.command("adopt-root")
@global_options
@click.pass_obj
def adopt_root(settings: Settings) -> int:
    """Make the storage root this catalog's, after checking it: for a catalog re-created over its old root or
    restored from a backup older than the root (writes and vacuum refuse both until then). Refused, changing
    nothing, when a file a committed part of this catalog needs is missing from the root."""
    wh = settings.open()
    return settings.emit(wh.adopt_root(), render.adoption)


@click.command()
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


COMMANDS = (init, upgrade, adopt_root, doctor,)
