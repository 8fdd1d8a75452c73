"""Warehouse configuration: one frozen dataclass, its defaults, and the precedence of its settings (an argument,
else its AIRFLOW_TXN_* variable, else the default). The variables themselves are named and read in
airflow_txn/environment.py, the one module that reads the environment."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from airflow_txn import environment
from airflow_txn.errors import InvalidArgumentError, InvalidOptionError
from airflow_txn.model.options import Manifests, ManifestsName
from airflow_txn.model.secrets import mask_secrets

# the connect timeout (ENV_CONNECT_TIMEOUT and its bounds too) lives below the catalog and storage, which read it
from airflow_txn.model.timeouts import DEFAULT_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT
from airflow_txn.model.timeouts import ENV_CONNECT_TIMEOUT as ENV_CONNECT_TIMEOUT
from airflow_txn.model.timeouts import MAX_CONNECT_TIMEOUT as MAX_CONNECT_TIMEOUT
from airflow_txn.model.timeouts import connect_timeout_seconds as connect_timeout_seconds
from airflow_txn.oracle import registry as oracle_kinds
from airflow_txn.publish import settings as publishing
from airflow_txn.storage import location

# the variables (airflow_txn/environment.py says what each means), under the names the callers know
ENV_CATALOG = environment.CATALOG
ENV_ROOT = environment.ROOT
ENV_ORACLE = environment.ORACLE
ENV_HOME = environment.HOME
ENV_MANIFESTS = environment.MANIFESTS
ENV_STORAGE_OPTIONS = environment.STORAGE_OPTIONS

DEFAULT_LEASE_SECONDS = 3600.0
MAX_LEASE_SECONDS = 7 * 24 * 3600.0
"""The longest lease a transaction may ask for: a crashed owner holds the vacuum horizon back at most
this long (docs/CONCEPTS.md, Leases). Long work renews a shorter lease instead (keep_alive)."""
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600.0


def root_uri(root: str | os.PathLike[str]) -> str:
    """The storage root as the configuration keeps it (storage/location.normalize_root): an absolute local
    path, or an object store's `scheme://bucket/prefix`. An unsupported scheme is refused before anything is
    created (`s3://b/wh` is never a relative path)."""
    return location.normalize_root(root)


def manifests_option(value: Manifests | ManifestsName | None = None) -> Manifests:
    """When manifests are written: `value` when given, else $AIRFLOW_TXN_MANIFESTS, else Manifests.OFF;
    InvalidOptionError naming where the bad value came from."""
    if value is not None and value != "":
        return Manifests.parse(value, "manifests")
    found = environment.given(ENV_MANIFESTS)
    try:
        return Manifests.OFF if found is None else Manifests.parse(found, "manifests")
    except InvalidOptionError as exc:
        raise InvalidOptionError(f"{exc} (from ${ENV_MANIFESTS})") from None


def check_catalog_url(catalog_url: str) -> None:
    """InvalidArgumentError unless `catalog_url` is a SQLAlchemy URL whose parts parse (a port that is a number); the
    message never repeats the URL's password."""
    if "://" not in catalog_url:
        raise InvalidArgumentError(f"catalog {mask_secrets(catalog_url)!r} is not a SQLAlchemy URL (e.g. sqlite:////path/catalog.db)")
    try:
        _ = make_url(catalog_url).port
    except (ValueError, ArgumentError) as exc:
        raise InvalidArgumentError(f"the catalog URL is not a valid SQLAlchemy URL ({mask_secrets(str(exc))}); e.g. "
                                   "postgresql+psycopg://user@host:5432/db") from exc


def home_dir() -> Path:
    """`$AIRFLOW_TXN_HOME`, else `~/.airflow_txn`: where the embedded defaults live. Absolute (a relative
    home is taken from the working directory, `~` is expanded), so the default catalog URL and storage
    root name the same directory however the process later changes its working directory."""
    return Path(environment.given(ENV_HOME) or Path.home() / ".airflow_txn").expanduser().absolute()


def default_catalog_url() -> str:
    """The embedded default catalog: SQLite in home_dir()."""
    return f"sqlite:///{home_dir() / 'catalog.db'}"


def default_root(catalog_url: str) -> Path:
    """The storage root of a warehouse given none: one per catalog, so that two catalogs never meet on a root
    by default (docs/DESIGN.md, invariant 11). The embedded default catalog keeps `home/warehouse` (where it
    always was); another SQLite file `<dir>/<name>.db` gets `<dir>/<name>-warehouse` beside it; any other
    catalog a directory of home/warehouses named after its backend, host, port and database (no user, no
    password). A catalog that recorded the root it claimed keeps that one (Warehouse.open)."""
    if catalog_url == default_catalog_url():
        return home_dir() / "warehouse"
    try:
        url = make_url(catalog_url)
    except Exception:  # checked (InvalidArgumentError) by the caller
        url = None
    if url is not None and url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        path = Path(str(url.database)).expanduser().absolute()
        return path.with_name(f"{path.stem}-warehouse")
    if url is None:
        name = "catalog"
    else:
        pieces = [url.get_backend_name(), url.host or "local", str(url.port or ""), url.database or ""]
        name = "-".join(piece for piece in pieces if piece)
    return home_dir() / "warehouses" / re.sub(r"[^A-Za-z0-9._-]+", "_", name)


@dataclass(frozen=True, slots=True)
class WarehouseConfig:
    """Where a warehouse lives: catalog URL, storage root and CSN oracle."""

    catalog_url: str
    root: str
    """An absolute local path, or `scheme://bucket/prefix` (storage/location.py)."""
    oracle: str = "sql"
    manifests: Manifests = Manifests.OFF
    storage_options: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    """S3 settings (storage/location.S3_OPTIONS); may hold secrets, so never shown."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    """Seconds an unreachable catalog, object store or Spark Connect server is waited for (connect_timeout_seconds)."""
    publish: tuple[str, ...] = ()
    """The formats every commit is published to ("iceberg", "delta"; none: off), after the commit (docs/INTEROP.md)."""
    iceberg_catalog: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    """pyiceberg catalog properties replacing the defaults (a SQL catalog in the catalog database); may hold secrets."""
    root_given: bool = field(default=True, compare=False)
    """Whether the root was given (argument or $AIRFLOW_TXN_ROOT) rather than derived from the catalog
    (default_root): only a derived root gives way to the root the catalog recorded (Warehouse.open)."""

    @classmethod
    def resolve(cls, catalog: str | None = None, root: str | os.PathLike[str] | None = None,
                oracle: str | None = None, manifests: Manifests | ManifestsName | None = None,
                storage_options: Mapping[str, str | bool] | str | None = None,
                connect_timeout: float | str | None = None, publish: str | Sequence[str] | None = None,
                iceberg_catalog: Mapping[str, str] | str | None = None) -> WarehouseConfig:
        """Explicit arguments first, then AIRFLOW_TXN_* variables, then the embedded defaults."""
        catalog_url = catalog or environment.given(ENV_CATALOG) or default_catalog_url()
        given = root or environment.given(ENV_ROOT)
        storage_root = root_uri(given or default_root(catalog_url))
        local = location.scheme_of(storage_root) == "file"
        if storage_options is None:
            options = location.parse_storage_options(environment.text(ENV_STORAGE_OPTIONS), f"${ENV_STORAGE_OPTIONS}")
            if local:  # settings of the environment's object store; this warehouse does not use one
                options = {}
        else:
            options = location.parse_storage_options(storage_options, "storage_options")
        oracle_spec = (oracle or environment.given(ENV_ORACLE) or "sql").strip()
        oracle_kinds.kind_of(oracle_spec)  # a known kind; its options are checked when it is opened
        check_catalog_url(catalog_url)
        manifest_mode = manifests_option(manifests)
        return cls(catalog_url=catalog_url, root=storage_root, oracle=oracle_spec, manifests=manifest_mode,
                   storage_options=options, connect_timeout=connect_timeout_seconds(connect_timeout),
                   publish=publishing.parse_publish(publish),
                   iceberg_catalog=publishing.parse_iceberg_catalog(iceberg_catalog), root_given=bool(given))

    def location(self) -> location.Location:
        """The storage root resolved to a filesystem (for an object store: its client, no request yet)."""
        return location.resolve(self.root, self.storage_options, self.connect_timeout)
