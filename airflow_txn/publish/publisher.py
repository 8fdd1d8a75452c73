"""Running publishing for one Warehouse: a catch-up to the readable watermark on request (`run`), and a
background thread that a commit wakes (`request`), so a commit never waits for publishing (D26).

A run publishes every table, in no particular order, up to the watermark read when it starts; a table that
fails (its catalog unreachable, a type the format lacks) is reported and retried by the next run while the
others go on. Runs of one process are serialized; runs of several processes are safe (each table's Iceberg
and Delta commits are compare-and-swap) and the second one finds the work done. What it runs per format is a
`formats.Format` (iceberg.IcebergPublisher, delta.DeltaPublisher), chosen by the warehouse's publish= setting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_txn.catalog import commit_log
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import apply, crashpoints, tags, versions
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import InvalidArgumentError, PublishError, SnapshotTooOldError, TableNotFoundError, TxnError
from airflow_txn.model.secrets import mask_secrets
from airflow_txn.publish import iceberg
from airflow_txn.publish.formats import Format, tables_of
from airflow_txn.telemetry import logs, metrics

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from sqlalchemy import Connection

log = logs.get_logger(__name__)

STOP_SECONDS = 5.0
"""How long closing a warehouse waits for a background run to finish (it is safe to abandon: idempotent)."""


class Publisher:
    """Publishing of one warehouse (one object per Warehouse, made on first use)."""

    def __init__(self, rt: Runtime, formats: Sequence[str], catalog_properties: Callable[[], dict[str, str]],
                 warehouse_id: Callable[[], str], delta_options: Callable[[], dict[str, str]] | None = None) -> None:
        self.rt = rt
        self.formats = tuple(formats)
        self._catalog_properties = catalog_properties
        self._warehouse_id = warehouse_id
        self._delta_options = delta_options or dict
        self._catalog: Catalog | None = None
        self._run_lock = threading.RLock()  # republish holds it across its drop and its run
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._catalog_lock = threading.Lock()
        self._pending = False
        """A run was requested since the background thread last started one."""
        self._running = False
        """The background thread is in a run."""
        self.last_error: str | None = None
        """What the background thread's last run failed with (None: it succeeded, or none ran)."""

    # -- the formats ------------------------------------------------------------------------------------------
    def iceberg_catalog(self) -> Catalog:
        with self._catalog_lock:  # not the thread lock: a commit's request() never waits for a catalog to open
            if self._catalog is None:
                self._catalog = iceberg.open_catalog(self._catalog_properties())
            return self._catalog

    def _iceberg(self) -> iceberg.IcebergPublisher:
        return iceberg.IcebergPublisher(self.rt, self.iceberg_catalog(), self._warehouse_id())

    def _format(self, name: str) -> Format:
        if name == "iceberg":
            return self._iceberg()
        if name == "delta":
            from airflow_txn.publish import delta

            return delta.DeltaPublisher(self.rt, self._warehouse_id(), self._delta_options())
        raise InvalidArgumentError(f"unknown publishing format {name!r}")

    def _formats(self) -> list[Format]:
        """The formats this warehouse publishes to; InvalidArgumentError when publishing is off."""
        if not self.formats:
            raise InvalidArgumentError("publishing is off for this warehouse: open it with publish='iceberg' "
                                       "(or 'delta', or 'iceberg,delta'; or set AIRFLOW_TXN_PUBLISH)")
        return [self._format(name) for name in self.formats]

    # -- runs -------------------------------------------------------------------------------------------------
    def run(self, tables: Sequence[str] | None = None, raise_errors: bool = True) -> dict[str, Any]:
        """Publish `tables` (None: every table) to every format up to the readable watermark now. Returns {"csn":
        the watermark, "formats", "tables": {table: {published_csn, snapshots, iceberg_snapshot_id, tags,
        delta_version}}, "errors": {table: message}} (a table's keys of the formats published to; published_csn
        the lowest of them, snapshots their sum); with raise_errors a table that failed raises PublishError after
        the others were published."""
        chosen = self._formats()
        with self._run_lock:
            watermark = apply.readable_csn(self.rt)
            infos = tables_of(self.rt, tables, watermark)
            held = tags.all_tags(self.rt)
            done: dict[str, dict[str, Any]] = {}
            errors: dict[str, str] = {}
            for fmt in chosen:
                published: list[int] = []
                failures = 0
                for info in infos:
                    name = str(info.name)
                    try:
                        outcome = fmt.publish_table(info, watermark, held)
                        _merge(done.setdefault(name, {}), outcome.as_dict())
                        published += outcome.commits
                        crashpoints.hit(crashpoints.PUBLISH_MID_RUN)
                    except Exception as exc:  # reported per table and format, the others go on
                        failures += 1
                        message = (str(exc) if isinstance(exc, TxnError)
                                   else mask_secrets(f"{type(exc).__name__}: {exc}"))
                        shown = message if len(chosen) == 1 else f"{fmt.name}: {message}"
                        errors[name] = f"{errors[name]}; {shown}" if name in errors else shown
                self._measure(fmt.name, published, failures)
            for name in errors:
                done.pop(name, None)
        report = {"csn": watermark, "formats": list(self.formats), "tables": done, "errors": errors}
        if errors:
            log.warning("publishing up to CSN %d failed for %s", watermark, ", ".join(sorted(errors)))
            if raise_errors:
                shown = "; ".join(f"{name}: {message}" for name, message in sorted(errors.items()))
                raise PublishError(f"publishing up to CSN {watermark} failed for {len(errors)} table(s) (the "
                                   f"others were published; the commits stand): {shown}")
        return report

    def _measure(self, name: str, published: Sequence[int], failures: int) -> None:
        """The lag metric of each commit published (from its commit time) and the failed tables' count."""
        tags = {"format": name}
        if failures:
            metrics.incr(metrics.PUBLISH_FAILURES, failures, tags)
        if not published:
            return
        try:
            with self.rt.catalog.read() as conn:
                times = commit_log.committed_at(conn, published)
        except Exception as exc:  # a metric never fails publishing
            log.debug("no publish lag measured: %s", exc)
            return
        now = time.time()
        for committed_at in times:
            metrics.timing(metrics.PUBLISH_LAG, max(0.0, now - committed_at) * 1000, tags)

    def republish(self, table: str) -> dict[str, Any]:
        """Drop `table`'s published tables (Iceberg table, Delta log) and publish it again from its oldest
        readable commit (its snapshot ids and versions change; data files are never touched)."""
        chosen = self._formats()
        with self._run_lock:  # no background run between the drop and the run
            infos = tables_of(self.rt, [table])
            for fmt in chosen:
                fmt.drop(infos[0])
            return self.run([table])

    def published(self, csn: int, tables: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """Per table, what each format's reader opens for its version at `csn` (the Iceberg snapshot, the Delta
        version), catching up first where a format's published progress is behind `csn`. Tables with nothing
        committed at or below `csn` are left out."""
        chosen = self._formats()
        infos = tables_of(self.rt, tables)
        lasts = self._last_commits(infos, csn)
        if any((lasts[info.id] or 0) > fmt.progress(info) for info in infos for fmt in chosen):  # not published yet
            self.run(tables, raise_errors=False)
        found: dict[str, dict[str, Any]] = {}
        behind = []
        for info in infos:
            last = lasts[info.id]
            if last is None:
                continue  # nothing committed at or below csn
            entry: dict[str, Any] = {}
            for fmt in chosen:
                progress = fmt.progress(info)
                if last > progress:  # its version at csn does not exist (yet)
                    where = "" if len(chosen) == 1 else f" to {fmt.name}"
                    behind.append(f"{info.name} (published{where} up to CSN {progress}, committed at {last})")
                    entry = {}
                    break
                at = fmt.published_at(info, csn)
                if at is None:  # vacuum purged that version before it was published
                    raise SnapshotTooOldError(f"table {info.name}: CSN {csn} was never published (its history was "
                                              "purged by vacuum before publishing caught up); read a newer one")
                _merge(entry, at)
            if entry:
                found[str(info.name)] = entry
        if behind:
            raise PublishError(f"not published at CSN {csn}: {', '.join(behind)}; publish() says why")
        return found

    def _last_commits(self, infos: Sequence[TableInfo], csn: int) -> dict[int, int | None]:
        """{table id: its last commit at or below `csn`}; None for a table with none, or dropped at `csn` (its
        published version there is empty: published() leaves it out, as reads raise TableNotFoundError)."""
        with self.rt.catalog.read() as conn:
            lasts = {info.id: commit_log.last_commit_csn(conn, info.id, csn) for info in infos}
            for info in infos:
                if lasts[info.id] is not None and not _exists_at(conn, info, csn):
                    lasts[info.id] = None
        return lasts

    # -- in the background ------------------------------------------------------------------------------------
    def request(self) -> None:
        """Publish soon, on this publisher's background thread (started on first use); never raises."""
        try:
            with self._thread_lock:
                if self._closed.is_set():
                    return
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._loop, name="airflow-txn-publisher", daemon=True)
                    self._thread.start()
                self._pending = True
            self._wake.set()
        except Exception as exc:  # a commit stands whatever publishing does
            log.warning("could not start publishing in the background: %s", exc)

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._thread_lock:
                pending, self._pending = self._pending, False
                self._running = pending
            if pending:  # a commit asked, even if the warehouse is being closed (close waits STOP_SECONDS)
                try:
                    self.run(raise_errors=False)
                    self.last_error = None
                except Exception as exc:  # the next commit (or publish()) tries again
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    log.warning("background publishing failed (the next commit or publish() catches up): %s", exc)
                finally:
                    with self._thread_lock:
                        self._running = False
            if self._closed.is_set():
                return

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until no background run is requested or running (False: still busy after `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._thread_lock:
                alive = self._thread is not None and self._thread.is_alive()
                if not alive or (not self._pending and not self._running):
                    return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        """Stop the background thread, letting a run in progress or requested finish within STOP_SECONDS (a
        process that commits and closes at once still publishes its commit; one that takes longer is caught up
        by the next publisher)."""
        with self._thread_lock:
            self._closed.set()
            self._wake.set()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_SECONDS)
        with self._catalog_lock:
            catalog, self._catalog = self._catalog, None
        engine = getattr(catalog, "engine", None)
        if engine is not None:
            engine.dispose()


def _exists_at(conn: Connection, info: TableInfo, csn: int) -> bool:
    """Whether the table exists at `csn` (not dropped there, D27)."""
    try:
        versions.table_at(conn, info, None, csn)
    except TableNotFoundError:
        return False
    return True


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    """One table's entry of several formats: each format's own keys side by side; `published_csn` the lowest
    (what every format has), `snapshots` the sum, `tags` the union."""
    for key, value in more.items():
        if key not in into:
            into[key] = list(value) if isinstance(value, list) else value
        elif key == "published_csn":
            into[key] = min(into[key], value)
        elif key == "snapshots":
            into[key] += value
        elif key == "tags":
            into[key] = sorted(set(into[key]) | set(value))
