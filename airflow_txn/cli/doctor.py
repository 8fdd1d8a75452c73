"""`airflow-txn doctor`: check a warehouse's configuration, catalog, oracle, storage root and recovery
backlog, each with a status (ok, warn, fail, skip) and a hint saying what to do.

Unlike every other command it does not call Warehouse.open (which would fail at once on a missing catalog
or a malformed configuration, where doctor reports each check): it connects with short timeouts and writes
only a probe directory in the root, deleted at once (the ZooKeeper check connects like any client, which sets
up the log's nodes under the chroot if they are missing). A check that needs a failed one is reported as skip.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from airflow_txn.catalog import Catalog, database, inspection, migrate, schema
from airflow_txn.core import identity, overview, ownership
from airflow_txn.core.config import WarehouseConfig
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import TxnError
from airflow_txn.model.results import CheckStatus, DoctorCheck, DoctorReport
from airflow_txn.model.secrets import mask_secrets
from airflow_txn.model.tid import TidFactory
from airflow_txn.oracle import CsnOracle
from airflow_txn.oracle import registry as oracle_kinds
from airflow_txn.storage import location
from airflow_txn.storage.roots import open_storage

OK: Final = "ok"
WARN: Final = "warn"
FAIL: Final = "fail"
SKIP: Final = "skip"
FAIL_FREE_BYTES = 64 * 2**20
"""Less free space than this in the root's file system fails the check (a commit could not write)."""
WARN_FREE_BYTES = 2**30
WARN_FREE_FRACTION = 0.05
_INIT_HINT = "run `airflow-txn init` (or point --catalog / AIRFLOW_TXN_CATALOG at the right catalog)"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: CheckStatus
    detail: str
    hint: str = ""

    def as_dict(self) -> DoctorCheck:
        return DoctorCheck(name=self.name, status=self.status, detail=self.detail, hint=self.hint)


def run(catalog: str | None, root: str | None, oracle: str | None, timeout: float = 5.0,
        storage_options: Mapping[str, str] | None = None) -> DoctorReport:
    """Every check, in order; `ok` is False when any failed. `storage_options` (None: the environment's)
    are an object-store root's settings, as an Airflow connection gives them (--conn-id)."""
    checks = diagnose(catalog, root, oracle, timeout, storage_options)
    return DoctorReport(ok=all(c.status != FAIL for c in checks), checks=[c.as_dict() for c in checks])


def diagnose(catalog: str | None, root: str | None, oracle: str | None, timeout: float,
             storage_options: Mapping[str, str] | None = None) -> list[Check]:
    try:
        config = WarehouseConfig.resolve(catalog, root, oracle, storage_options=storage_options)
    except TxnError as exc:
        return [Check("config", FAIL, str(exc), "fix --catalog / --root / --oracle or the AIRFLOW_TXN_* variables")]
    checks = [Check("config", OK, f"catalog {safe_url(config.catalog_url)}, root {config.root}, "
                                  f"oracle {config.oracle}")]
    catalog_checks, warehouse_id = _check_catalog(config.catalog_url, timeout)
    checks += catalog_checks
    root_checks = check_root(config.root) if location.scheme_of(config.root) == "file" else check_object_store(config)
    checks += root_checks
    if any(c.status == FAIL for c in root_checks):
        checks.append(Check("root owner", SKIP, "needs a working storage root"))
    elif any(c.status == FAIL for c in catalog_checks):
        checks.append(Check("root owner", SKIP, "needs a working catalog"))
    else:
        checks.append(check_root_owner(config, warehouse_id))
    if any(c.status == FAIL for c in catalog_checks):
        needs = "needs a working catalog"
        return [*checks, Check("oracle", SKIP, needs), Check("recovery", SKIP, needs)]
    return checks + _oracle_and_recovery(config, timeout)


def safe_url(url: str) -> str:
    """The URL with every secret it carries masked (catalog/database.safe_url)."""
    return database.safe_url(url)


# -- catalog ---------------------------------------------------------------------------------------------
def check_catalog(url: str, timeout: float) -> list[Check]:
    """Reachable (with a connect timeout), holds every airflow_txn table, at a schema version we understand."""
    return _check_catalog(url, timeout)[0]


def _check_catalog(url: str, timeout: float) -> tuple[list[Check], str | None]:
    """check_catalog, and the warehouse id the catalog records (None: none, or no catalog reached)."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        return [Check("catalog", FAIL, f"bad catalog URL {safe_url(url)!r}: {mask_secrets(str(exc))}",
                      "use a SQLAlchemy URL")], None
    backend = parsed.get_backend_name()
    database = parsed.database or ""
    if backend == "sqlite" and database not in ("", ":memory:") and not Path(database).expanduser().exists():
        return [Check("catalog", FAIL, f"catalog file {database} does not exist", _INIT_HINT)], None
    try:
        found = inspection.look(parsed, timeout)
    except (SQLAlchemyError, ImportError) as exc:
        return [Check("catalog", FAIL, f"cannot reach {safe_url(url)}: {mask_secrets(_first_line(exc))}",
                      "check the URL, that the database server is running, and the credentials")], None
    reached = Check("catalog", OK, f"{backend} catalog {safe_url(url)} reachable")
    version = found.schema_version
    older = version is not None and version.isdigit() and int(version) < schema.SCHEMA_VERSION
    if found.missing_tables and not older:  # an older catalog lacks the newer tables: the version check says so
        missing = ", ".join(found.missing_tables)
        return [reached, Check("catalog schema", FAIL, f"not an airflow_txn catalog yet (missing {missing})",
                               _INIT_HINT)], None
    return [reached, _version_check(version, found.revision, found.min_client_version, found.index_version),
            _identity_check(found.warehouse_id)], found.warehouse_id


def _identity_check(warehouse_id: str | None) -> Check:
    """The warehouse id Airflow Assets name the warehouse by (core/identity.py)."""
    if warehouse_id is None:
        return Check("warehouse id", WARN, "none recorded yet (a catalog older than warehouse ids)",
                     "the next open of the warehouse records one (`airflow-txn upgrade`, any write)")
    return Check("warehouse id", OK, f"{warehouse_id} (Airflow Assets: airflow-txn://{warehouse_id}/<ns.table>)")


def _version_check(version: str | None, revision: str | None, min_client: str | None = None,
                   index: str | None = None) -> Check:
    """The client's package and schema head beside the catalog's schema version and min_client_version, and
    which side must upgrade when they do not meet (docs/DESIGN.md, D23)."""
    from airflow_txn import __version__

    if version is None or not version.isdigit():
        return Check("catalog schema", FAIL, f"no valid schema version in the catalog ({version!r})", _INIT_HINT)
    oldest = int(min_client) if min_client is not None and min_client.isdigit() else None
    index_version = int(index) if index is not None and index.isdigit() else 0
    found = migrate.Versions(revision=revision, schema_version=int(version), index_version=index_version,
                             min_client_version=oldest)
    detail = (f"client airflow-txn {__version__} (schema version {schema.SCHEMA_VERSION}, {migrate.HEAD}); "
              f"catalog {found.shown()}, min_client_version {oldest if oldest is not None else 'not recorded'}")
    if found.newer:
        if oldest is not None and oldest <= schema.SCHEMA_VERSION:
            return Check("catalog schema", OK, f"{detail}: newer than this client, which may still use it",
                         "upgrade the airflow-txn package here for what the newer schema brings (optional)")
        return Check("catalog schema", FAIL, f"{detail}: newer than this client can use",
                     f"this client must be upgraded: install an airflow-txn package of schema version "
                     f"{oldest if oldest is not None else found.schema_version} or newer (the catalog stays as it is)")
    if found.older:
        return Check("catalog schema", FAIL, f"{detail}: older than this client works with "
                                             f"(schema version {schema.MIN_CATALOG_VERSION} or newer)",
                     "the catalog must be upgraded: run `airflow-txn upgrade` once with this package (opening "
                     "never upgrades it), or use the older package here")
    notes = []
    if revision is None:
        notes.append("made before Alembic: `airflow-txn upgrade` records its revision")
    if oldest is None:
        notes.append("`airflow-txn upgrade` records min_client_version")
    hint = ""
    if int(version) < schema.SCHEMA_VERSION:
        notes.append("older than this client's, which still uses it")
        hint = ("`airflow-txn upgrade` brings it to this client's schema (what the newer schema adds, e.g. recording "
                "check reports, needs it)")
    if int(version) == schema.SCHEMA_VERSION and index_version < schema.INDEX_VERSION:
        lacking = ", ".join(migrate.index_revisions_after(index_version))
        notes.append(f"index version {index_version}: it lacks the index of {lacking}")
        return Check("catalog schema", WARN, detail + f" ({'; '.join(notes)})",
                     f"the catalog lacks an index this client expects: run `airflow-txn upgrade` once ({lacking})")
    return Check("catalog schema", OK, detail + (f" ({'; '.join(notes)})" if notes else ""), hint)


# -- storage root ------------------------------------------------------------------------------------------
def check_object_store(config: WarehouseConfig) -> list[Check]:
    """An object-store root: its settings resolve, its bucket exists and is reachable, an object can be written,
    read back and deleted below the root; the source of the credentials is named (never their values)."""
    try:
        where = config.location()
        storage = open_storage(where)
    except TxnError as exc:
        return [Check("storage root", FAIL, str(exc), "fix storage_options / the AWS_* variables")]
    try:
        storage.ensure()
    except TxnError as exc:
        return [Check("storage root", FAIL, str(exc),
                      "check the endpoint, the bucket name and the credentials (see docs/DEPLOYMENT.md)")]
    checks = [Check("storage root", OK, f"{where.uri}: bucket reachable; {where.credentials}")]
    probe = f".airflow_txn-doctor-{uuid.uuid4().hex}"
    try:
        storage.write_root_file(probe, b"airflow_txn")
        if storage.read_root_file(probe) != b"airflow_txn":
            checks.append(Check("write probe", FAIL, f"an object written below {where.uri} read back different",
                                "check the object store"))
        else:
            checks.append(Check("write probe", OK, "wrote, read back and deleted an object"))
    except (OSError, TxnError) as exc:
        checks.append(Check("write probe", FAIL, f"cannot write below {where.uri}: {_first_line(exc)}",
                            "give these credentials read/write/delete/list access to the bucket's prefix"))
    finally:
        with suppress(OSError, TxnError):
            where.filesystem.delete_file(where.path(probe))
    return checks


def check_root(root: str | Path) -> list[Check]:
    """Exists and is a directory; a file (and a directory) can be created and deleted in it; free space."""
    root = Path(root)
    hint = "run `airflow-txn init`, or point --root / AIRFLOW_TXN_ROOT at the warehouse's root"
    if not root.exists():
        return [Check("storage root", FAIL, f"{root} does not exist", hint)]
    if not root.is_dir():
        return [Check("storage root", FAIL, f"{root} is not a directory", hint)]
    return [Check("storage root", OK, f"{root} exists"), _probe(root), _disk_space(root)]


def _probe(root: Path) -> Check:
    probe = root / f".airflow_txn-doctor-{uuid.uuid4().hex}"
    try:
        probe.mkdir()
        with open(probe / "probe", "xb") as fh:
            fh.write(b"airflow_txn")
            fh.flush()
            os.fsync(fh.fileno())
        if (probe / "probe").read_bytes() != b"airflow_txn":
            return Check("write probe", FAIL, f"a file written in {root} read back different", "check the file system")
        (probe / "probe").unlink()
        probe.rmdir()
    except OSError as exc:
        return Check("write probe", FAIL, f"cannot create and delete files in {root}: {exc.strerror or exc}",
                     "give this user read/write access to the root: every writer creates part directories there")
    finally:
        with suppress(OSError):
            (probe / "probe").unlink(missing_ok=True)
        with suppress(OSError):
            probe.rmdir()
    return Check("write probe", OK, "created and deleted a directory and a file")


def _disk_space(root: Path) -> Check:
    usage = shutil.disk_usage(root)
    detail = f"{_gib(usage.free)} free of {_gib(usage.total)}"
    hint = "free space or move the root: commits fail when the file system is full"
    if usage.free < FAIL_FREE_BYTES:
        return Check("disk space", FAIL, detail, hint)
    if usage.free < WARN_FREE_BYTES or usage.free < WARN_FREE_FRACTION * usage.total:
        return Check("disk space", WARN, detail, hint + "; `airflow-txn vacuum` deletes what no snapshot needs")
    return Check("disk space", OK, detail)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


# -- oracle and recovery -------------------------------------------------------------------------------------
def check_root_owner(config: WarehouseConfig, warehouse_id: str | None) -> Check:
    """Whose root this is: its ownership marker (core/ownership.py) against the catalog's warehouse id."""
    try:
        marker = ownership.read_marker(open_storage(config.location()))
    except TxnError as exc:
        return Check("root owner", FAIL, _first_line(exc), "restore the marker, or remove it and run "
                     "`airflow-txn adopt-root`")
    if marker is None:
        return Check("root owner", OK, f"unclaimed: this warehouse's first write claims it ({ownership.MARKER})")
    if warehouse_id is None:
        return Check("root owner", WARN, f"claimed by warehouse {marker.warehouse_id}; this catalog records no "
                     "warehouse id yet", "open the catalog once with this release (`airflow-txn init`)")
    if marker.warehouse_id != warehouse_id:
        return Check("root owner", FAIL, f"the root belongs to warehouse {marker.warehouse_id}, not to this "
                     f"catalog's {warehouse_id}: writes and vacuum are refused (RootOwnedError)",
                     "give this catalog a root of its own (--root / AIRFLOW_TXN_ROOT), or, if this catalog "
                     "really replaces the other one, `airflow-txn adopt-root`")
    return Check("root owner", OK, f"this warehouse's ({warehouse_id}; the marker records CSN {marker.csn})")


def _oracle_and_recovery(config: WarehouseConfig, timeout: float) -> list[Check]:
    catalog = Catalog(config.catalog_url, connect_timeout=timeout)
    oracle: CsnOracle | None = None
    try:
        oracle_check, oracle = check_oracle(config.oracle, catalog, timeout)
        return [oracle_check, check_recovery(config, catalog, oracle), check_publishing(config, catalog, oracle)]
    finally:
        if oracle is not None:
            oracle.close()
        catalog.dispose()


def check_oracle(spec: str, catalog: Catalog, timeout: float) -> tuple[Check, CsnOracle | None]:
    """The oracle's own check (oracle/registry.py), within `timeout`: e.g. the SQL counter row, or a
    ZooKeeper connection to the log of THIS warehouse."""
    found, oracle = oracle_kinds.kind_of(spec).doctor_check(spec, catalog, timeout)
    return Check("oracle", OK if found.ok else FAIL, found.detail, found.hint), oracle


def check_recovery(config: WarehouseConfig, catalog: Catalog, oracle: CsnOracle | None) -> Check:
    """Warn when recovery has work: expired transactions, unfinished rollbacks, unapplied records."""
    if oracle is None:
        return Check("recovery", SKIP, "needs a reachable oracle")
    runtime = Runtime(catalog, oracle, open_storage(config.location()), TidFactory())
    try:
        backlog = overview.recovery_backlog(runtime)
    except (TxnError, SQLAlchemyError) as exc:
        return Check("recovery", FAIL, f"cannot read the transactions: {_first_line(exc)}", _INIT_HINT)
    pending = {k: v for k, v in backlog.items() if v}
    if not pending:
        return Check("recovery", OK, "nothing to recover")
    detail = ", ".join(f"{'?' if v < 0 else v} {k.replace('_', ' ')}" for k, v in pending.items())
    return Check("recovery", WARN, detail, "run `airflow-txn recover` (safe at any time, from any process)")


def check_publishing(config: WarehouseConfig, catalog: Catalog, oracle: CsnOracle | None) -> Check:
    """Whether every commit up to the watermark is published to every format (docs/INTEROP.md); only when
    publishing is on (publish= / AIRFLOW_TXN_PUBLISH). Reads only: no Iceberg catalog table nor Delta table is
    created here."""
    if not config.publish:
        return Check("publishing", OK, "off (Warehouse.open(publish='iceberg') / AIRFLOW_TXN_PUBLISH turn it on)")
    if oracle is None:
        return Check("publishing", SKIP, "needs a reachable oracle")
    from airflow_txn.core import apply

    runtime = Runtime(catalog, oracle, open_storage(config.location()), TidFactory())
    hint = "run `airflow-txn publish` (safe at any time, from any process); it names what fails"
    late: list[tuple[str, int, int]] = []
    several = len(config.publish) > 1
    for name in config.publish:
        try:
            found = _behind(name, config, catalog, runtime, apply.readable_csn(runtime))
        except Exception as exc:  # a missing extra, an unreachable catalog, a catalog without its tables yet
            what = "the Iceberg catalog" if name == "iceberg" else "the Delta tables"
            return Check("publishing", WARN, f"cannot read {what}: {mask_secrets(_first_line(exc))}", hint)
        late += [(f"{table}{f' [{name}]' if several else ''}", done, last) for table, done, last in found]
    if not late:
        shown = " and ".join("Iceberg" if name == "iceberg" else "Delta" for name in config.publish)
        return Check("publishing", OK, f"every commit up to the watermark is published to {shown}")
    shown = ", ".join(f"{table} (published up to CSN {done}, last commit {last})" for table, done, last in late[:5])
    more = f" and {len(late) - 5} more" if len(late) > 5 else ""
    return Check("publishing", WARN, f"{len(late)} table(s) behind: {shown}{more}", hint)


def _behind(name: str, config: WarehouseConfig, catalog: Catalog, runtime: Runtime,
            watermark: int) -> list[tuple[str, int, int]]:
    """publish's `behind` of one format."""
    if name == "delta":
        from airflow_txn.publish import delta

        options = delta.storage_options(runtime.storage.location, config.storage_options)
        return delta.behind(runtime, identity.warehouse_id(catalog), options, watermark)
    from airflow_txn.publish import iceberg

    properties = iceberg.catalog_properties(config.catalog_url, runtime.storage.location,
                                            config.storage_options, config.iceberg_catalog, config.connect_timeout)
    ice = iceberg.open_catalog({**properties, "init_catalog_tables": "false"})
    try:
        return iceberg.behind(runtime, ice, identity.warehouse_id(catalog), watermark)
    finally:
        engine = getattr(ice, "engine", None)
        if engine is not None:
            engine.dispose()


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
