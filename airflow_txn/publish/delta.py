"""Publishing a warehouse's tables as Delta tables through deltalake, over the part files already written (no data
is copied or rewritten; docs/DESIGN.md, D29).

Each airflow_txn table is a Delta table whose location is the table's own directory below the root
(`<root>/<ns>/<table>`, its log in `_delta_log/` there): every add action names a part file by its path relative
to that directory, exactly where the part was written. We chose this over a log under `<root>/.delta/` naming
the files by absolute URIs (what the Delta protocol allows for shallow clones): deltalake's kernel scan reads
those, but its `to_pyarrow_table`/`to_pyarrow_dataset` (and readers that go through its file list) join every
path onto the table's location and fail. airflow_txn's vacuum and recovery list only part files and write
directories (`p-...parquet`, `w-<hex>/`), so `_delta_log/` is never taken for an orphan.

The schema is the table's (its oldest committed one at creation; an added nullable column is a version of its own
before its CSN's, through deltalake's `alter.add_columns`; a rename, a drop or a type change needs column mapping or
type widening, which deltalake cannot write: PublishError naming the column), partitioned by the table's partition
columns: Delta readers fill a partition column
from each file's `partitionValues` (the files never hold them, as in the Hive layout). Types Delta lacks or
would read back wrong are refused (unsigned integers: Delta's byte/short/int/long are signed; nanosecond
timestamps: Delta's are microseconds).

One Delta version per committed CSN that touched the table, in CSN order, holding exactly the files visible at
that CSN: add actions for the parts created at the CSN, remove actions for those removed at it (found by their
CSNs in the steady state; otherwise by the difference between what is visible and the table's current files).
Each version's commit info carries `airflow-txn.csn`, `airflow-txn.kind` and `airflow-txn.merges`; the progress
(the CSN published last) is the version of the Delta application transaction `airflow-txn` (Delta's own
idempotent-writer record, a `txn` action written in the same commit). A compaction is a version with the same CSN
whose actions have `dataChange=false` (Delta's own meaning of a rearrangement). Delta has no tags: a tag's
version is `published(tag=...)`'s `delta_version`.

Every commit is made with no retry from the version the publisher read: deltalake's own retry would rebase an
append onto another publisher's version (the same files added twice); the loser reloads and finds the work done.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_txn import environment
from airflow_txn.catalog import commit_log, compaction_records, part_records
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.catalog.table_versions import VersionRow
from airflow_txn.core import retention
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import MissingDependencyError, PublishError, StorageError
from airflow_txn.model import evolution
from airflow_txn.model.partitioning import text_to_value
from airflow_txn.model.results import TagInfo
from airflow_txn.model.visibility import is_visible
from airflow_txn.publish import formats
from airflow_txn.publish.formats import CSN_KEY, KIND_KEY, MERGES_KEY, WAREHOUSE_KEY, TableOutcome
from airflow_txn.storage.location import Location
from airflow_txn.telemetry import logs

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, RemoveAction

log = logs.get_logger(__name__)

APP_ID = "airflow-txn"
"""The Delta application transaction whose version is the CSN published last (the publisher's progress)."""
LOG_DIR = "_delta_log"
DESCRIPTION = "published by airflow_txn warehouse "
"""The Delta table's description: this, then the id of the warehouse that publishes it (Delta refuses custom
keys in a table's configuration)."""
CONFIGURATION = {
    # time travel to any published CSN that airflow_txn can still read: never drop old log entries
    "delta.enableExpiredLogCleanup": "false",
    # a Delta VACUUM someone runs on the table must not delete airflow_txn's files (other versions, staged parts)
    "delta.deletedFileRetentionDuration": "interval 36500 days",
}
COMMIT_ATTEMPTS = 5
"""Delta commits a table's catch-up retries after losing to another publisher."""
HISTORY_PAGE = 20
"""Commits read back to find the newest one this publisher wrote (its merges signature)."""
_S3_OPTIONS = {"endpoint_url": "AWS_ENDPOINT_URL", "region": "AWS_REGION", "access_key_id": "AWS_ACCESS_KEY_ID",
               "secret_access_key": "AWS_SECRET_ACCESS_KEY", "session_token": "AWS_SESSION_TOKEN"}


def _require() -> None:
    try:
        import deltalake  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("Delta publishing needs deltalake: pip install 'airflow-txn[delta]'") from exc
    try:
        from deltalake.transaction import RemoveAction  # noqa: F401
    except ImportError as exc:  # an older deltalake: its transactions only add files
        raise MissingDependencyError("Delta publishing needs a deltalake whose create_write_transaction takes "
                                     "RemoveAction (1.6.6 or newer): pip install 'airflow-txn[delta]'") from exc


def storage_options(location: Location, given: Mapping[str, str]) -> dict[str, str]:
    """deltalake's object store options for the root: its S3 settings (from storage_options, else the AWS_*
    environment, which deltalake also reads itself); none for a local root."""
    if location.scheme != "s3":
        return {}
    endpoint = given.get("endpoint_url") or environment.aws_endpoint()
    region = given.get("region") or environment.aws_region()
    merged = {**given, "endpoint_url": endpoint, "region": region}
    options = {_S3_OPTIONS[k]: str(v) for k, v in merged.items() if k in _S3_OPTIONS and v}
    if endpoint and str(endpoint).startswith("http://"):
        options["AWS_ALLOW_HTTP"] = "true"
    return options


def delta_schema_check(info: TableInfo, arrow_schema: pa.Schema | None = None) -> pa.Schema:
    """The table's schema (or `arrow_schema`, one of its versions) as Delta takes it (timestamps in microseconds, a
    zoned one in UTC); PublishError naming a column whose type Delta lacks."""
    given = info.schema if arrow_schema is None else arrow_schema
    refused = []
    for f in given:
        if pa.types.is_unsigned_integer(f.type):
            refused.append(f"{f.name} is {f.type}, which Delta has no type for (its integers are signed); "
                           "use a signed integer or decimal")
        elif pa.types.is_timestamp(f.type) and f.type.unit == "ns":
            refused.append(f"{f.name} is {f.type}, which Delta has no type for (its timestamps are microseconds)")
    if refused:
        raise PublishError(f"table {info.name} cannot be published to Delta: column {'; '.join(refused)}")
    # Delta has two timestamps, both microseconds: `timestamp` (an instant, read back in UTC) and `timestamp_ntz`;
    # deltalake refuses a zone other than UTC, and the files' own units (s, ms) are read as microseconds
    fields = [f.with_type(pa.timestamp("us", "UTC" if f.type.tz else None)) if pa.types.is_timestamp(f.type) else f
              for f in given]
    return pa.schema([f.remove_metadata() for f in fields])


def partition_text(text: str | None, arrow_type: pa.DataType) -> str | None:
    """A partition value's canonical text (model/partitioning) as Delta serializes a partition value: the same
    for strings, integers, dates and booleans; a timestamp as `YYYY-MM-DD HH:MM:SS.ffffff` (in UTC when the
    column has a time zone)."""
    if text is None or not pa.types.is_timestamp(arrow_type):
        return text
    value = text_to_value(text, arrow_type).as_py()
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return str(value.strftime("%Y-%m-%d %H:%M:%S.%f"))


class DeltaPublisher:
    """Publishes one warehouse's tables as Delta tables (the Delta `Format`)."""

    name = "delta"

    def __init__(self, rt: Runtime, warehouse_id: str, options: Mapping[str, str] | None = None) -> None:
        _require()
        self.rt = rt
        self.warehouse_id = warehouse_id
        self.options = dict(options or {})

    # -- tables -----------------------------------------------------------------------------------------------
    def location(self, info: TableInfo) -> str:
        """The Delta table's URI: the table's directory below the root."""
        path = self.rt.storage.path(info.directory)
        scheme = self.rt.storage.location.scheme
        return f"file://{path}" if scheme == "file" else f"{scheme}://{path}"

    def _log_path(self, info: TableInfo) -> str:
        return self.rt.storage.path(info.directory, LOG_DIR)

    def _log_entries(self, info: TableInfo) -> Iterable[str]:
        try:
            listed = self.rt.storage.fs.get_file_info(pafs.FileSelector(self._log_path(info), allow_not_found=True))
        except (OSError, pa.ArrowException):
            return []
        return [entry.path for entry in listed if entry.path.endswith(".json")]

    def table(self, info: TableInfo, create: bool = True) -> DeltaTable | None:
        """The Delta table of `info` (created when missing and `create`); PublishError when it exists but is not
        this warehouse's."""
        from deltalake import DeltaTable

        if not any(True for _ in self._log_entries(info)):
            if not create:
                return None
            self._create(info)
        try:
            table = DeltaTable(self.location(info), storage_options=self.options or None)
        except Exception as exc:  # deltalake's TableNotFoundError, DeltaError
            raise PublishError(f"cannot open the Delta table of {info.name} at {self.location(info)}: {exc}") from exc
        owner = table.metadata().description or ""
        if owner != DESCRIPTION + self.warehouse_id:
            raise PublishError(f"Delta table {info.name} at {self.location(info)} is not published by this warehouse "
                               f"(its description is {owner!r}, this one is {self.warehouse_id})")
        return table

    def _create(self, info: TableInfo) -> None:
        from deltalake import DeltaTable, Schema
        from deltalake.transaction import CommitProperties

        live = [row for row in formats.schema_history(self.rt, info).values() if not row.dropped]
        # the oldest committed version: each published CSN then changes it to the one visible there, in CSN order
        first, partition_by = ((evolution.with_ids(live[0].schema), live[0].partition_by) if live
                               else (info.schema, info.partition_by))
        arrow_schema = delta_schema_check(info, first)
        try:
            schema = Schema.from_arrow(arrow_schema)
        except Exception as exc:  # deltalake's SchemaMismatchError / DeltaError for a type Delta lacks
            raise PublishError(f"table {info.name} cannot be published to Delta: {str(exc).splitlines()[0]}") from exc
        try:
            DeltaTable.create(self.location(info), schema, mode="ignore", partition_by=list(partition_by) or None,
                              name=str(info.name), description=DESCRIPTION + self.warehouse_id,
                              configuration=dict(CONFIGURATION), storage_options=self.options or None,
                              commit_properties=CommitProperties(custom_metadata={WAREHOUSE_KEY: self.warehouse_id}))
        except Exception as exc:  # another publisher created it at the same moment: use it
            if not any(True for _ in self._log_entries(info)):
                raise PublishError(f"cannot create the Delta table of {info.name}: {exc}") from exc

    # -- schemas ------------------------------------------------------------------------------------------------
    def _evolve(self, table: DeltaTable, info: TableInfo, history: Mapping[int, VersionRow], previous: int,
                csn: int) -> bool:
        """Make the Delta table's schema the one visible at `csn`, coming from the one visible at `previous` (0: the
        oldest, what the table was created with). Delta (deltalake 1.6) expresses an added nullable column (a
        version of its own, before the CSN's; readers of older files see null); a rename, a drop, a type change or
        a default needs Delta's column mapping or type widening, which deltalake cannot write: PublishError naming
        the column. Returns whether the schema changed."""
        if not history:
            return False
        before, after = _visible(history, previous), _visible(history, csn)
        if after is None or before is None or after.version == before.version:
            return False  # dropped at csn: the version empties the table under the schema it had
        if before.dropped:
            raise PublishError(f"table {info.name} cannot be published to Delta at CSN {csn}: it was dropped and "
                               "created again, and Delta cannot express a new table under the same location's log")
        added, refused = _changes(evolution.with_ids(before.schema), evolution.with_ids(after.schema))
        if refused:
            raise PublishError(f"table {info.name} cannot be published to Delta at CSN {csn}: column "
                               f"{'; '.join(refused)}: Delta expresses that only with column mapping "
                               "(delta.columnMapping.mode) or type widening, which deltalake cannot write; read it "
                               "through Iceberg or airflow_txn")
        have = set(table.schema().to_arrow().names)
        fields = [f for f in added if f.name not in have]  # a run that stopped after adding them
        if fields:
            from deltalake import Schema

            try:
                converted = Schema.from_arrow(delta_schema_check(info, pa.schema(fields))).fields
            except PublishError:
                raise
            except Exception as exc:  # a type Delta lacks
                raise PublishError(f"table {info.name} cannot be published to Delta: {str(exc).splitlines()[0]}"
                                   ) from exc
            from deltalake.transaction import CommitProperties

            # a version of its own (deltalake's write transaction keeps the table's schema), without the CSN or the
            # progress: the CSN's own version follows it
            table.alter.add_columns(list(converted), commit_properties=CommitProperties(
                custom_metadata={WAREHOUSE_KEY: self.warehouse_id, KIND_KEY: "schema"}, max_commit_retries=0))
        return True

    # -- publishing ---------------------------------------------------------------------------------------------
    def publish_table(self, info: TableInfo, watermark: int, tags: Sequence[TagInfo] = ()) -> TableOutcome:
        """Catch `info`'s Delta table up to `watermark`; idempotent. Delta has no tags: `tags` are not mirrored."""
        from deltalake.exceptions import CommitFailedError

        for _ in range(COMMIT_ATTEMPTS):
            table = self.table(info)
            assert table is not None
            try:
                return self._catch_up(table, info, watermark)
            except CommitFailedError as exc:  # another publisher wrote the next version: reload, find it done
                log.debug("Delta commit of %s lost to another publisher (%s); reloading", info.name, exc)
        raise PublishError(f"table {info.name}: {COMMIT_ATTEMPTS} Delta commits in a row lost to other writers; "
                           "try again")

    def _catch_up(self, table: DeltaTable, info: TableInfo, watermark: int) -> TableOutcome:
        from deltalake.transaction import RemoveAction

        published = int(table.transaction_version(APP_ID) or 0)
        with self.rt.catalog.read() as conn:
            commits = commit_log.table_commit_csns(conn, info.id, published, watermark)
            horizon = retention.table_horizon(conn, info.id)
            merges = compaction_records.merges_signature(conn, info.id)
        compared = _last_merges(table)
        targets = formats.targets(commits, published, horizon, refresh=merges != compared)
        outcome = TableOutcome(published, snapshot_id=int(table.version()), id_key="delta_version")
        steady = (published and compared == merges and horizon <= published
                  and all(kind == "commit" for _, kind in targets))
        current = {} if steady or not targets else _current_files(table)
        history = formats.schema_history(self.rt, info)
        previous = published
        for csn, kind in targets:
            if self._evolve(table, info, history, previous, max(csn, horizon)):
                table.update_incremental()
            if steady:
                with self.rt.catalog.read() as conn:
                    created, gone = part_records.changed_parts(conn, info.id, previous, csn)
                wanted_new = {rel: (part, path) for part, rel, path in formats.part_files(self.rt, info, created)}
                removed: list[tuple[str, dict[str, str | None], int | None]] = [
                    (rel, self._partition_values(info, part.partition), None)
                    for part, rel, _ in formats.part_files(self.rt, info, gone)]
            else:
                read_at = max(csn, horizon)  # below the horizon, files of that version may be gone (same rows)
                with self.rt.catalog.read() as conn:
                    parts = part_records.visible_parts(conn, info.id, None, read_at)
                wanted = {rel: (part, path) for part, rel, path in formats.part_files(self.rt, info, parts)}
                wanted_new = {rel: found for rel, found in wanted.items() if rel not in current}
                removed = [(rel, values, size) for rel, (size, values) in current.items() if rel not in wanted]
            previous = csn
            data_change = kind != "refresh"
            adds = self._adds(info, wanted_new, data_change)
            if not adds and not removed and csn == outcome.published_csn and merges == compared:
                continue
            removes = [RemoveAction(rel, data_change, int(time.time() * 1000), size, dict(values))
                       for rel, values, size in removed]
            self._commit(table, info, [*adds, *removes], csn, kind, merges)
            compared = merges
            for rel, _, _ in removed:
                current.pop(rel, None)
            current.update({add.path: (add.size, dict(add.partition_values)) for add in adds})
            outcome.published_csn = csn
            table.update_incremental()
            outcome.snapshot_id = int(table.version())
            if adds or removed:
                outcome.snapshots += 1
                if kind != "refresh":
                    outcome.commits.append(csn)
            log.debug("published %s to Delta at CSN %d (%s): +%d -%d files", info.name, csn, kind, len(adds),
                      len(removed))
        return outcome

    def _commit(self, table: DeltaTable, info: TableInfo, actions: Sequence[AddAction | RemoveAction], csn: int,
                kind: str, merges: str) -> None:
        """One Delta version of `actions` (none: the progress alone), carrying the CSN in its commit info and as
        the application transaction's version; no retry (CommitFailedError when another version got there)."""
        from deltalake.transaction import CommitProperties, PostCommitHookProperties, Transaction

        properties = CommitProperties(
            custom_metadata={CSN_KEY: str(csn), KIND_KEY: kind, MERGES_KEY: merges, WAREHOUSE_KEY: self.warehouse_id},
            app_transactions=[Transaction(APP_ID, csn)], max_commit_retries=0)
        table.create_write_transaction(list(actions), "append", table.schema(),
                                       partition_by=list(info.partition_by) or None, commit_properties=properties,
                                       post_commithook_properties=PostCommitHookProperties(
                                           create_checkpoint=True, cleanup_expired_logs=False))

    def _partition_values(self, info: TableInfo, partition: Mapping[str, str | None]) -> dict[str, str | None]:
        return {column: partition_text(partition.get(column), info.schema.field(column).type)
                for column in info.partition_by}

    def _adds(self, info: TableInfo, files: Mapping[str, tuple[PartRow, str]], data_change: bool) -> list[AddAction]:
        """An add action per file: its path relative to the table, its size and modification time (one HEAD per
        file), its part's partition values, and its row count (the part's, or the footer's for a part of several
        files) as Delta statistics."""
        from deltalake.transaction import AddAction

        if not files:
            return []
        fs = self.rt.storage.fs
        stats_of = {}
        for stat in fs.get_file_info([path for _, path in files.values()]):
            if stat.type != pafs.FileType.File:
                raise StorageError(f"table {info.name}: part file {stat.path} is missing")
            mtime = int(stat.mtime.timestamp() * 1000) if stat.mtime is not None else int(time.time() * 1000)
            stats_of[stat.path] = (int(stat.size or 0), mtime)
        made = []
        for relative, (part, path) in files.items():
            if len(part.files) <= 1:
                rows = part.row_count
            else:
                try:
                    rows = pq.read_metadata(path, filesystem=fs).num_rows
                except (OSError, pa.ArrowException) as exc:
                    raise StorageError(f"table {info.name}: cannot read the footer of {path}: {exc}") from exc
            size, mtime = stats_of[path]
            made.append(AddAction(relative, size, self._partition_values(info, part.partition), mtime, data_change,
                                  json.dumps({"numRecords": rows})))
        return made

    # -- reading what was published ----------------------------------------------------------------------------
    def published_at(self, info: TableInfo, csn: int) -> dict[str, Any] | None:
        """The Delta version holding `info`'s version at `csn` (None: nothing of it published at or below): the
        newest version of the newest CSN at or below `csn`."""
        table = self.table(info, create=False)
        if table is None:
            return None
        best: tuple[int, int] | None = None
        for entry in table.history():
            found = _csn_of(entry)
            if found is None or found > csn or "version" not in entry:
                continue
            key = (found, int(entry["version"]))
            if best is None or key > best:
                best = key
        if best is None:
            return None
        return {"delta_version": best[1], "delta_table": self.location(info), "csn": best[0],
                "published_csn": int(table.transaction_version(APP_ID) or 0)}

    def progress(self, info: TableInfo) -> int:
        """The CSN published last for `info` (0: none)."""
        table = self.table(info, create=False)
        return 0 if table is None else int(table.transaction_version(APP_ID) or 0)

    def drop(self, info: TableInfo) -> bool:
        """Delete `info`'s Delta log (no data file is touched): the next run creates the table again."""
        if self.table(info, create=False) is None:
            return False
        self.rt.storage.fs.delete_dir(self._log_path(info))
        return True


def _changes(before: pa.Schema, after: pa.Schema) -> tuple[list[pa.Field], list[str]]:
    """The columns `after` adds to `before` (matched by column id), and what Delta cannot express of the change."""
    old = {evolution.column_id(f): f for f in before}
    refused = []
    added = []
    for field in after:
        found = old.pop(evolution.column_id(field), None)
        if found is None:
            if evolution.default_of(field) is not None or not field.nullable:
                refused.append(f"{field.name!r} is added with a default (Delta readers would read older rows' as null)")
            else:
                added.append(field)
        elif found.name != field.name:
            refused.append(f"{found.name!r} is renamed to {field.name!r}")
        elif found.type != field.type:
            refused.append(f"{field.name!r} changes type from {found.type} to {field.type}")
    refused += [f"{f.name!r} is dropped" for f in old.values()]
    return added, refused


def _visible(history: Mapping[int, VersionRow], csn: int) -> VersionRow | None:
    """The version visible at `csn` (0: the oldest committed one, which a new Delta table is created with)."""
    if csn <= 0:
        live = [row for row in history.values() if not row.dropped]
        return live[0] if live else None
    seen = [row for row in history.values() if is_visible(row.state, None, csn)]
    return seen[-1] if seen else None


def _csn_of(entry: Mapping[str, Any]) -> int | None:
    text = entry.get(CSN_KEY)
    try:
        return None if text is None else int(text)
    except (TypeError, ValueError):
        return None


def _last_merges(table: DeltaTable) -> str | None:
    """The merges signature of the newest version this publisher wrote (None: none yet)."""
    for entry in table.history(HISTORY_PAGE):
        if MERGES_KEY in entry:
            return str(entry[MERGES_KEY])
    return None


def _current_files(table: DeltaTable) -> dict[str, tuple[int, dict[str, str | None]]]:
    """{path relative to the table: (size, partition values)} of the table's current version."""
    from urllib.parse import unquote

    actions = pa.table(table.get_add_actions(flatten=True))
    columns = [name for name in actions.column_names if name.startswith("partition.")]
    found = {}
    for row in actions.select(["path", "size_bytes", *columns]).to_pylist():
        values = {name[len("partition."):]: (None if row[name] is None else str(row[name])) for name in columns}
        found[unquote(row["path"])] = (int(row["size_bytes"]), values)
    return found


def behind(rt: Runtime, warehouse_id: str, options: Mapping[str, str], watermark: int) -> list[tuple[str, int, int]]:
    """(table, published CSN, last commit CSN) of every table whose last commit up to `watermark` is not
    published to Delta yet (what `airflow-txn doctor` reports); reads only, creates no Delta table."""
    return formats.behind(rt, DeltaPublisher(rt, warehouse_id, options), watermark)
