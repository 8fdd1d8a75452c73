"""`--conn-id`: the warehouse an Airflow connection describes, looked up as the DAGs' TxnHook looks it up.

The CLI belongs to the core, which never needs Airflow: Airflow (and the airflow layer's TxnHook module) is
imported inside the functions that use it, which run only for --conn-id or under `airflow txn`; loading this
module loads neither (tests/architecture/test_import_graph.py allows the cli exactly these deferred imports).

Connections are looked up as `airflow connections get` does: with the metadata database's among them
(Airflow's server context), besides AIRFLOW_CONN_* variables and the configured secrets backends.

The commands (cli/commands/) use this module, and so does cli/in_airflow.py (`airflow txn`), which runs the
commands: the dependency goes one way, in_airflow -> commands -> airflow_connections.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from airflow_txn import environment

if TYPE_CHECKING:
    from airflow_txn.core.config import WarehouseConfig

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


def logs_to_stderr() -> None:
    """Point the root logger's handlers that write to stdout (Airflow's console logging: e.g. Alembic's
    lines when the catalog is migrated, the secrets masker's warnings) at stderr, so stdout holds the
    result alone, as Airflow's own commands with `-o json` do."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)
