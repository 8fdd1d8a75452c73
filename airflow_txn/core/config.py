"""Warehouse configuration: one frozen dataclass, its defaults, and the only place env vars are read."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from airflow_txn.errors import InvalidArgumentError, TxnError
from airflow_txn.oracle import registry as oracle_kinds

ENV_CATALOG = "AIRFLOW_TXN_CATALOG"
ENV_ROOT = "AIRFLOW_TXN_ROOT"
ENV_ORACLE = "AIRFLOW_TXN_ORACLE"
ENV_HOME = "AIRFLOW_TXN_HOME"
ENV_MANIFESTS = "AIRFLOW_TXN_MANIFESTS"
MANIFEST_MODES = ("off", "on-commit")
"""off: manifests only on request (Warehouse.write_manifest); on-commit: also after every commit."""

DEFAULT_LEASE_SECONDS = 3600.0
MAX_LEASE_SECONDS = 7 * 24 * 3600.0
"""The longest lease a transaction may ask for: a crashed owner holds the vacuum horizon back at most
this long (docs/CONCEPTS.md, Leases). Long work renews a shorter lease instead (keep_alive)."""
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600.0


_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
"""A storage root of the form scheme://...: a URI, never a relative path (`s3://b/wh` is not ./s3:/b/wh)."""


def root_path(root: str | os.PathLike[str]) -> Path:
    """The local directory a storage root names: a path (`~` expanded, made absolute) or a `file://` URI.
    Any other scheme is refused before anything is created: this release stores parts on a filesystem
    every process mounts at the same path (docs/DEPLOYMENT.md), not on an object store."""
    text = os.fspath(root)
    uri = _URI.match(text)
    if uri is None:
        return Path(text).expanduser().absolute()
    scheme = uri.group("scheme").lower()
    if scheme != "file":
        raise InvalidArgumentError(
            f"storage root {text!r}: the {scheme}:// scheme is not supported; give a local or shared "
            f"filesystem path (e.g. /mnt/warehouse) or a file:// URI")
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise InvalidArgumentError(f"storage root {text!r}: a file:// URI names a path on this machine "
                                   f"(file:///path), not on host {parts.netloc!r}")
    return Path(unquote(parts.path)).absolute()


def home_dir() -> Path:
    """`$AIRFLOW_TXN_HOME`, else `~/.airflow_txn`: where the embedded defaults live. Absolute (a relative
    home is taken from the working directory, `~` is expanded), so the default catalog URL and storage
    root name the same directory however the process later changes its working directory."""
    return Path(os.environ.get(ENV_HOME) or Path.home() / ".airflow_txn").expanduser().absolute()


@dataclass(frozen=True, slots=True)
class WarehouseConfig:
    """Where a warehouse lives: catalog URL, storage root and CSN oracle."""

    catalog_url: str
    root: Path
    oracle: str = "sql"
    manifests: str = "off"

    @classmethod
    def resolve(cls, catalog: str | None = None, root: str | os.PathLike[str] | None = None,
                oracle: str | None = None, manifests: str | None = None) -> WarehouseConfig:
        """Explicit arguments first, then AIRFLOW_TXN_* variables, then the embedded defaults."""
        catalog_url = catalog or os.environ.get(ENV_CATALOG) or f"sqlite:///{home_dir() / 'catalog.db'}"
        storage_root = root_path(root or os.environ.get(ENV_ROOT) or home_dir() / "warehouse")
        oracle_spec = (oracle or os.environ.get(ENV_ORACLE) or "sql").strip()
        oracle_kinds.kind_of(oracle_spec)  # a known kind; its options are checked when it is opened
        if "://" not in catalog_url:
            raise TxnError(f"catalog {catalog_url!r} is not a SQLAlchemy URL (e.g. sqlite:////path/catalog.db)")
        manifest_mode = manifests or os.environ.get(ENV_MANIFESTS) or "off"
        if manifest_mode not in MANIFEST_MODES:
            raise TxnError(f"manifests must be one of {MANIFEST_MODES} (argument or ${ENV_MANIFESTS}), "
                           f"got {manifest_mode!r}")
        return cls(catalog_url=catalog_url, root=storage_root, oracle=oracle_spec, manifests=manifest_mode)
