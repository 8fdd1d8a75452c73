"""Publishing a warehouse's tables to an Iceberg catalog through pyiceberg, over the part files already written
(no data is copied or rewritten; docs/DESIGN.md, D26).

Each airflow_txn table `ns.t` is the Iceberg table `ns.t`, its metadata under `<root>/.iceberg/ns/t`, its
schema the table's, its field ids the column ids the part files carry as Parquet field ids (and the name mapping
`schema.name-mapping.default` for files from before ids), partitioned by identity on the table's partition columns.
A CSN whose schema differs from the table's current Iceberg schema adds it and makes it current in the snapshot's
own Iceberg commit, so each snapshot is read under its CSN's schema (iceberg_schemas.py). The part files do not hold the
partition columns (they live in the Hive-style directory names); each published data file carries its part's
partition values, from which Iceberg readers fill an identity-partitioned column a file lacks (the Iceberg
spec's column projection rule, which pyiceberg, Spark and Trino implement).

One Iceberg snapshot per committed CSN that touched the table and changed its files, in CSN order, holding
exactly the files visible at that CSN; its summary carries `airflow-txn.csn`. In the steady state it adds the
files of the parts created at the CSN and removes those of the parts removed at it (found by their CSNs);
otherwise (first publish, merges since the last comparison, history vacuum purged) by the difference between
what is visible and the current snapshot's files. The table property `airflow-txn.csn` is the CSN published
last (set in the same Iceberg commit, so a commit that changed no file advances it too): the publisher's
progress, kept in the published table, so the airflow_txn catalog holds no state for publishing. A compaction
changes files without a CSN (D9): the next run finds the table's merges changed (`airflow-txn.merges`) and, if
the files of the published CSN differ, writes a snapshot with that same CSN (kind `refresh`), so a reader of the
newest snapshot of a CSN never meets a merged-away file once vacuum deletes it; tags get the same treatment.
Commits whose history vacuum purged (below the table's horizon) are skipped: the first one published after them
is read at the horizon. Snapshots older than the newest one at or below the table's horizon are expired (their
files may be gone); tagged ones stay.

Every snapshot commit asserts the snapshot it was built on, and pyiceberg's own commit retry (which would rebase
the same files onto another publisher's snapshot) is off for these tables: the loser of a race reloads the
table and finds the work done.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from sqlalchemy.engine import make_url

from airflow_txn import environment
from airflow_txn.catalog import commit_log, compaction_records, part_records, tag_records
from airflow_txn.catalog.database import libpq_timeouts
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.catalog.table_versions import VersionRow
from airflow_txn.core import retention
from airflow_txn.core.config import DEFAULT_CONNECT_TIMEOUT
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import MissingDependencyError, PublishError, StorageError
from airflow_txn.model import evolution
from airflow_txn.model.partitioning import text_to_value
from airflow_txn.model.results import TagInfo
from airflow_txn.model.secrets import mask_secrets
from airflow_txn.model.visibility import is_visible
from airflow_txn.publish import formats, iceberg_schemas
from airflow_txn.publish.formats import CSN_KEY as CSN_KEY
from airflow_txn.publish.formats import KIND_KEY as KIND_KEY
from airflow_txn.publish.formats import MERGES_KEY as MERGES_KEY
from airflow_txn.publish.formats import WAREHOUSE_KEY as WAREHOUSE_KEY
from airflow_txn.publish.formats import TableOutcome as TableOutcome
from airflow_txn.publish.formats import tables_of as tables_of
from airflow_txn.storage.location import Location
from airflow_txn.telemetry import logs

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.name_mapping import NameMapping
    from pyiceberg.table.update import TableRequirement, TableUpdate

log = logs.get_logger(__name__)

# The shared keys (publish/formats.py) as Iceberg uses them: CSN_KEY and KIND_KEY in a snapshot's summary, and
# CSN_KEY also as a table property, the CSN published last (the publisher's progress); MERGES_KEY and
# WAREHOUSE_KEY as table properties.
TAGS_MERGES_KEY = "airflow-txn.tags-merges"
"""Table property: the merges signature when the Iceberg tags' files were last checked (a merge may change them)."""
TABLE_KEY = "airflow-txn.table"
NAME_MAPPING_KEY = "schema.name-mapping.default"
"""Table property: Iceberg's name mapping, how readers match the columns of a file without field ids."""
CATALOG_NAME = "airflow_txn"
METADATA_DIR = ".iceberg"
"""Below the storage root: the Iceberg tables' metadata (never inside a table's directory, which vacuum lists)."""
OPEN_ATTEMPTS = 3
"""Opening a SQL catalog creates its tables when they are missing, which two processes may race for."""
COMMIT_ATTEMPTS = 5
"""Iceberg commits a table's catch-up retries after losing its compare-and-swap to another publisher."""
_S3_PROPERTIES = {"endpoint_url": "s3.endpoint", "region": "s3.region", "access_key_id": "s3.access-key-id",
                  "secret_access_key": "s3.secret-access-key", "session_token": "s3.session-token",
                  "force_virtual_addressing": "s3.force-virtual-addressing"}


def _require() -> None:
    try:
        import pyiceberg  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("Iceberg publishing needs pyiceberg: pip install 'airflow-txn[iceberg]'") from exc


def location_uri(location: Location, relative: str) -> str:
    """The URI other engines open `relative` (below the root) with: `file:///...` for a local root."""
    return file_uri(location, location.path(relative))


def file_uri(location: Location, path: str) -> str:
    """The URI of `path` on the root's filesystem."""
    return f"file://{path}" if location.scheme == "file" else f"{location.scheme}://{path}"


def catalog_properties(catalog_url: str, location: Location, storage_options: Mapping[str, str],
                       overrides: Mapping[str, str],
                       connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> dict[str, str]:
    """The pyiceberg catalog properties: a SQL catalog in the warehouse's own catalog database (`uri`), its
    default location below the root, the root's S3 settings for its FileIO; `overrides` replace any of them
    (`type`, `uri`, ... of another catalog; `name`: the catalog's name, default airflow_txn). A PostgreSQL `uri`
    carries the libpq options that bound a server that does not answer (`connect_timeout`, as the catalog's own
    engine: catalog/database.libpq_timeouts), since pyiceberg's SQL catalog builds its engine from the URI alone."""
    properties = {"type": "sql", "uri": catalog_url, "warehouse": location_uri(location, METADATA_DIR)}
    if location.scheme == "s3":
        endpoint = storage_options.get("endpoint_url") or environment.aws_endpoint()
        region = storage_options.get("region") or environment.aws_region()
        merged = {**storage_options, "endpoint_url": endpoint, "region": region}
        properties["py-io-impl"] = "pyiceberg.io.pyarrow.PyArrowFileIO"
        properties.update({_S3_PROPERTIES[k]: str(v) for k, v in merged.items() if k in _S3_PROPERTIES and v})
    properties.update(overrides)
    if properties.get("type") == "sql" and properties.get("uri"):
        properties["uri"] = bounded_uri(properties["uri"], connect_timeout)
    return properties


def bounded_uri(uri: str, connect_timeout: float) -> str:
    """`uri` with the libpq timeouts it does not set itself (none for another database or driver)."""
    timeouts = libpq_timeouts(uri, connect_timeout)
    if not timeouts:
        return uri
    url = make_url(uri)
    return url.update_query_dict({k: str(v) for k, v in timeouts.items()}).render_as_string(hide_password=False)


def open_catalog(properties: Mapping[str, str]) -> Catalog:
    """The pyiceberg catalog the properties name (its SQL tables are created on first use)."""
    _require()
    from pyiceberg.catalog import load_catalog

    given = dict(properties)
    name = given.pop("name", CATALOG_NAME)
    for attempt in range(OPEN_ATTEMPTS):
        try:
            return load_catalog(name, **given)
        except Exception as exc:  # pyiceberg raises ValueError, SQLAlchemy errors, ...: one typed error
            if "already exists" in str(exc) and attempt + 1 < OPEN_ATTEMPTS:
                continue  # another process created the SQL catalog's tables at the same moment: they are there now
            raise PublishError(f"cannot open the Iceberg catalog {name!r} (type {given.get('type')}{_at(given)}): "
                               f"{mask_secrets(str(exc))}") from exc
    raise AssertionError("unreachable")


def _at(properties: Mapping[str, str]) -> str:
    """", at <uri>" for a message: the catalog's URI without its query (the timeouts added), the password masked."""
    uri = properties.get("uri")
    if not uri:
        return ""
    try:
        shown = make_url(uri).set(query={}).render_as_string(hide_password=True)
    except Exception:  # not a SQLAlchemy URL (another catalog type's uri): masked as text
        shown = uri
    return f", at {mask_secrets(shown)}"


def identifier(info: TableInfo) -> tuple[str, str]:
    return (info.name.namespace, info.name.table)


class IcebergPublisher:
    """Publishes one warehouse's tables to `catalog` (the Iceberg `Format`)."""

    name = "iceberg"

    def __init__(self, rt: Runtime, catalog: Catalog, warehouse_id: str) -> None:
        self.rt = rt
        self.catalog = catalog
        self.warehouse_id = warehouse_id

    # -- tables -----------------------------------------------------------------------------------------------
    def table(self, info: TableInfo, create: bool = True) -> Table | None:
        """The Iceberg table of `info` (created when missing and `create`); PublishError when it exists but is
        not this warehouse's."""
        from pyiceberg.exceptions import NoSuchTableError

        try:
            table = self.catalog.load_table(identifier(info))
        except NoSuchTableError:
            if not create:
                return None
            table = self._create(info)
        owner = table.properties.get(WAREHOUSE_KEY)
        if owner != self.warehouse_id:
            raise PublishError(f"Iceberg table {info.name} is not published by this warehouse "
                               f"({WAREHOUSE_KEY} = {owner!r}, this one is {self.warehouse_id}); drop it or "
                               "publish to another Iceberg catalog")
        return table

    def _create(self, info: TableInfo) -> Table:
        """The Iceberg table of `info`, its schema the table's oldest committed one (field ids its column ids: each
        published CSN then sets the schema visible there, in CSN order) and the name mapping of its versions."""
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError

        history = formats.schema_history(self.rt, info)
        arrow_schema, partition_by = info.schema, info.partition_by
        live = [row for row in history.values() if not row.dropped]
        if live:
            arrow_schema, partition_by = evolution.with_ids(live[0].schema), live[0].partition_by
        ice_schema = iceberg_schemas.to_iceberg(arrow_schema, str(info.name))
        spec = iceberg_schemas.partition_spec(ice_schema, partition_by)
        namespace = info.name.namespace
        try:
            self.catalog.create_namespace(namespace)
        except Exception as exc:  # NamespaceAlreadyExistsError, or the SQL catalog's IntegrityError in a race
            if not isinstance(exc, NamespaceAlreadyExistsError) and not self.catalog.namespace_exists(namespace):
                raise
        mapping = self._mapping(info, history, None) or iceberg_schemas.name_mapping([ice_schema])
        properties = {"format-version": "2", WAREHOUSE_KEY: self.warehouse_id, TABLE_KEY: str(info.name),
                      # a lost compare-and-swap must reach publish_table, which recomputes the snapshot from the
                      # table as it now is; pyiceberg's own retry would append the same files a second time
                      "commit.retry.num-retries": "0",
                      NAME_MAPPING_KEY: mapping.model_dump_json()}
        location = location_uri(self.rt.storage.location, f"{METADATA_DIR}/{namespace}/{info.name.table}")
        try:
            return self.catalog.create_table(identifier(info), schema=ice_schema, partition_spec=spec,
                                             location=location, properties=properties)
        except Exception as exc:  # TableAlreadyExistsError, or an IntegrityError: another publisher made it meanwhile
            if not isinstance(exc, TableAlreadyExistsError) and not self.catalog.table_exists(identifier(info)):
                raise
            return self.catalog.load_table(identifier(info))

    # -- schemas ------------------------------------------------------------------------------------------------
    def _mapping(self, info: TableInfo, history: Mapping[int, VersionRow], csn: int | None) -> NameMapping | None:
        """The name mapping of the versions committed at or below `csn` (None: every committed one); None when the
        catalog has no versions."""
        schemas = [iceberg_schemas.to_iceberg(evolution.with_ids(row.schema), str(info.name))
                   for row in history.values()
                   if not row.dropped and (csn is None or int(row.state.creation_csn or 0) <= csn)]
        return iceberg_schemas.name_mapping(schemas) if schemas else None

    def _target(self, info: TableInfo, history: Mapping[int, VersionRow], csn: int) -> _Target:
        """The schema and partitioning visible at `csn` (dropped: none), and the Iceberg schemas of the versions
        before it since the table was last created (the ones a type change is checked against: a table dropped and
        created again gives its ids to other columns)."""
        if not history:  # a catalog without versions: the one schema
            return _Target(info.schema, info.partition_by, [])
        seen = [row for row in history.values() if is_visible(row.state, None, csn)]
        if not seen or seen[-1].dropped:
            return _Target(None, (), [])
        row = seen[-1]
        earlier: list[VersionRow] = []
        for other in history.values():
            if other.version >= row.version:
                break
            earlier = [] if other.dropped else [*earlier, other]
        return _Target(evolution.with_ids(row.schema), row.partition_by,
                       [iceberg_schemas.to_iceberg(evolution.with_ids(o.schema), str(info.name)) for o in earlier])

    def _schema_updates(self, table: Table, info: TableInfo, target: _Target,
                        ) -> tuple[tuple[TableUpdate, ...], tuple[TableRequirement, ...], Schema, PartitionSpec]:
        """The updates that make the table's current schema and default spec those of `target` (with its ids), the
        requirements they rest on, and the schema and spec that files of the snapshot then carry."""
        from pyiceberg.schema import Schema
        from pyiceberg.table.update import (
            AddPartitionSpecUpdate,
            AddSchemaUpdate,
            AssertCurrentSchemaId,
            AssertDefaultSpecId,
            SetCurrentSchemaUpdate,
            SetDefaultSpecUpdate,
        )

        metadata = table.metadata
        current, spec = table.schema(), table.spec()
        if target.schema is None:  # dropped: the snapshot empties the table under the schema it had
            return (), (), current, spec
        name = str(info.name)
        wanted = iceberg_schemas.to_iceberg(target.schema, name)
        updates: list[TableUpdate] = []
        requirements: list[TableRequirement] = []
        schema = current
        if not iceberg_schemas.same_schema(current, wanted):
            if any(iceberg_schemas.same_schema(current, earlier) for earlier in target.earlier):
                iceberg_schemas.check_promotions(current, wanted, name)  # else other columns had these ids
            requirements.append(AssertCurrentSchemaId.model_validate({"current-schema-id": metadata.current_schema_id}))
            existing = next((s for s in metadata.schemas if iceberg_schemas.same_schema(s, wanted)), None)
            if existing is None:
                schema = Schema(*wanted.fields, schema_id=1 + max(s.schema_id for s in metadata.schemas))
                updates += [AddSchemaUpdate(schema=schema), SetCurrentSchemaUpdate.model_validate({"schema-id": -1})]
            else:
                schema = existing
                updates.append(SetCurrentSchemaUpdate.model_validate({"schema-id": existing.schema_id}))
        wanted_spec = iceberg_schemas.partition_spec(schema, target.partition_by)
        if iceberg_schemas.spec_sources(wanted_spec) != iceberg_schemas.spec_sources(spec):
            requirements.append(AssertDefaultSpecId.model_validate({"default-spec-id": metadata.default_spec_id}))
            existing_spec = next((s for s in metadata.partition_specs if iceberg_schemas.spec_sources(s)
                                  == iceberg_schemas.spec_sources(wanted_spec)), None)
            if existing_spec is None:
                last = int(metadata.last_partition_id or iceberg_schemas.PARTITION_FIELD_BASE - 1)
                spec = iceberg_schemas.partition_spec(schema, target.partition_by,
                                                      1 + max(s.spec_id for s in metadata.partition_specs), last + 1)
                updates += [AddPartitionSpecUpdate(spec=spec), SetDefaultSpecUpdate.model_validate({"spec-id": -1})]
            else:
                spec = existing_spec
                updates.append(SetDefaultSpecUpdate.model_validate({"spec-id": existing_spec.spec_id}))
        return tuple(updates), tuple(requirements), schema, spec

    def _check_ids(self, table: Table, info: TableInfo, history: Mapping[int, VersionRow], published: int) -> None:
        """PublishError when the Iceberg table gives columns other ids than the warehouse's (it was published before
        the Iceberg ids were the column ids, and its columns are nested or it was created otherwise)."""
        if not published:
            return
        target = self._target(info, history, published)
        if target.schema is None:
            return
        ours = iceberg_schemas.to_iceberg(target.schema, str(info.name))
        differ = iceberg_schemas.foreign_ids(table.schema(), ours)
        if differ:
            raise PublishError(f"Iceberg table {info.name} gives column(s) {differ} other field ids than the "
                               "warehouse's column ids (it was published before Iceberg ids were the column ids); "
                               f"run `airflow-txn republish {info.name}` (or wh.republish) once to publish it again "
                               "with them (its snapshot ids change)")

    # -- publishing ---------------------------------------------------------------------------------------------
    def publish_table(self, info: TableInfo, watermark: int, tags: Sequence[TagInfo] = ()) -> TableOutcome:
        """Catch `info`'s Iceberg table up to `watermark` (and its tags); idempotent."""
        from pyiceberg.exceptions import CommitFailedException

        outcome: TableOutcome | None = None
        for _ in range(COMMIT_ATTEMPTS):
            table = self.table(info)
            assert table is not None
            try:
                outcome = self._catch_up(table, info, watermark)
                outcome.tags = self._sync_tags(info, tags)
                outcome.expired = self._expire(info)
                break
            except CommitFailedException as exc:  # another publisher advanced the table: reload, find it done
                log.debug("Iceberg commit of %s lost to another publisher (%s); reloading", info.name, exc)
        if outcome is None:
            raise PublishError(f"table {info.name}: {COMMIT_ATTEMPTS} Iceberg commits in a row lost to other "
                               "writers; try again")
        return outcome

    def _catch_up(self, table: Table, info: TableInfo, watermark: int) -> TableOutcome:
        published = int(table.properties.get(CSN_KEY, "0"))
        with self.rt.catalog.read() as conn:
            commits = commit_log.table_commit_csns(conn, info.id, published, watermark)
            horizon = retention.table_horizon(conn, info.id)
            merges = compaction_records.merges_signature(conn, info.id)
        history = formats.schema_history(self.rt, info)
        self._check_ids(table, info, history, published)
        compared = table.properties.get(MERGES_KEY)
        targets = formats.targets(commits, published, horizon, refresh=merges != compared)
        outcome = TableOutcome(published, snapshot_id=_snapshot_id(table))
        # the steady state: the published snapshot holds exactly the files visible at the published CSN (no merge
        # since they were compared, no history purged above it), so each commit's snapshot is the parts it created
        # and removed, found by their CSNs, without listing the table's other parts or reading its manifests
        steady = bool(published and compared == merges and horizon <= published and targets
                      and all(kind == "commit" for _, kind in targets))
        files = _Files(info, {v: evolution.with_ids(r.schema) for v, r in history.items()})
        current = {} if steady or not targets else _current_files(table)
        previous = published
        for csn, kind in targets:
            read_at = max(csn, horizon)  # below the horizon, files of that version may be gone (same rows)
            if steady:
                with self.rt.catalog.read() as conn:
                    created, gone = part_records.changed_parts(conn, info.id, previous, csn)
                added = self._wanted(info, created)
                removed: list[DataFile] | dict[str, tuple[PartRow, str]] = self._wanted(info, gone)
            else:
                with self.rt.catalog.read() as conn:
                    parts = part_records.visible_parts(conn, info.id, None, read_at)
                wanted = self._wanted(info, parts)
                added = {uri: found for uri, found in wanted.items() if uri not in current}
                removed = [data_file for uri, data_file in current.items() if uri not in wanted]
            previous = csn
            target = self._target(info, history, read_at)
            updates, requirements, schema, spec = self._schema_updates(table, info, target)
            mapping = self._mapping(info, history, read_at)
            properties = {CSN_KEY: str(csn), MERGES_KEY: merges}
            if mapping is not None and table.properties.get(NAME_MAPPING_KEY) != mapping.model_dump_json():
                properties[NAME_MAPPING_KEY] = mapping.model_dump_json()
            files.mapping = mapping
            if not added and not removed and not updates:
                if csn != outcome.published_csn or merges != compared or len(properties) > 2:
                    with table.transaction() as tx:
                        tx.set_properties(properties)
                    table = self.catalog.load_table(identifier(info))
                    outcome.published_csn = csn
                compared = merges
                continue
            if isinstance(removed, dict):  # rebuilt from their footers: Iceberg matches a removed file by its path
                removed = self._data_files(table, info, [(uri, *removed[uri]) for uri in removed], files,
                                           table.schema(), table.spec())
            new_files = self._commit_change(table, info, [(uri, *added[uri]) for uri in added], removed,
                                            {CSN_KEY: str(csn), KIND_KEY: kind}, files, properties=properties,
                                            schema_change=(updates, requirements, schema, spec))
            compared = merges
            table = self.catalog.load_table(identifier(info))
            if not steady:  # the files of the new snapshot, without reading its manifests back
                for data_file in removed:
                    current.pop(data_file.file_path, None)
                current.update(new_files)
            outcome.published_csn = csn
            outcome.snapshots += 1
            if kind != "refresh":
                outcome.commits.append(csn)
            outcome.snapshot_id = _snapshot_id(table)
            log.debug("published %s at CSN %d (%s): +%d -%d files%s", info.name, csn, kind, len(added), len(removed),
                      ", a new schema" if updates else "")
        return outcome

    def _expire(self, info: TableInfo) -> int:
        """Expire the table's snapshots that no read of the warehouse can ask for any more: older than the newest
        snapshot at or below its retention horizon, whose files vacuum may have deleted. A snapshot a tag or a
        branch points at is kept (Iceberg protects it; so does vacuum, for a warehouse tag's files). Metadata
        only: no file is touched (the part files are vacuum's). Returns how many snapshots expired."""
        with self.rt.catalog.read() as conn:
            horizon = retention.table_horizon(conn, info.id)
        if horizon <= 0:
            return 0
        table = self.catalog.load_table(identifier(info))
        keep = snapshot_at(table, horizon)
        if keep is None:
            return 0
        base = table.snapshot_by_id(keep)
        assert base is not None
        protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
        expired = [int(s.snapshot_id) for s in table.snapshots()
                   if int(s.sequence_number or 0) < int(base.sequence_number or 0) and s.snapshot_id not in protected]
        if expired:
            table.maintenance.expire_snapshots().by_ids(expired).commit()
            log.debug("expired %d Iceberg snapshot(s) of %s below its horizon %d", len(expired), info.name, horizon)
        return len(expired)

    def _commit_files(self, table: Table, info: TableInfo, current: Mapping[str, DataFile],
                      wanted: Mapping[str, tuple[PartRow, str]], summary: dict[str, str], files: _Files,
                      branch: str = "main", schema_id: int | None = None) -> dict[str, DataFile]:
        """One snapshot on `branch` turning the files `current` into `wanted` (nothing is rewritten: files are
        only added and removed), with `summary`, under the schema `schema_id` (None: the current one)."""
        added = [(uri, *wanted[uri]) for uri in wanted if uri not in current]
        removed = [data_file for uri, data_file in current.items() if uri not in wanted]
        return self._commit_change(table, info, added, removed, summary, files, branch, schema_id=schema_id)

    def _commit_change(self, table: Table, info: TableInfo, added: Sequence[tuple[str, PartRow, str]],
                       removed: Sequence[DataFile], summary: dict[str, str], files: _Files, branch: str = "main",
                       properties: Mapping[str, str] | None = None,
                       schema_change: tuple[tuple[TableUpdate, ...], tuple[TableRequirement, ...], Schema,
                                            PartitionSpec] | None = None,
                       schema_id: int | None = None) -> dict[str, DataFile]:
        """One snapshot on `branch` adding the files `added` and removing `removed` (Iceberg matches a removed
        DataFile by its path), in one Iceberg commit with `schema_change` (the updates making the schema and spec
        current that the snapshot is read under) and `properties`; `schema_id`: the snapshot is read under that
        older schema (a tag's snapshot on a branch), the table's current schema staying as it is. Returns the added
        files' DataFiles by URI."""
        updates, requirements, schema, spec = schema_change or ((), (), table.schema(), table.spec())
        before: tuple[TableUpdate, ...] = ()
        after: tuple[TableUpdate, ...] = ()
        older = next((s for s in table.metadata.schemas if s.schema_id == schema_id), None)
        if older is not None and older.schema_id != table.metadata.current_schema_id:
            schema = older
            before, after = _current_schema(older.schema_id), _current_schema(table.metadata.current_schema_id)
        new_files = self._data_files(table, info, added, files, schema, spec)
        with table.transaction() as tx:
            # the schema the snapshot is read under is the transaction's current one when the snapshot is made:
            # pyiceberg's UpdateSchema stages its changes this way, but gives columns ids of its own (ours: the files')
            if updates or before:
                tx._apply((*updates, *before), requirements)
            update = tx.update_snapshot(snapshot_properties=summary, branch=branch)
            if removed:
                with update.overwrite() as overwrite:
                    for data_file in removed:
                        overwrite.delete_data_file(data_file)
                    for data_file in new_files:
                        overwrite.append_data_file(data_file)
            else:
                with update.fast_append() as append:
                    for data_file in new_files:
                        append.append_data_file(data_file)
            if after:
                tx._apply(after)
            if properties:
                tx.set_properties(dict(properties))
        return dict(zip([uri for uri, _, _ in added], new_files, strict=True))

    def _wanted(self, info: TableInfo, parts: Iterable[PartRow]) -> dict[str, tuple[PartRow, str]]:
        """{URI: (part, path on the root's filesystem)} of every file of `parts`."""
        storage = self.rt.storage
        wanted = {}
        for part in parts:
            for path in storage.part_paths(info.directory, part.path, part.files):
                wanted[file_uri(storage.location, path)] = (part, path)
        return wanted

    def _data_files(self, table: Table, info: TableInfo, files: Sequence[tuple[str, PartRow, str]], known: _Files,
                    schema: Schema, spec: PartitionSpec) -> list[DataFile]:
        """An Iceberg DataFile per new file, for a snapshot read under `schema` and `spec`: its size, its footer's row
        count and column statistics (matched to column ids by the version the part was written under; a widened
        column's bounds are left out, they are in the older type), its part's partition values (one HEAD and one
        footer read per file). PublishError for a file without field ids that the name mapping would misread."""
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.partitioning import partition_record_value
        from pyiceberg.typedef import Record

        fs = self.rt.storage.fs
        sizes = {}
        for stat in fs.get_file_info([path for _, _, path in files]):
            if stat.type != pafs.FileType.File:
                raise StorageError(f"table {info.name}: part file {stat.path} is missing")
            sizes[stat.path] = int(stat.size or 0)
        made = []
        for uri, part, path in files:
            try:
                metadata = pq.read_metadata(path, filesystem=fs)
            except (OSError, pa.ArrowException) as exc:
                raise StorageError(f"table {info.name}: cannot read the footer of {uri}: {exc}") from exc
            written = known.written(part.schema_version)
            stats = known.statistics(table, metadata, written, schema, uri)
            values = []
            for partition_field in spec.fields:
                column = schema.find_field(partition_field.source_id).name
                text = part.partition.get(column)
                value = None if text is None else text_to_value(text, written.field(column).type).as_py()
                values.append(partition_record_value(partition_field, value, schema))
            data_file = DataFile.from_args(
                content=DataFileContent.DATA, file_path=uri, file_format=FileFormat.PARQUET,
                partition=Record(*values), file_size_in_bytes=sizes[path], sort_order_id=None,
                spec_id=spec.spec_id, equality_ids=None, key_metadata=None, **stats)
            data_file.spec_id = spec.spec_id  # what a later snapshot's delete needs
            made.append(data_file)
        return made

    # -- tags ---------------------------------------------------------------------------------------------------
    def _sync_tags(self, info: TableInfo, tags: Sequence[TagInfo]) -> list[str]:
        """Make the table's Iceberg tags the warehouse's tags that hold it, each at the newest snapshot of the
        newest CSN at or below the tag's; remove Iceberg tags no warehouse tag names (the published table is the
        warehouse's: its tags mirror the warehouse's). A tag's snapshot is checked against the files its CSN
        sees now when the tag is new or moves, and when the table's merges changed since tags were last checked:
        a merge of parts the tag sees (vacuum keeps the merged part for the tag, not the sources) gets a snapshot
        of its own, with the same CSN, made on a short-lived branch. Returns the tags created or moved."""
        from pyiceberg.table.refs import SnapshotRefType

        table = self.catalog.load_table(identifier(info))
        existing = {name: ref.snapshot_id for name, ref in table.metadata.refs.items()
                    if ref.snapshot_ref_type == SnapshotRefType.TAG}
        with self.rt.catalog.read() as conn:
            merges = compaction_records.merges_signature(conn, info.id)
            holding = {row.name for row in tag_records.all_tags(conn) if info.id in row.table_ids}
        recheck = table.properties.get(TAGS_MERGES_KEY) != merges
        wanted = {}
        for tag in tags:
            if tag["name"] not in holding:  # by table id: a tag lists names at its CSN, a rename since changes it
                continue
            snapshot = snapshot_at(table, int(tag["csn"]))
            if snapshot is None:
                continue
            if recheck or existing.get(tag["name"]) != snapshot:
                snapshot = self._tag_snapshot(info, tag["name"], int(tag["csn"]), snapshot)
                table = self.catalog.load_table(identifier(info))
            wanted[tag["name"]] = snapshot
        tagged = {name: ref.snapshot_id for name, ref in table.metadata.refs.items()
                  if ref.snapshot_ref_type == SnapshotRefType.TAG}  # _tag_snapshot may have set some
        moved = sorted(name for name, sid in wanted.items() if existing.get(name) != sid)
        existing = tagged
        changed = sorted(name for name, sid in wanted.items() if existing.get(name) != sid)
        dropped = sorted(name for name in existing if name not in wanted)
        if changed or dropped:
            manage = table.manage_snapshots()
            for name in dropped + [n for n in changed if n in existing]:
                manage = manage.remove_tag(name)
            manage.commit()
            if changed:
                manage = self.catalog.load_table(identifier(info)).manage_snapshots()
                for name in changed:
                    manage = manage.create_tag(wanted[name], name)
                manage.commit()
        if recheck:
            table = self.catalog.load_table(identifier(info))
            with table.transaction() as tx:
                tx.set_properties({TAGS_MERGES_KEY: merges})
        return moved

    def _tag_snapshot(self, info: TableInfo, name: str, csn: int, snapshot_id: int) -> int:
        """`snapshot_id` when its files are those visible at `csn` now, else a new snapshot holding them (the same
        rows after a merge), made on a branch of its own that is removed once the tag holds the snapshot."""
        table = self.catalog.load_table(identifier(info))
        current = {task.file.file_path: task.file for task in table.scan(snapshot_id=snapshot_id).plan_files()}
        with self.rt.catalog.read() as conn:
            parts = part_records.visible_parts(conn, info.id, None, csn)
        wanted = self._wanted(info, parts)
        if set(current) == set(wanted):
            return snapshot_id
        branch = f"airflow-txn-tag-{name}"  # its snapshot is read under the tagged one's schema
        manage = table.manage_snapshots()
        if branch in table.metadata.refs:  # left by a run that stopped half way
            manage = manage.remove_branch(branch)
        manage.create_branch(snapshot_id, branch).commit()
        table = self.catalog.load_table(identifier(info))
        found = table.snapshot_by_id(snapshot_id)
        summary = found.summary.additional_properties if found is not None and found.summary is not None else {}
        history = formats.schema_history(self.rt, info)
        files = _Files(info, {v: evolution.with_ids(r.schema) for v, r in history.items()},
                       self._mapping(info, history, None))
        self._commit_files(table, info, current, wanted, {CSN_KEY: summary.get(CSN_KEY, str(csn)), KIND_KEY: "refresh"},
                           files, branch=branch, schema_id=None if found is None else found.schema_id)
        table = self.catalog.load_table(identifier(info))
        made = int(table.metadata.refs[branch].snapshot_id)
        # the tag is set before the branch goes, so the snapshot is never without a reference
        if name in table.metadata.refs:
            table.manage_snapshots().remove_tag(name).commit()
        self.catalog.load_table(identifier(info)).manage_snapshots().create_tag(made, name).commit()
        self.catalog.load_table(identifier(info)).manage_snapshots().remove_branch(branch).commit()
        log.debug("tag %s of %s: a snapshot of the files CSN %d sees after a merge", name, info.name, csn)
        return made

    # -- reading what was published ----------------------------------------------------------------------------
    def published_at(self, info: TableInfo, csn: int) -> dict[str, Any] | None:
        """The Iceberg snapshot holding `info`'s version at `csn` (None: nothing of it published at or below)."""
        table = self.table(info, create=False)
        if table is None:
            return None
        found = snapshot_at(table, csn)
        if found is None:
            return None
        snapshot = table.snapshot_by_id(found)
        assert snapshot is not None
        return {"iceberg_snapshot_id": found, "iceberg_table": str(info.name),
                "csn": _snapshot_csn(snapshot.summary.additional_properties if snapshot.summary else {}),
                "metadata_location": table.metadata_location,
                "published_csn": int(table.properties.get(CSN_KEY, "0"))}

    def progress(self, info: TableInfo) -> int:
        """The CSN published last for `info` (0: none)."""
        table = self.table(info, create=False)
        return 0 if table is None else int(table.properties.get(CSN_KEY, "0"))

    def drop(self, info: TableInfo) -> bool:
        """Drop `info`'s Iceberg table from the catalog (its metadata files stay; no data file is touched)."""
        from pyiceberg.exceptions import NoSuchTableError

        if self.table(info, create=False) is None:
            return False
        try:
            self.catalog.drop_table(identifier(info))
        except NoSuchTableError:
            return False
        return True


def _current_schema(schema_id: int) -> tuple[TableUpdate, ...]:
    from pyiceberg.table.update import SetCurrentSchemaUpdate

    return (SetCurrentSchemaUpdate.model_validate({"schema-id": schema_id}),)


@dataclass(slots=True)
class _Target:
    """A table's schema and partitioning at one CSN (schema None: dropped there), and the Iceberg schemas of its
    versions before it since the table was last created."""

    schema: pa.Schema | None
    partition_by: tuple[str, ...]
    earlier: list[Schema]


@dataclass(slots=True)
class _Files:
    """What a run knows to describe a table's part files to Iceberg: the schemas its parts were written under and
    the name mapping of the snapshot being written."""

    info: TableInfo
    versions: dict[int, pa.Schema]
    mapping: NameMapping | None = None

    def written(self, version: int) -> pa.Schema:
        """The schema (with ids) a part of `version` was written under (a catalog without versions: the table's)."""
        return self.versions.get(version, self.info.schema)

    def statistics(self, table: Table, metadata: pq.FileMetaData, written: pa.Schema, schema: Schema,
                   uri: str) -> dict[str, Any]:
        """The file's Iceberg statistics under `schema`: computed by the ids of the version it was written under (its
        columns' names then, which its footer's paths are), kept for the columns `schema` has, bounds only where the
        type did not change."""
        from pyiceberg.io.pyarrow import (
            compute_statistics_plan,
            data_file_statistics_from_parquet_metadata,
            parquet_path_to_id_mapping,
        )
        from pyiceberg.schema import index_by_id

        if self.mapping is not None:
            misread = iceberg_schemas.unmatched_names(metadata.schema.to_arrow_schema(),
                                                      {f.name: evolution.column_id(f) or 0 for f in written},
                                                      self.mapping)
            if misread:
                raise PublishError(f"table {self.info.name}: the file {uri} has no Parquet field ids and its column(s) "
                                   f"{misread} are other columns under the table's name mapping (names reused after "
                                   "a rename); Iceberg readers would read them wrong")
        empty: dict[str, Any] = {"record_count": metadata.num_rows, "column_sizes": {}, "value_counts": {},
                                 "null_value_counts": {}, "nan_value_counts": {}, "lower_bounds": {},
                                 "upper_bounds": {}, "split_offsets": []}
        try:
            file_schema = iceberg_schemas.to_iceberg(written, str(self.info.name))
            found: dict[str, Any] = data_file_statistics_from_parquet_metadata(
                parquet_metadata=metadata, stats_columns=compute_statistics_plan(file_schema, table.properties),
                parquet_column_mapping=parquet_path_to_id_mapping(file_schema)).to_serialized_dict()
        except Exception:  # e.g. a Spark INT96 timestamp column: publish the file without column statistics
            return empty
        before, now = index_by_id(file_schema), index_by_id(schema)
        same = {i for i, f in now.items() if i in before and before[i].field_type == f.field_type}
        for key in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts"):
            found[key] = {i: v for i, v in found[key].items() if i in now}
        for key in ("lower_bounds", "upper_bounds"):
            found[key] = {i: v for i, v in found[key].items() if i in same}
        return found


def _current_files(table: Table) -> dict[str, DataFile]:
    """{path: DataFile} of the table's current snapshot."""
    if table.current_snapshot() is None:
        return {}
    return {task.file.file_path: task.file for task in table.scan().plan_files()}


def _snapshot_id(table: Table) -> int | None:
    snapshot = table.current_snapshot()
    return None if snapshot is None else int(snapshot.snapshot_id)


def _snapshot_csn(summary: Mapping[str, str]) -> int | None:
    text = summary.get(CSN_KEY)
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def snapshot_at(table: Table, csn: int) -> int | None:
    """The id of the newest snapshot of the table's main branch whose CSN is the newest at or below `csn`."""
    best: tuple[int, int, int] | None = None
    for snapshot in table.snapshots():
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        found = _snapshot_csn(summary)
        if found is None or found > csn:
            continue
        key = (found, int(snapshot.sequence_number or 0), int(snapshot.snapshot_id))
        if best is None or key[:2] > best[:2]:
            best = key
    return None if best is None else best[2]


def behind(rt: Runtime, catalog: Catalog, warehouse_id: str, watermark: int) -> list[tuple[str, int, int]]:
    """(table, published CSN, last commit CSN) of every table whose last commit up to `watermark` is not
    published to Iceberg yet (what `airflow-txn doctor` reports); reads only, creates no Iceberg table."""
    return formats.behind(rt, IcebergPublisher(rt, catalog, warehouse_id), watermark)
