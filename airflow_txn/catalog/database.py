"""The catalog database: engine set-up (SQLite WAL or PostgreSQL), read/write transactions, and when the
schema must be created or upgraded (the migrations themselves: catalog/migrate.py, with Alembic).

Writers on SQLite take the database lock up front (`BEGIN IMMEDIATE`) so two processes never
deadlock upgrading a read lock. The pysqlite driver runs in its autocommit mode and `write()`/`read()`
emit the BEGIN themselves as the transaction's first statement (the pysqlite recipe does it from a
`begin` event listener; any connection-event listener makes SQLAlchemy dispatch events around every
statement, ~6% of a small commit: docs/BENCHMARKS.md, B1). On PostgreSQL writers run at READ
COMMITTED and lock the rows they change (`FOR UPDATE`), which the row modules add only where the
dialect supports it (`supports_for_update`: SQLite's BEGIN IMMEDIATE already serializes).

A Catalog object creates nothing: connecting to a SQLite file that is not there would create it, so
`exists()` looks before anything connects, and `read()`/`write()` refuse a catalog that does not exist
(WarehouseNotFoundError) until `initialize()` or `upgrade()` creates it (docs/DESIGN.md, D17). Only `upgrade()`
migrates an existing catalog; opening one never does (`check_versions`, docs/DESIGN.md, D23). A SQLite
catalog this process may not write (a read-only file, directory or mount) is opened read-only, one
connection per use: through the writer's `-wal` and `-shm` files while a writer has them, else as an
immutable file (a WAL-mode database cannot be opened read-only otherwise).

A PostgreSQL catalog that does not answer fails within about `connect_timeout` seconds (the configuration's,
core/config.py, default 20) with CatalogUnavailableError naming its URL without the password: libpq's
`connect_timeout` bounds each connection attempt (half of it: a second attempt fits), the attempts stop at
that bound, and `tcp_user_timeout` with TCP keepalives bound a server that stops answering mid-call. The
catalog URL's own `?connect_timeout=` (and the other libpq options) win.
"""

from __future__ import annotations

import logging
import math
import os
import random
import select
import sqlite3
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import DBAPIError, InvalidatePoolError, OperationalError, ProgrammingError
from sqlalchemy.pool import NullPool, QueuePool
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import SelectBase

from airflow_txn.catalog import meta_records, migrate, schema, table_versions
from airflow_txn.errors import (
    CatalogBusyError,
    CatalogReadOnlyError,
    CatalogUnavailableError,
    InvalidArgumentError,
    MissingDependencyError,
    WarehouseNotFoundError,
)
from airflow_txn.model.secrets import mask_secrets
from airflow_txn.model.timeouts import connect_timeout_seconds

_SQLITE_BUSY_SECONDS = 60.0
"""How long a SQLite writer waits for the database lock unless the URL says (`?timeout=SECONDS`)."""
_SQLITE_POOL = 4  # idle connections kept per engine; more threads open more (closed when returned)
_PG_INIT_LOCK = 7_311_004_221  # advisory lock id held while creating the schema
_RETRYABLE_SQLSTATES = {"40P01": "deadlock", "40001": "serialization failure"}
WRITE_RETRIES = 8
"""How often `write_retrying` runs a catalog transaction that PostgreSQL chose as a deadlock victim."""

T = TypeVar("T")
_log = logging.getLogger(__name__)


def retryable_reason(exc: BaseException) -> str | None:
    """'deadlock' / 'serialization failure' when the database aborted the transaction only to break a
    cycle of waits (PostgreSQL SQLSTATE 40P01 / 40001): running it again is the documented remedy."""
    if not isinstance(exc, DBAPIError) or exc.connection_invalidated:
        return None
    return _RETRYABLE_SQLSTATES.get(str(getattr(exc.orig, "sqlstate", "") or ""))


def busy_reason(exc: BaseException) -> str | None:
    """'sqlite' / 'postgresql' when the statement gave up waiting for a lock another writer held: SQLite's
    `database is locked` past the busy timeout, PostgreSQL's lock_not_available (SQLSTATE 55P03, after a
    configured lock_timeout). The database rolled that statement's transaction back: nothing was written."""
    if not isinstance(exc, DBAPIError) or exc.connection_invalidated:
        return None
    if str(getattr(exc.orig, "sqlstate", "") or "") == "55P03":
        return "postgresql"
    message = str(exc.orig)
    if type(exc.orig).__module__.startswith("sqlite3") and ("database is locked" in message or "is busy" in message):
        return "sqlite"
    return None


def sqlite_busy_seconds(url: str) -> float:
    """How long a SQLite writer waits for the database lock: the URL's `?timeout=SECONDS`, else 60."""
    given = make_url(url).query.get("timeout")
    if given is None:
        return _SQLITE_BUSY_SECONDS
    try:
        seconds = float(given) if isinstance(given, str) else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise InvalidArgumentError(f"the SQLite catalog URL's timeout must be a number of seconds >= 0, got {given!r}")
    return seconds


class State(Enum):
    """What `Catalog.probe` found."""

    ABSENT = "absent"
    """No airflow_txn catalog there (no SQLite file, or no txn_meta table): nothing to read yet."""
    CURRENT = "current"
    """At a schema this package uses (its own, or a pre-Alembic or older-index one `upgrade` would only stamp
    or reindex): ready."""
    NEWER = "newer"
    """Upgraded by a newer airflow_txn with revisions clients of this schema version tolerate (its
    min_client_version): ready, left as it is (docs/DESIGN.md, D23)."""
    OLDER = "older"
    """Older than this package works with (schema.MIN_CATALOG_VERSION): `upgrade` must run first; opening
    never runs it (CatalogUpgradeRequiredError)."""


def read_only_reason(exc: BaseException) -> str | None:
    """What refused a write of this process, when the database did: SQLite's `attempt to write a readonly
    database`, PostgreSQL's insufficient_privilege (SQLSTATE 42501) or read_only_sql_transaction (25006)."""
    if not isinstance(exc, DBAPIError) or exc.connection_invalidated:
        return None
    if str(getattr(exc.orig, "sqlstate", "") or "") in ("42501", "25006"):
        return "the database role may not write"
    if type(exc.orig).__module__.startswith("sqlite3") and "readonly database" in str(exc.orig):
        return "the SQLite file, its directory or its mount is read-only for this process"
    return None


DRIVER_EXTRAS = {"psycopg": "postgres", "psycopg_binary": "postgres"}
"""The extra of airflow-txn that installs a catalog driver module (the `airflow` extra brings psycopg too)."""


def missing_driver_message(url: str, exc: ImportError) -> str:
    """What to install when the catalog URL's driver module is missing."""
    module = (exc.name or str(exc)).split(".")[0]
    extra = DRIVER_EXTRAS.get(module)
    install = (f"pip install 'airflow-txn[{extra}]' (the `airflow` extra brings it too)" if extra is not None
               else f"install the Python module {module!r} (SQLAlchemy's driver for this URL)")
    return f"the catalog {safe_url(url)} needs the database driver {module!r}, which is not installed: {install}"


def safe_url(url: str) -> str:
    """The catalog URL for a message: every secret it carries masked (model/secrets.py: the userinfo password,
    `?password=`, `sslpassword`, a token, ...); one SQLAlchemy cannot parse is masked as written."""
    try:
        rendered = make_url(url).render_as_string(hide_password=True)
    except Exception:  # a URL whose parts do not parse: masked as written
        rendered = url
    return mask_secrets(rendered)


def _said(exc: DBAPIError) -> str:
    """What the driver said, for a message: a driver may repeat its connection string (masked)."""
    return mask_secrets(str(exc.orig).strip())


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite catalog URL (None: in memory). With `uri=true` in its query (SQLAlchemy's form for
    SQLite's URI filenames: `sqlite:///file:PATH?mode=ro&uri=true`) the database is a URI, and the file is its
    path: never a directory named `file:` where the process runs."""
    parsed = make_url(url)
    database = parsed.database
    if database and str(parsed.query.get("uri", "")).strip().lower() in _TRUE and database.startswith("file:"):
        if parsed.query.get("mode") == "memory":
            return None
        database = urllib.parse.unquote(urllib.parse.urlsplit(database).path)
    return None if not database or database == ":memory:" else Path(database).expanduser()


_TRUE = ("true", "yes", "on", "y", "t", "1")  # what SQLAlchemy's pysqlite dialect takes for uri=true


def _writable(path: Path) -> bool:
    """Whether this process may write the SQLite file `path` and create its -wal and -shm beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _read_only_connect(path: Path, timeout: float) -> Callable[[], sqlite3.Connection]:
    """Connections to a SQLite file this process may not write: read-only through the writer's -wal and -shm
    while a writer has them, else immutable (nobody is writing: the whole database is in the file)."""

    def connect() -> sqlite3.Connection:
        writer = Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
        uri = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro" + ("" if writer else "&immutable=1")
        return sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)

    return connect


def _sqlite_engine(url: str) -> Engine:
    file = _sqlite_file(url)
    if file is not None and file.exists() and not _writable(file):  # a read-only consumer: decide per connection
        engine = create_engine(url, poolclass=NullPool,
                               creator=_read_only_connect(file, sqlite_busy_seconds(url)))
    else:
        # A small pool: opening a SQLite connection (and its PRAGMAs) cost more than a whole catalog
        # transaction (docs/BENCHMARKS.md, B1). Connections go back to it outside any transaction.
        engine = create_engine(url, poolclass=QueuePool, pool_size=_SQLITE_POOL, max_overflow=-1,
                               connect_args={"timeout": sqlite_busy_seconds(url), "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (pysqlite recipe)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")  # the busy timeout: sqlite3.connect(timeout=) above
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


_LIBPQ_DRIVERS = ("psycopg", "psycopg2")


def libpq_timeouts(url: str, connect_timeout: float) -> dict[str, int]:
    """libpq options bounding a PostgreSQL catalog that does not answer (module docstring); none the URL
    sets itself, and none for a driver that is not libpq's."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql" or parsed.get_driver_name() not in _LIBPQ_DRIVERS:
        return {}
    seconds = max(2, math.ceil(connect_timeout / 2))  # libpq takes whole seconds, at least 2
    options = {"connect_timeout": seconds, "keepalives": 1, "keepalives_idle": seconds, "keepalives_interval": 2,
               "keepalives_count": 3, "tcp_user_timeout": seconds * 1000}
    return {k: v for k, v in options.items() if k not in parsed.query}


PING_AFTER_IDLE_S = 0.5
"""A pooled connection idle longer than this is pinged before reuse; one checked in more recently is reused as it
is unless its socket has something to read (the window connection pools such as HikariCP keep by default)."""
_IDLE_SINCE = "airflow_txn.idle_since"


def _has_input(dbapi_connection: Any) -> bool:
    """Whether the idle connection's socket can be read without blocking: the server closed it (a restart, a
    terminated backend: end of file) or sent something unasked. A poll of the socket, no round trip; True when the
    driver does not say which socket is its own (the caller then pings)."""
    try:
        poller = select.poll()
        poller.register(dbapi_connection.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    except (AttributeError, OSError, ValueError):  # no poll() on this platform, no fileno(), a closed connection
        return True
    return bool(poller.poll(0))


def _ping_when_idle(engine: Engine) -> None:
    """At checkout, ping a pooled connection that has been idle past PING_AFTER_IDLE_S or whose socket has input
    (module docstring). A ping that finds the connection gone raises InvalidatePoolError, the pool's documented way
    to replace it (and every connection older than it) before the checkout returns; any other failure is raised."""
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)  # none on a fresh connection (the pool clears info when it reconnects)
        if since is None or (time.monotonic() - since <= PING_AFTER_IDLE_S and not _has_input(dbapi_connection)):
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            if dialect.is_disconnect(exc, dbapi_connection, None):
                raise InvalidatePoolError(f"the pooled catalog connection is gone: {mask_secrets(str(exc))}") from exc
            raise


def _generic_engine(url: str, connect_timeout: float) -> Engine:
    engine = create_engine(url, pool_size=5, max_overflow=5, connect_args=libpq_timeouts(url, connect_timeout))
    _ping_when_idle(engine)
    return engine


class DriverStatement(NamedTuple):
    """A statement compiled once for a dialect, to run on the DBAPI cursor itself (`driver_rows`)."""

    sql: str
    columns: list[str]
    """The names of its result's columns (a cursor's description builds them anew at each execution)."""
    order: tuple[str, ...] | None
    """The parameters' names in their order for a positional paramstyle (SQLite's `?`); None: named."""
    constants: dict[str, Any]
    """The values the statement binds itself (its literals), by name."""


def driver_statement(statement: SelectBase, dialect: Dialect) -> DriverStatement:
    """`statement` compiled for `dialect` to run by `driver_rows`: only for a statement whose parameters need no
    conversion on the way in (integers and strings on both drivers) and no expanding (IN-list) parameters, which
    SQLAlchemy renders anew at each execution (ValueError)."""
    compiled = statement.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    if compiled.literal_execute_params or compiled.post_compile_params:
        raise ValueError("a statement with expanding or literal-execute parameters is rendered per execution")
    order = tuple(compiled.positiontup or ()) if compiled.positional else None
    return DriverStatement(str(compiled), list(statement.selected_columns.keys()), order, dict(compiled.params))


def driver_rows(conn: Connection, statement: DriverStatement,
                params: dict[str, Any]) -> tuple[list[str], Sequence[Any]]:
    """(column names, rows) of `statement` run on `conn`'s own DBAPI connection, in its transaction: what
    `conn.execute` would give without SQLAlchemy's execution context and result, about a fifth of a visible-part
    lookup on PostgreSQL (docs/DESIGN.md, D34). Values come as the driver returns them. A driver error goes through
    the Connection's own handler, as in `conn.execute`: raised as SQLAlchemy's DBAPIError (and subclasses), a lost
    connection invalidated with every pooled one older than it, so `Catalog.read()` maps it to
    CatalogUnavailableError and the next checkout connects anew (tests/catalog/test_pool_liveness.py holds it)."""
    values = {**statement.constants, **params}
    dbapi_connection = conn.connection.dbapi_connection
    assert dbapi_connection is not None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(statement.sql, values if statement.order is None else tuple(values[n] for n in statement.order))
        rows = cursor.fetchall()
    except conn.dialect.loaded_dbapi.Error as exc:
        conn._handle_dbapi_exception(exc, statement.sql, values, cursor, None)  # raises
    cursor.close()
    return statement.columns, rows


class Catalog:
    """One catalog database; `write()` and `read()` hand out connections inside a transaction.

    `where` names the warehouse in the error a missing catalog raises (default: the catalog's URL);
    `connect_timeout` bounds waiting for a catalog server that does not answer (None: the configuration's,
    model/timeouts.connect_timeout_seconds)."""

    def __init__(self, url: str, where: str | None = None, connect_timeout: float | None = None) -> None:
        if connect_timeout is None:
            connect_timeout = connect_timeout_seconds()
        self.url = url
        self.where = where or f"catalog {self._safe_url()}"
        self.connect_timeout = connect_timeout
        self.dialect = make_url(url).get_backend_name()
        try:
            self.engine = _sqlite_engine(url) if self.dialect == "sqlite" else _generic_engine(url, connect_timeout)
        except ImportError as exc:  # the URL's driver (SQLAlchemy imports it when the engine is made)
            raise MissingDependencyError(missing_driver_message(url, exc)) from exc
        self.supports_for_update = self.dialect != "sqlite"
        self._exists = False
        """Seen to exist (a catalog is never removed under a running process, so this is never unset)."""
        self._versions: migrate.Versions | None = None
        """What the last probe read."""
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _dispose_in_child(ref))

    def missing_message(self) -> str:
        return (f"no warehouse at {self.where}; run `airflow-txn init` to create it (or check the catalog URL "
                "and root: a typo?)")

    def _require(self) -> None:
        """WarehouseNotFoundError unless the catalog exists (looked up until it is seen once)."""
        if not self._exists and self.probe() is State.ABSENT:
            raise WarehouseNotFoundError(self.missing_message())

    def exists(self) -> bool:
        """Whether an airflow_txn catalog is there (creates nothing, not even a SQLite file)."""
        return self._exists or self.probe() is not State.ABSENT

    def probe(self) -> State:
        """What is there, read in a read transaction (a current catalog never queues behind a writer); a
        newer catalog this package may not use is refused (CatalogTooNewError). Nothing is created or changed."""
        file = _sqlite_file(self.url) if self.dialect == "sqlite" else None
        if file is not None and (not file.exists() or file.stat().st_size == 0):
            return State.ABSENT  # connecting would create the file
        try:
            with self._read_unchecked() as conn:
                versions = migrate.read_versions(conn)
        except (OperationalError, ProgrammingError):  # no txn_meta or txn_alembic_version (pre-Alembic)
            with self._read_unchecked() as conn:
                present = migrate.catalog_tables(conn)
                if schema.meta.name not in present:
                    return State.ABSENT
                versions = migrate.read_versions(conn, present)
        versions.refuse_newer(self.where)
        self._exists = True
        self._versions = versions
        table_versions.note(self.engine, versions.schema_version)
        return State.OLDER if versions.older else State.NEWER if versions.newer else State.CURRENT

    def at_least(self, schema_version: int) -> bool:
        """Whether the catalog holds what schema version `schema_version` brought, as this process last found it
        (opening probes it; a catalog this process created or upgraded, or never probed, is at this package's)."""
        found = self._versions.schema_version if self._versions is not None else None
        return found is None or found >= schema_version

    def check_versions(self, upgrade: bool = False) -> State:
        """`probe`, and refuse a catalog this package may not use (docs/DESIGN.md, D23): a newer one that does not
        tolerate it (CatalogTooNewError), an older one (CatalogUpgradeRequiredError). With `upgrade`, the explicit
        writer-side request, a catalog not at this package's head is upgraded instead (`upgrade`). A missing
        catalog is ABSENT (the first write creates it)."""
        state = self.probe()
        if state is State.ABSENT or state is State.NEWER:
            return state
        assert self._versions is not None
        if upgrade and not self._versions.current:  # also a stamp or an index this package's head adds
            self.upgrade()
            return State.CURRENT
        self._versions.refuse_older(self.where)
        return state

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A read-write transaction: committed on clean exit, rolled back on exception.
        WarehouseNotFoundError when the catalog does not exist (initialize creates it)."""
        if not self._exists:
            self._require()
        with self._retrying_connect(write=True) as conn, conn.begin():
            if self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # the database lock now, not at the first write
            yield conn

    def write_retrying(self, body: Callable[[Connection], T], what: str) -> T:
        """`body(conn)` in a write transaction, run again (after a short random pause) when PostgreSQL
        aborted it as a deadlock victim. Two catalog transactions that lock the same part rows in
        different orders (a statement's removal locks, a commit's or a rollback's stamps) can form a
        cycle; the database breaks it by aborting one, whose work is then simply redone. `body` must
        have no effect outside the catalog transaction that a second run would repeat wrongly."""
        for attempt in range(1, WRITE_RETRIES + 1):
            try:
                with self.write() as conn:
                    return body(conn)
            except DBAPIError as exc:
                reason = retryable_reason(exc)
                if reason is None:
                    raise
                if attempt == WRITE_RETRIES:
                    raise CatalogUnavailableError(
                        f"{what}: the catalog aborted it as a {reason} victim {WRITE_RETRIES} times in a row; "
                        "nothing of it was written, run it again") from exc
                _log.info("%s: %s in the catalog, running it again (attempt %d)", what, reason, attempt + 1)
                time.sleep(random.uniform(0.0, 0.02 * attempt))
        raise AssertionError("unreachable")

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction (one consistent view on SQLite; per statement on PostgreSQL, which
        therefore runs reads in autocommit: READ COMMITTED gives each statement its own snapshot
        either way, and BEGIN and COMMIT would cost two more round trips per read).
        WarehouseNotFoundError when the catalog does not exist."""
        if not self._exists:
            self._require()
        with self._read_unchecked() as conn:
            yield conn

    @contextmanager
    def _read_unchecked(self) -> Iterator[Connection]:
        """read() whether or not the catalog exists (probe's own reads)."""
        options: dict[str, Any] = {}
        if self.dialect == "postgresql":
            options["isolation_level"] = "AUTOCOMMIT"
        with self._retrying_connect(**options) as conn, conn.begin():
            if self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN DEFERRED")  # one snapshot from the first read to the end
            yield conn

    @contextmanager
    def _retrying_connect(self, write: bool = False, **options: Any) -> Iterator[Connection]:
        conn = None
        deadline = time.monotonic() + self.connect_timeout
        for attempt in range(5):
            try:
                conn = self.engine.connect()
                break
            except OperationalError as exc:
                pause = 0.2 * (attempt + 1)
                if attempt == 4 or time.monotonic() + pause >= deadline:
                    raise CatalogUnavailableError(
                        f"cannot reach the catalog at {self._safe_url()} (gave up after {attempt + 1} attempt(s), "
                        f"connect_timeout {self.connect_timeout:g} s): {_said(exc)}") from exc
                time.sleep(pause)
        assert conn is not None
        try:
            yield conn.execution_options(**options) if options else conn
        except DBAPIError as exc:  # also a failed COMMIT: the caller's `with conn.begin()` ends inside this
            if busy_reason(exc) is not None:
                raise CatalogBusyError(self._busy_message(exc)) from exc
            refused = read_only_reason(exc) if write else None
            if refused is not None:
                raise CatalogReadOnlyError(
                    f"the catalog at {self._safe_url()} refused a write: {refused} ({_said(exc)}). "
                    "A read-only consumer can list, show and read; writing needs a role or mount that can "
                    "write") from exc
            if not exc.connection_invalidated:
                raise
            raise CatalogUnavailableError(
                f"lost the connection to the catalog at {self._safe_url()} ({type(exc.orig).__name__}: "
                f"{_said(exc)}); retry once it answers. If this was a commit, it may or may not "
                "have taken place: Transaction.state tells once the catalog is back, recovery settles it"
            ) from exc
        finally:
            conn.close()

    def initialize(self) -> None:
        """Create the catalog if it is missing: checks the schema's version records in a read transaction; only
        a missing catalog takes the write lock (safe when several processes race) and is created. An existing
        catalog is never migrated here (docs/DESIGN.md, D23): one older than this package works with raises
        CatalogUpgradeRequiredError (`upgrade` is the explicit step), a newer one it may not use CatalogTooNewError."""
        state = self.probe()
        if state is State.OLDER:
            assert self._versions is not None
            self._versions.refuse_older(self.where)
        if state is not State.ABSENT:
            return
        self.upgrade(create_only=True)

    def upgrade(self, create_only: bool = False) -> migrate.Upgrade:
        """Create the catalog or bring it to this package's schema with Alembic (catalog/migrate.py), under
        the schema lock: SQLite's database lock, PostgreSQL's advisory lock. Whoever takes it second finds
        the work done; each revision's changes and its version records commit together, and so does the warehouse id of
        a new catalog (meta_records.warehouse_id). With `create_only`, a catalog that exists (another process
        made it meanwhile) is not migrated: an older one raises CatalogUpgradeRequiredError. A newer catalog is
        never taken back (CatalogTooNewError when this package may not use it)."""
        file = _sqlite_file(self.url) if self.dialect == "sqlite" else None
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
        with self._retrying_connect(write=True) as conn, conn.begin():
            if self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            if self.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_INIT_LOCK})
            done = migrate.upgrade(conn, create_only=create_only, where=self.where)
            meta_records.warehouse_id(conn)  # a new catalog gets its identity with its tables
        self._exists = True
        self._versions = None  # at this package's schema now (or a newer one it may use)
        table_versions.note(self.engine, done.schema_version)
        return done

    def _busy_message(self, exc: DBAPIError) -> str:
        if busy_reason(exc) == "sqlite":
            waited = f"its busy timeout ({sqlite_busy_seconds(self.url):g} s)"
            longer = "wait longer with ?timeout=SECONDS in the SQLite URL"
        else:
            waited = "its busy timeout (PostgreSQL's lock_timeout)"
            longer = "wait longer with a larger lock_timeout (e.g. options=-c lock_timeout=...)"
        return (f"the catalog at {self._safe_url()} stayed locked by another writer past {waited}: "
                f"{_said(exc)}. This catalog transaction wrote nothing and the transaction is still "
                f"usable: retry (after a commit, Transaction.state tells whether it took place). Look for a process "
                f"holding a write transaction open on the catalog; {longer}")

    def _safe_url(self) -> str:
        return safe_url(self.url)

    def dispose(self) -> None:
        self.engine.dispose()


def _dispose_in_child(ref: weakref.ReferenceType[Catalog]) -> None:
    catalog = ref()
    if catalog is not None:
        catalog.engine.dispose(close=False)
