"""The embedded CSN oracle: a counter row in the catalog, bumped in the commit record's transaction."""

from __future__ import annotations

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from airflow_txn.catalog import Catalog, commit_log, counters
from airflow_txn.errors import TxnError
from airflow_txn.model.secrets import mask_secrets
from airflow_txn.oracle.base import CsnOracle, OracleKind


class SqlKind(OracleKind):
    """`sql`: no options, nothing to connect to."""

    name = "sql"
    form = "sql"
    probe_hint = "run `airflow-txn init` (or point --catalog / AIRFLOW_TXN_CATALOG at the right catalog)"

    def accepts(self, spec: str) -> bool:
        return spec == self.form

    def parse(self, spec: str) -> None:
        if spec != self.form:
            raise TxnError(f"bad oracle {mask_secrets(spec)!r}: the SQL oracle is written 'sql' and takes no options")

    def open(self, spec: str, catalog: Catalog, timeout: float | None = None) -> SqlOracle:
        self.parse(spec)
        return SqlOracle(catalog)


class SqlOracle(CsnOracle):
    """CSNs from `UPDATE txn_counters SET value = value + 1 ... RETURNING value` (a row lock on PostgreSQL,
    the database lock on SQLite), so the record that takes CSN n is visible before any with n+1."""

    name = SqlKind.name

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def next_csn(self, conn: Connection) -> int:
        return counters.next_csn(conn)

    def last_csn(self, conn: Connection) -> int:
        return counters.last_csn(conn)

    def readable_csn(self, conn: Connection) -> int:
        return commit_log.readable_csn_of_counter(conn)  # the same value as the base's, in one statement

    def probe(self) -> str:
        try:
            with self.catalog.read() as conn:
                last = self.last_csn(conn)
        except (TxnError, SQLAlchemyError) as exc:
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            raise TxnError(f"the SQL CSN counter cannot be read: {lines[0]}") from exc
        return f"{self.name}: last CSN {last}"


SQL = SqlKind()
