"""What every published table format shares (docs/DESIGN.md, D26 and D29): the interface a format implements
(`Format`), what one run did to one table (`TableOutcome`), and the change feed read from the airflow_txn
catalog: which CSNs a table's next run publishes, in which order and of which kind (`targets`), which part
files a set of parts stands for (`part_files`), and the committed versions of a table's schema (`schema_history`).

A format keeps its progress (the CSN published last) in the published table itself, set in the same commit of
that format as the files, so the airflow_txn catalog keeps no state for publishing, whatever the format.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_txn.catalog import commit_log, table_registry, table_versions
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.catalog.table_versions import VersionRow
from airflow_txn.core import versions
from airflow_txn.core.runtime import Runtime
from airflow_txn.model.csn import ROLLBACK_CSN
from airflow_txn.model.results import TagInfo
from airflow_txn.storage.root import part_file_paths

CSN_KEY = "airflow-txn.csn"
"""In a published version's commit metadata: the CSN whose version of the table it holds."""
KIND_KEY = "airflow-txn.kind"
"""In a published version's commit metadata: `commit` (a commit's changes), `refresh` (the same CSN's rows, other
files: a compaction), `catch-up` (the first version after history vacuum purged)."""
MERGES_KEY = "airflow-txn.merges"
"""The table's background merges (count and newest swap time) when the published files were last compared with
the visible ones: a run compares again only when they changed (a merge takes no CSN, D9)."""
WAREHOUSE_KEY = "airflow-txn.warehouse-id"
"""The warehouse that publishes a table (another warehouse's table is never written)."""


@dataclass(slots=True)
class TableOutcome:
    """What one run of one format did to one table."""

    published_csn: int
    """The table's progress after the run (0: nothing published)."""
    snapshots: int = 0
    """Versions (Iceberg snapshots, Delta commits) written by the run that changed files."""
    snapshot_id: int | None = None
    """The format's id of the table's current version: an Iceberg snapshot id, a Delta version."""
    tags: list[str] = field(default_factory=list)
    """Tags created or moved by the run (formats that have tags)."""
    commits: list[int] = field(default_factory=list)
    """The CSNs of the commits the run published (kind commit or catch-up), for the lag metric."""
    expired: int = 0
    """Versions the run expired because no read can ask for them any more (below the retention horizon)."""
    id_key: str = "iceberg_snapshot_id"
    """The name of `snapshot_id` in the run's report: iceberg_snapshot_id, delta_version."""

    def as_dict(self) -> dict[str, Any]:
        return {"published_csn": self.published_csn, "snapshots": self.snapshots, self.id_key: self.snapshot_id,
                "tags": list(self.tags), "expired": self.expired}


class Format(Protocol):
    """One table format commits are published to (Iceberg, Delta): each method is about one airflow_txn table,
    idempotent, and safe against another process publishing the same table at the same moment."""

    name: str
    """The format's name in publish= ("iceberg", "delta"), the metrics' `format` tag."""

    def publish_table(self, info: TableInfo, watermark: int, tags: Sequence[TagInfo] = ()) -> TableOutcome:
        """Catch the table's published version up to `watermark` (and its tags, where the format has tags)."""
        ...

    def progress(self, info: TableInfo) -> int:
        """The CSN published last (0: none); reads only, creates nothing."""
        ...

    def published_at(self, info: TableInfo, csn: int) -> dict[str, Any] | None:
        """What a reader of the format opens for the table's version at `csn` (its keys prefixed by the format's
        name, plus "csn": the commit whose version it is, and "published_csn"); None when nothing of the table was
        published at or below `csn`."""
        ...

    def drop(self, info: TableInfo) -> bool:
        """Forget the table's published versions (no data file is touched); False when there were none."""
        ...


def targets(commits: Sequence[int], published: int, horizon: int, refresh: bool) -> list[tuple[int, str]]:
    """The CSNs to publish, in order, with their kind: the table's commits above `published`; those below the
    horizon (vacuum purged their history) give way to the newest of them, read at the horizon; with no commit
    pending and `refresh` (the table's merges changed since they were last compared), the published CSN itself."""
    kept = [c for c in commits if c >= horizon]
    below = [c for c in commits if c < horizon]
    found = [(c, "commit") for c in kept]
    if below and (not kept or kept[0] != horizon):
        found.insert(0, (below[-1], "catch-up"))
    if not found and published and refresh:
        found = [(published, "refresh")]
    return found


def part_files(rt: Runtime, info: TableInfo, parts: Iterable[PartRow]) -> list[tuple[PartRow, str, str]]:
    """(part, path relative to the table's directory, path on the root's filesystem) of every file of `parts`."""
    storage = rt.storage
    found = []
    for part in parts:
        for relative in part_file_paths(part.path, part.files):
            found.append((part, relative, storage.path(info.directory, relative)))
    return found


def schema_history(rt: Runtime, info: TableInfo) -> dict[int, VersionRow]:
    """{version: row} of the table's committed schema versions, oldest first (none on a catalog without them): what
    a format replays to evolve its published table's schema."""
    with rt.catalog.read() as conn:
        if not table_versions.present(conn):
            return {}
        rows = table_versions.of_table(conn, info.id)
    return {v: rows[v] for v in sorted(rows)
            if rows[v].state.creation_csn is not None and rows[v].state.creation_csn != ROLLBACK_CSN}


def tables_of(rt: Runtime, names: Sequence[str] | None = None, snapshot: int | None = None) -> list[TableInfo]:
    """Every table with a committed version (None: dropped ones included, a table an open transaction creates left
    out, each by its committed name, not one a transaction is renaming it to), or the tables `names` name at
    `snapshot` (None: the readable watermark), as a read there resolves them (versions.table_at: a renamed table's
    old name names nothing after its rename, its new name names it; TableNotFoundError for a name with no table
    there; docs/DESIGN.md D27)."""
    with rt.catalog.read() as conn:
        if names is None:
            return table_registry.listed_tables(conn, dropped=True)
        at = rt.oracle.readable_csn(conn) if snapshot is None else snapshot
        return [versions.table_at(conn, table_registry.get(conn, name), None, at) for name in names]


def behind(rt: Runtime, fmt: Format, watermark: int) -> list[tuple[str, int, int]]:
    """(table, published CSN, last commit CSN) of every table whose last commit up to `watermark` is not
    published yet in `fmt` (what `airflow-txn doctor` reports); reads only, creates no published table."""
    late = []
    for info in tables_of(rt):
        with rt.catalog.read() as conn:
            last = commit_log.last_commit_csn(conn, info.id, watermark)
        if last is None:
            continue
        progress = fmt.progress(info)
        if progress < last:
            late.append((str(info.name), progress, last))
    return late
