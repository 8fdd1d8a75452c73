"""Cleanup (invariant 8): files no snapshot can see, orphans of dead writers, stale manifests, history rows.

Each table has a horizon H (retention.py): the oldest snapshot anyone may still read, the minimum of
the readable watermark, the oldest open transaction's snapshot, the snapshot current
`retention_seconds` ago, and the table's own policy (seconds, versions). A part is garbage when it
was rolled back (RollbackCSN) or removed at a CSN <= H, except the sources of a background merge
(compaction.py): their removal CSN is old, yet a reader may hold a file list taken before the swap,
so they stay until the table's retention window has passed since the merge and no transaction older
than the merge is open; and except the parts a tag sees (core/tags.py): a tag holding the table at CSN
T keeps every part created at or before T and removed after it, whatever H (docs/DESIGN.md, D18).
Taking the horizons bumps the snapshot gate row that `begin` holds in share mode, so no transaction can
start from an older snapshot meanwhile.

Order: horizons stored first (readers refuse older CSNs from then on), then manifests (those of CSNs
below a horizon removed unless a tag at that CSN holds their tables, kept ones rewritten if their part
list changed, e.g. after a merge), then garbage parts in batches of at most BATCH: a batch's files, then its
catalog rows in one transaction (a crash in between leaves rows of garbage parts whose files are gone, which
nothing reads and the next vacuum finishes), then orphans: part files and write
dirs no part row names, found by listing each table's directory (their writer's lease judged by the
catalog's clock, D8), then the catalog history no snapshot, recovery or retry needs (`_purge_history`).
`dry_run` reports the same counts and changes nothing (no rollback of expired transactions, no horizon
stored, nothing deleted).
One run at a time per warehouse (catalog/locks.py); a second one waits. Writers may create part files
and write dirs in a partition dir meanwhile: storage removes a partition dir only by rmdir
(empty at that instant) and a writer re-creates one removed under it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from sqlalchemy import Connection

from airflow_txn.catalog import (
    check_reports,
    commit_log,
    compaction_records,
    counters,
    key_records,
    locks,
    part_records,
    read_sets,
    schema,
    table_registry,
    table_versions,
    txn_records,
)
from airflow_txn.catalog.clock import wall_time
from airflow_txn.catalog.purges import Purge
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import bounds, crashpoints, identity, manifests, ownership, recovery, retention, tags, versions
from airflow_txn.core.check_reports import STORED_SINCE as STORED_REPORTS
from airflow_txn.core.retention import Horizons
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import (
    InvalidNameError,
    OracleUnavailableError,
    SnapshotTooOldError,
    TableNotFoundError,
    TagNotFoundError,
)
from airflow_txn.model.csn import PREHISTORIC_CSN
from airflow_txn.model.results import PurgedRows, VacuumReport
from airflow_txn.telemetry import logs

HISTORY_SECONDS = 24 * 3600.0
"""Rows of ended transactions and commit records stay at least this long, whatever the window: an Airflow
retry (a commit or finalize task) looks its transaction up by tid after it ended."""
ORPHAN_GRACE_SECONDS = 60.0
"""Write dirs with no readable sidecar, and write dirs or part files whose writer the catalog does not know,
are left this long at least (a writer may be starting)."""
FOREIGN_SHOWN = 20
"""How many of the files a vacuum keeps as not its own its log line names."""
BATCH = 500
"""Garbage parts (and history rows) a vacuum deletes per catalog transaction: their rows go in ONE statement after
the batch's files. Bounded so that a commit waits at most one such short transaction for the catalog (SQLite's
write lock is the whole database's) and a crash leaves at most this many rows whose files are gone; 500 ids also
stay below SQLite's oldest limit on bound parameters (999). Per-part transactions cost 1-4 ms a part here, too
slow for a day of garbage (docs/benchmarks/year.md)."""
CLOCK_MARGIN_SECONDS = 60.0
"""Merge sources stay while a transaction open now began less than this before the merge (clock skew)."""

VACUUM_LOCK = "vacuum"
"""The maintenance lock a vacuum run holds (catalog/locks.py): a second run waits for the first."""

Progress = Callable[[str, int, int], None]

log = logs.get_logger(__name__)


def _no_progress(_stage: str, _done: int, _total: int) -> None:
    return None


def horizons(rt: Runtime, retention_seconds: float, store: bool = True) -> Horizons:
    """The horizons of this run (module doc); with `store` they are raised in the catalog."""
    with (rt.catalog.write() if store else rt.catalog.read()) as conn:
        if store:
            counters.bump_snapshot_gate(conn)
        return retention.compute(conn, rt.catalog, rt.oracle, retention_seconds, store)


def horizon(rt: Runtime, retention_seconds: float) -> int:
    """The global horizon of a run (tables with a policy of their own may keep more); stored."""
    return horizons(rt, retention_seconds).global_horizon


def stored_horizon(rt: Runtime) -> int:
    """The lowest stored horizon of any table: no CSN below it is readable anywhere."""
    with rt.catalog.read() as conn:
        return retention.min_horizon(conn)


def check_retention(retention_seconds: object) -> float:
    """InvalidArgumentError unless a number of seconds from 0 to bounds.MAX_RETENTION_SECONDS."""
    return bounds.retention_seconds(retention_seconds)


def vacuum(rt: Runtime, retention_seconds: float, batch: int = BATCH, dry_run: bool = False,
           progress: Progress | None = None) -> VacuumReport:
    """Delete what no snapshot in the window can see; return what was (or, dry_run, would be) removed."""
    window = check_retention(retention_seconds)
    tick = progress or _no_progress
    owner = identity.warehouse_id(rt.catalog)
    ownership.check(rt, owner)  # RootOwnedError: another warehouse's root, or a catalog older than it (invariant 11)
    if dry_run:  # changes nothing: needs no turn
        return _run(rt, window, batch, dry_run, tick)
    with locks.exclusive(rt.catalog, VACUUM_LOCK):
        recovery.roll_back_expired(rt, tick)
        recovery.finish_rollbacks(rt, tick)
        report = _run(rt, window, batch, dry_run, tick)
    ownership.advance(rt, owner)
    return report


def _run(rt: Runtime, window: float, batch: int, dry_run: bool, tick: Progress) -> VacuumReport:
    h = horizons(rt, window, store=not dry_run)
    with rt.catalog.read() as conn:
        listed = {t.id for t in table_registry.listed_tables(conn)}
        # every table row; where a dropped table's name was taken by a rename, the live table last, so that a
        # name's entry in the report's horizons is the live table's
        tables = sorted(table_registry.all_tables(conn), key=lambda t: t.id in listed)
    manifests_removed, manifests_refreshed, foreign_manifests = _tidy_manifests(rt, h, dry_run, tick)
    removed, freed, kept, tagged = _remove_garbage_parts(rt, h, tables, batch, dry_run, tick)
    orphans, orphan_bytes, foreign = _remove_orphans(rt, tables, window, dry_run, tick)
    purged = _purge_history(rt, h, tables, batch, dry_run, tick)
    log.info("vacuum%s: %d part(s) and %d orphan(s) removed, %d bytes freed (horizon CSN %d)",
             " (dry run)" if dry_run else "", removed, orphans, freed + orphan_bytes, h.global_horizon,
             extra=logs.fields(csn=h.global_horizon))
    return VacuumReport(
        horizon=h.global_horizon,
        horizons={t.name.qualified: h.of(t.id) for t in tables},
        parts_removed=removed, orphan_dirs_removed=orphans, bytes_freed=freed + orphan_bytes,
        merge_sources_kept=kept, tagged_parts_kept=tagged,
        manifests_removed=manifests_removed, manifests_refreshed=manifests_refreshed,
        rows_purged=purged, foreign_files_kept=foreign + foreign_manifests, dry_run=dry_run,
    )


# -- parts ------------------------------------------------------------------------------------------
def _protected_after(rt: Runtime, h: Horizons, table_id: int) -> float:
    with rt.catalog.read() as conn:
        oldest = txn_records.oldest_open_created_at(conn)
    return compaction_records.protect_after(h.window(table_id), oldest,
                                            CLOCK_MARGIN_SECONDS, wall_time())


def _remove_garbage_parts(rt: Runtime, h: Horizons, tables: list[TableInfo], batch: int, dry_run: bool,
                          tick: Progress) -> tuple[int, int, int, int]:
    """Delete each table's garbage `batch` parts at a time: the batch's files, then its rows in ONE catalog
    transaction and statement (a file before its row, invariant 8). Stages "parts" (tables) and "part files"
    (parts removed of those counted garbage when the run began; a run deletes more when rollbacks add some)."""
    kept = tagged = total = 0
    plans: list[tuple[TableInfo, float]] = []
    for info in tables:
        after = _protected_after(rt, h, info.id)
        with rt.catalog.read() as conn:
            kept += compaction_records.kept_sources(conn, info.id, h.of(info.id), after)
            tagged += compaction_records.kept_for_tags(conn, info.id, h.of(info.id))
            if not dry_run:
                total += compaction_records.garbage_count(conn, info.id, h.of(info.id), after)
        plans.append((info, after))
    removed = freed = 0
    for index, (info, after) in enumerate(plans):
        tick("parts", index, len(tables))
        if dry_run:  # a dry run lists them all at once: it deletes none to move on
            with rt.catalog.read() as conn:
                parts = compaction_records.garbage(conn, info.id, h.of(info.id), after, None)
            removed += len(parts)
            freed += sum(rt.storage.size_of(info.directory, p.path) for p in parts)
            continue
        for kind in compaction_records.GARBAGE_KINDS:
            resume: int | None = None
            while True:
                with rt.catalog.read() as conn:
                    found = compaction_records.garbage_batch(conn, info.id, h.of(info.id), after, batch, kind, resume)
                if not found:
                    break
                freed += _remove_batch(rt, info, [(p.id, p.path) for p in found])
                removed += len(found)
                resume = compaction_records.garbage_resume(kind, found)
                tick("part files", removed, max(total, removed))
    tick("parts", len(tables), len(tables))
    return removed, freed, kept, tagged


def _remove_batch(rt: Runtime, info: TableInfo, parts: list[tuple[int, str]]) -> int:
    """Delete the files of `parts` ((id, path) of garbage parts), then their rows in one catalog transaction;
    returns the bytes freed. Should deleting a file fail, the rows of the files already deleted still go
    (best effort) before the error is raised. A crash between the files and the rows leaves rows of garbage
    parts whose files are gone: nothing reads them (they are below the horizon or rolled back) and the next
    vacuum deletes them (a missing file is fine to delete)."""
    freed = 0
    gone: list[int] = []
    try:
        for part_id, path in parts:
            freed += rt.storage.delete_part(info.directory, path)
            gone.append(part_id)
        crashpoints.hit(crashpoints.VACUUM_MID)
    finally:
        if gone:
            with rt.catalog.write() as conn:
                part_records.forget(conn, gone)
    return freed


# -- orphans ----------------------------------------------------------------------------------------
def _remove_orphans(rt: Runtime, tables: list[TableInfo], retention_seconds: float, dry_run: bool,
                    tick: Progress) -> tuple[int, int, int]:
    """(orphans removed, bytes freed, foreign files kept)."""
    count = freed = 0
    foreign: list[str] = []
    for index, info in enumerate(tables):
        tick("orphans", index, len(tables))
        candidates, kept = _orphan_candidates(rt, info, retention_seconds)
        foreign.extend(f"{info.directory}/{relative}" for relative in kept)
        for relative in candidates:
            if dry_run:
                freed += rt.storage.size_of(info.directory, relative)
            else:
                freed += rt.storage.delete_part(info.directory, relative)
            count += 1
    tick("orphans", len(tables), len(tables))
    if foreign:
        log.warning("vacuum kept %d file(s) below the tables of storage root %s that this warehouse cannot prove are "
                    "its own (their transaction is not in its catalog: another warehouse's, or newer than a catalog "
                    "restored from a backup); check and remove them by hand if they are nobody's: %s%s",
                    len(foreign), rt.storage.uri, ", ".join(foreign[:FOREIGN_SHOWN]),
                    " ..." if len(foreign) > FOREIGN_SHOWN else "")
    return count, freed, len(foreign)


def _orphan_candidates(rt: Runtime, info: TableInfo, retention_seconds: float) -> tuple[list[str], list[str]]:
    """(write dirs and plain part files whose writer can no longer register them, unregistered files this
    warehouse cannot prove are its own). Only unregistered ones are looked at. A file is this warehouse's when
    its writer, the tid in its name or its write dir's sidecar, is a transaction this catalog began (tids carry
    64 random bits: another warehouse's is never one of ours); anything else is kept and reported (invariant
    11), but for a write dir holding nothing at all once the grace period is over (a writer that died before
    its sidecar: nothing to lose). Registration is checked again LAST, after the writer's transaction was seen
    closed, so a registration cannot slip in between."""
    registered: set[str] | None = None
    candidates, foreign = [], []
    for entry in rt.storage.stored_parts(info.directory):
        if registered is None:  # read once the listing holds anything: a table with nothing stored reads no rows
            registered = _registered_units(rt, info)
        if entry.relative in registered:
            continue
        tid = rt.storage.writer_tid(entry)
        with rt.catalog.read() as conn:
            writer = None if tid is None else txn_records.state_and_expiry(conn, tid)
        if writer is None:  # no readable sidecar (a writer starting, a torn write), or a tid this catalog lacks
            if entry.age_seconds() <= max(retention_seconds, ORPHAN_GRACE_SECONDS):
                continue
            if not entry.is_file and rt.storage.size_of(info.directory, entry.relative) == 0:
                candidates.append(entry.relative)
            else:
                foreign.append(entry.relative)
        elif writer[0] != txn_records.ACTIVE or writer[1]:
            candidates.append(entry.relative)
    if not candidates:
        return [], foreign
    registered = _registered_units(rt, info)
    return [c for c in candidates if c not in registered], foreign


def _registered_units(rt: Runtime, info: TableInfo) -> set[str]:
    """The write dirs and part files of `info` the catalog registers (storage.root.stored_unit)."""
    with rt.catalog.read() as conn:
        return recovery.registered_units(conn, info.id)


# -- catalog history -------------------------------------------------------------------------------
def _purge_history(rt: Runtime, h: Horizons, tables: list[TableInfo], batch: int, dry_run: bool,
                   tick: Progress) -> PurgedRows:
    """Delete the catalog rows no snapshot, recovery or retry needs (module doc): read sets, staging-key
    and statement-scan rows of ended transactions; commit records and table-commit rows below every
    horizon and running snapshot (`keep`), each table's newest kept; rows of transactions that ended
    before the window with nothing left, then the check reports of transactions whose row is gone; rows of
    merges older than that whose sources are all gone (nothing left to follow or protect), each table's newest kept."""
    keep = _keep_csn(rt, h, tables)
    if not dry_run:  # first: a reader finding the rows gone already knows which answers went with them
        with rt.catalog.write() as conn:
            commit_log.note_purge_below(conn, keep)
    before = wall_time() - max(HISTORY_SECONDS, h.retention_seconds, *(w for _, w in h.own.values()))
    steps = [
        Purge("read_set", read_sets.of_ended_transactions(), read_sets.forget),
        Purge("keys", key_records.of_ended_transactions(), key_records.forget),
        Purge("commit_log", commit_log.purgeable_records(keep, before), commit_log.purge_records),
        *[Purge("table_commits", commit_log.purgeable_table_commits(t.id, keep),
                functools.partial(_purge_table_commits, table_id=t.id)) for t in tables],
        *([Purge("table_versions", table_versions.purgeable_rolled_back(), table_versions.forget_rolled_back)]
          if rt.catalog.at_least(schema.VERSIONED_SINCE) else []),  # an older catalog this package uses has none
        Purge("transactions", txn_records.purgeable(keep, before), txn_records.purge),
        Purge("compactions", compaction_records.purgeable(before), compaction_records.purge),  # after the parts
        *([Purge("check_reports", check_reports.of_purged_transactions(), check_reports.forget)]  # after their rows
          if rt.catalog.at_least(STORED_REPORTS) else []),  # an older catalog this package uses has none (D23)
    ]
    purged = dict.fromkeys(("read_set", "keys", "commit_log", "table_commits", "table_versions", "transactions",
                            "check_reports", "compactions"), 0)
    for index, step in enumerate(steps):
        tick("purge", index, len(steps))
        purged[step.kind] += _purge(rt, step, batch, dry_run)
    tick("purge", len(steps), len(steps))
    return PurgedRows(read_set=purged["read_set"], keys=purged["keys"], commit_log=purged["commit_log"],
                      table_commits=purged["table_commits"], table_versions=purged["table_versions"],
                      transactions=purged["transactions"],
                      check_reports=purged["check_reports"], compactions=purged["compactions"])


def _purge_table_commits(conn: Connection, csns: list[int], table_id: int) -> int:
    return commit_log.purge_table_commits(conn, table_id, csns)


def _keep_csn(rt: Runtime, h: Horizons, tables: list[TableInfo]) -> int:
    """The lowest CSN any snapshot may still read (this run's horizons, the stored ones, every running
    snapshot) and, with ZooKeeper, the oldest record its log still holds (its compaction finds the
    decisions to drop through the catalog's records)."""
    with rt.catalog.read() as conn:
        lowest = [h.global_horizon, *(h.of(t.id) for t in tables), retention.min_horizon(conn)]
        oldest = txn_records.oldest_active_snapshot(conn)
    if oldest is not None:
        lowest.append(oldest)
    external = rt.oracle.external_log
    if external is not None:
        try:
            first = external.records(after=PREHISTORIC_CSN - 1, limit=1)
        except OracleUnavailableError:
            return PREHISTORIC_CSN
        if first:
            lowest.append(first[0].csn)
    return min(lowest)


def _purge(rt: Runtime, step: Purge, batch: int, dry_run: bool) -> int:
    """Delete the step's candidates in catalog transactions of at most `batch` rows; dry_run counts them."""
    if dry_run:
        with rt.catalog.read() as conn:
            return step.count(conn)
    total = 0
    while True:
        with rt.catalog.write() as conn:
            keys = step.take(conn, batch)
            removed = step.remove(conn, keys) if keys else 0
        if removed == 0:
            return total
        total += removed


# -- manifests --------------------------------------------------------------------------------------
def _tidy_manifests(rt: Runtime, h: Horizons, dry_run: bool, tick: Progress) -> tuple[int, int, int]:
    """Remove manifest dirs of a CSN below the horizon of a table they list (its files may go now);
    rewrite kept ones whose part list no longer matches the catalog (a merge swapped parts out). Only this
    warehouse's: a dir whose index names another writer (or none) is kept and counted (invariant 11).
    Returns (removed, refreshed, kept as not provably this warehouse's)."""
    entries = rt.storage.root_entries(manifests.MANIFEST_DIR)
    if not entries:
        return 0, 0, 0
    owner = identity.warehouse_id(rt.catalog)
    with rt.catalog.read() as conn:  # only merges rewrite what a snapshot's manifest lists
        last_merge = compaction_records.last_merge_times(conn)
    tagged = tags.held(rt)  # tags made from now on name CSNs at or above this run's stored horizons
    dirs = sorted(f"{manifests.MANIFEST_DIR}/{name}" for name, is_file, _ in entries
                  if not is_file and name.startswith("csn-"))
    removed = refreshed = 0
    foreign: list[str] = []
    for index, directory in enumerate(dirs):
        tick("manifests", index, len(dirs))
        verdict = _manifest_verdict(rt, h, last_merge, tagged, directory, owner)
        if verdict is None:
            continue
        if verdict == "foreign":
            foreign.append(directory)
            continue
        if verdict == "remove":
            removed += 1
            if not dry_run:
                rt.storage.delete_root_tree(directory)
        else:
            refreshed += 1
            if not dry_run:
                _refresh(rt, directory)
    tick("manifests", len(dirs), len(dirs))
    if foreign:
        log.warning("vacuum kept %d manifest director(ies) of storage root %s that this warehouse cannot prove are "
                    "its own (their index names another warehouse, or none): %s%s", len(foreign), rt.storage.uri,
                    ", ".join(foreign[:FOREIGN_SHOWN]), " ..." if len(foreign) > FOREIGN_SHOWN else "")
    return removed, refreshed, len(foreign)


def _manifest_verdict(rt: Runtime, h: Horizons, last_merge: dict[int, float], tagged: set[tuple[int, int]],
                      directory: str, owner: str) -> str | None:
    """"remove", "refresh", "foreign" (written by another warehouse than `owner`, or by code before indexes
    named their writer: kept) or None (keep as it is). Removed when a table it lists is gone (no table had the
    name at its CSN), or its CSN is below that table's horizon and no tag at that CSN holds it (`tagged`: D18). A
    table's manifest written after its last merge (by more than the clock margin) is current; others are compared
    with the catalog."""
    csn = _csn_of(directory)
    if csn is None:
        return None
    indexed = _listed(rt, directory)
    written = {name: mtime for name, _, mtime in rt.storage.root_entries(directory)}
    if indexed is None:  # no index: a writer died before its last file (or is writing it now); nothing complete
        newest = max((m for m in written.values() if m is not None), default=None)
        return "remove" if newest is None or time.time() - newest > ORPHAN_GRACE_SECONDS else None
    listed, writer = indexed
    if writer != owner:
        return "foreign"
    infos = _tables_at(rt, listed, csn)
    if any(info is None or (csn < h.of(info.id) and (csn, info.id) not in tagged) for info in infos):
        return "remove"
    for info in infos:
        assert info is not None
        written_at = written.get(manifests.manifest_name(info))
        if written_at is None:
            return "refresh"
        merged_at = last_merge.get(info.id)
        if merged_at is None or written_at > merged_at + CLOCK_MARGIN_SECONDS:
            continue
        with rt.catalog.read() as conn:
            current = {p.id for p in part_records.visible_parts(conn, info.id, None, csn)}
        if current != manifests.listed_part_ids(rt, directory, info):
            return "refresh"
    return None


def _tables_at(rt: Runtime, names: list[str], csn: int) -> list[TableInfo | None]:
    """The tables a manifest of `csn` lists, by the names they had there, as a read there resolves them (a table
    renamed since, a name another table has today: docs/DESIGN.md D27); None for a name no table had there."""
    found: list[TableInfo | None] = []
    with rt.catalog.read() as conn:
        for name in names:
            try:
                found.append(versions.table_at(conn, table_registry.get(conn, name), None, csn))
            except (TableNotFoundError, InvalidNameError):
                found.append(None)
    return found


def _refresh(rt: Runtime, directory: str) -> None:
    """Write a kept manifest dir again, planned by the read planner as any manifest is (manifests.py). A CSN that
    became unreadable meanwhile (a tag holding it dropped) is left as it is: the next run removes it."""
    listed = _listed(rt, directory)
    try:
        manifests.write_manifests(rt, _csn_of(directory) or 0, sorted(listed[0] if listed else []))
    except (SnapshotTooOldError, TagNotFoundError) as exc:
        log.info("manifests in %s left for the next vacuum: %s", directory, exc)


def _listed(rt: Runtime, directory: str) -> tuple[list[str], str | None] | None:
    return manifests.indexed_tables(rt, directory)


def _csn_of(directory: str) -> int | None:
    try:
        return int(directory.rpartition("/")[2][len("csn-"):])
    except ValueError:
        return None
