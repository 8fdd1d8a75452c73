"""The exceptions of airflow_txn: one base class, one subclass per thing a caller can act on."""

from __future__ import annotations


class TxnError(Exception):
    """Base of every airflow_txn error; catch this to handle them all."""


class SerializationError(TxnError):
    """A concurrent transaction changed what this one touched: roll back and retry the transaction."""


class MergedAwayError(SerializationError):
    """A part a statement chose was merged away meanwhile (the same rows now live in a merged part) and
    the statement does not replace the whole merged part: the statement must choose its parts again."""


class StaleAttemptError(SerializationError):
    """A newer attempt of the same task already staged in this transaction: this (zombie) attempt must stop."""


class RetryConflictError(TxnError):
    """A retried key's earlier output was rewritten by a write that has no key, so it cannot be withdrawn
    (that write could never run again): the retry is refused; roll back and run the transaction again."""


class InvalidatedKeysError(TxnError):
    """A retry withdrew work that other keys had built on its output: run those keys (tasks) again, then
    commit. The transaction stays active; `keys` names them, `by` maps each to the retried key."""

    def __init__(self, message: str, by: dict[str, str]) -> None:
        super().__init__(message)
        self.by = dict(by)
        self.keys = sorted(by)


class TransactionClosedError(TxnError):
    """The transaction was committed, rolled back or failed a statement: only rollback() is allowed."""


class TransactionNotFoundError(TxnError):
    """No transaction has that tid in this warehouse: check the tid and the warehouse you opened."""


class WarehouseNotFoundError(TxnError):
    """No warehouse exists where one was opened (no catalog there yet) and the call only reads: check the
    catalog URL and root (a typo?), or create the warehouse with `airflow-txn init` (any write creates it:
    create_table, begin, Warehouse.init)."""


class ConnectionNotFoundError(TxnError):
    """An Airflow connection the warehouse is named by is not defined where this runs (no AIRFLOW_CONN_*
    variable, secrets backend entry or metastore row): define it there. `conn_id` names it."""

    def __init__(self, message: str, conn_id: str) -> None:
        super().__init__(message)
        self.conn_id = conn_id


class MissingDependencyError(TxnError, ImportError):
    """A feature needs a package that is not installed (a catalog database's driver, Airflow's Amazon
    provider): the message names the `pip install 'airflow-txn[EXTRA]'` that brings it."""


class CatalogReadOnlyError(TxnError):
    """This process may only read the catalog (a read-only database role, a read-only file or mount) and
    the call writes: list, show and read work; writing needs a role or mount that can write."""


class CatalogVersionError(TxnError):
    """The catalog's schema and this airflow-txn package do not meet (docs/DESIGN.md, D23); the message names
    both versions and who must upgrade. `catalog_version` is the catalog's schema version (None: none
    recorded), `client_version` this package's."""

    def __init__(self, message: str, catalog_version: int | None, client_version: int) -> None:
        super().__init__(message)
        self.catalog_version = catalog_version
        self.client_version = client_version


class CatalogTooNewError(CatalogVersionError):
    """A newer airflow-txn upgraded the catalog past what this package can use (a revision older clients do not
    tolerate: `min_client_version`): upgrade the airflow-txn package of this process. The catalog is left as
    it is. `min_client_version`: the oldest client schema version the catalog accepts (None: not recorded)."""

    def __init__(self, message: str, catalog_version: int | None, client_version: int,
                 min_client_version: int | None) -> None:
        super().__init__(message, catalog_version, client_version)
        self.min_client_version = min_client_version


class CatalogUpgradeRequiredError(CatalogVersionError):
    """The catalog is older than this airflow-txn package works with, and opening never upgrades a catalog:
    run `airflow-txn upgrade` once, as a deliberate step (or `Warehouse.open(..., upgrade=True)`), or use
    the older package. Nothing was changed."""


class TableNotFoundError(TxnError):
    """The table does not exist: create it with Warehouse.create_table first. `table` names it (None when
    the raiser did not say)."""

    def __init__(self, message: str, table: str | None = None) -> None:
        super().__init__(message)
        self.table = table


class TableNotInTagError(TableNotFoundError):
    """The tag read does not hold that table (a tag names a CSN and a set of tables): read the table at a
    tag that holds it, or tag it (Warehouse.tag). `table` names it, `tag` the tag."""

    def __init__(self, message: str, table: str | None = None, tag: str | None = None) -> None:
        super().__init__(message, table=table)
        self.tag = tag


class TagNotFoundError(TxnError):
    """No tag of that name in this warehouse (never made, or untagged): `Warehouse.tags()` lists them."""


class TagExistsError(TxnError):
    """A tag of that name exists already (a tag never moves): untag it first or pick another name."""


class TableExistsError(TxnError):
    """A table with that name exists already: pass exist_ok=True or pick another name."""


class SchemaMismatchError(TxnError):
    """The data does not match the table schema: fix the columns named in the message."""


class UnsupportedTypeError(SchemaMismatchError):
    """A column type does not round-trip through every engine path (docs/TYPES.md): use the type the message names."""


class LeaseExpiredError(TxnError):
    """The transaction's lease ran out and it was (or will be) rolled back: begin a new one."""


class OracleUnavailableError(TxnError):
    """The CSN oracle could not be reached: the transaction is still active; retry or roll back."""


class CatalogUnavailableError(TxnError):
    """The catalog database could not be reached, or dropped the connection mid-operation (a restart, a
    network cut): retry once it answers again. A commit cut off this way may or may not have taken place
    (the catalog decides): Transaction.state tells once it is back, and recovery settles it either way."""


class CatalogBusyError(CatalogUnavailableError):
    """The catalog stayed locked by another writer past the busy timeout (a SQLite lock, a PostgreSQL
    lock_timeout): that catalog transaction wrote nothing and the transaction is still usable; retry."""


class SparkConnectUnavailableError(TxnError):
    """The Spark Connect server did not answer within the connect timeout (down, a wrong host or port, a
    firewall): nothing ran on it. Start it or fix the address; `connect_timeout` sets how long to wait."""


class InvalidNameError(TxnError):
    """A table, namespace, partition value, key or tid is malformed: use the form the message gives."""


class PublishError(TxnError):
    """Publishing a table to another format failed (its catalog unreachable, a type the format lacks, a table
    of that name another warehouse publishes). The commits stand: publishing catches up on its next run."""


class InvalidArgumentError(TxnError):
    """A number passed is of the wrong type or out of range (a CSN, a limit, a count, an attempt, a
    lease), an option is none of its values (InvalidOptionError), or metadata is no JSON object: pass a value
    the message gives. Nothing was done."""


class InvalidOptionError(InvalidArgumentError, InvalidNameError):
    """An option is none of its values (isolation, via, mode, a compaction's or a check's engine, manifests):
    the message names the parameter, the value given and the values allowed. Nothing was done. It is also an
    InvalidNameError, which a bad `via` or `mode` raised before (airflow_txn.model.options)."""


class SnapshotTooOldError(TxnError):
    """The requested CSN is older than the retention horizon: its files may be gone; read a newer one."""


class WaitTimeoutError(TxnError, TimeoutError):
    """The CSN did not become readable in time: check for a stuck committer, or wait longer."""


class StorageError(TxnError):
    """A part's files are missing or unreadable in the storage root: run `airflow-txn recover`."""


class RootOwnedError(StorageError):
    """The storage root belongs to another warehouse, or to an older or newer state of this one's catalog: no
    write or cleanup goes there until an operator gives this warehouse a root of its own or adopts this root
    (`airflow-txn adopt-root`, docs/DEPLOYMENT.md)."""


class CheckError(TxnError):
    """A write-audit-publish check could not be evaluated (its SQL does not run on the engine): fix the check."""


__all__ = [
    "CatalogBusyError",
    "CatalogReadOnlyError",
    "CatalogTooNewError",
    "CatalogUnavailableError",
    "CatalogUpgradeRequiredError",
    "CatalogVersionError",
    "CheckError",
    "ConnectionNotFoundError",
    "InvalidArgumentError",
    "InvalidNameError",
    "InvalidOptionError",
    "InvalidatedKeysError",
    "LeaseExpiredError",
    "MergedAwayError",
    "MissingDependencyError",
    "OracleUnavailableError",
    "PublishError",
    "RetryConflictError",
    "RootOwnedError",
    "SchemaMismatchError",
    "SerializationError",
    "SnapshotTooOldError",
    "SparkConnectUnavailableError",
    "StaleAttemptError",
    "StorageError",
    "TableExistsError",
    "TableNotFoundError",
    "TableNotInTagError",
    "TagExistsError",
    "TagNotFoundError",
    "TransactionClosedError",
    "TransactionNotFoundError",
    "TxnError",
    "UnsupportedTypeError",
    "WaitTimeoutError",
    "WarehouseNotFoundError",
]
