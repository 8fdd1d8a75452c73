"""Airflow Assets for warehouse tables: how a table is named (one function, `table_identity`), its Asset,
the Asset watched on the commit log (commit_watcher), the alias CommitTransactionOperator emits through,
the extra every commit event carries and the partition keys of the partitions a commit wrote.

A table's Asset names the WAREHOUSE by its id (kept in the catalog: core/identity.py), never by the
Airflow connection it is reached through: `airflow-txn://<warehouse id>/<ns.name>`. Renaming the
connection, or two connections to one warehouse, leaves the Asset as it is; another warehouse with a
table of the same name has another Asset (docs/DESIGN.md D16).
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_txn.airflow.assets.uris import SCHEME, WATCH_QUERY, check_warehouse_id
from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, parse_config
from airflow_txn.airflow.version_compat import Asset, AssetAlias, AssetWatcher
from airflow_txn.core.adapter import masked_url
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.model.names import parse_table_name
from airflow_txn.model.partitioning import Partition

GROUP = "airflow-txn"
"""The Asset group of every warehouse table (what the Assets page shows and filters by)."""
NAME_ID_DIGITS = 12
"""How many hex digits of the warehouse id a table's Asset name shows (Asset names are unique in Airflow)."""
PARTITION_KEY_DELIMITER = "|"
"""Between the values of a multi-column partition key: ProductMapper's default delimiter."""
PARTITION_KEY_MAX = 250
"""Airflow refuses longer partition keys (add_partitions)."""


@dataclass(frozen=True, slots=True)
class TableIdentity:
    """How a warehouse table is named outside the warehouse: its Airflow Asset and its lineage dataset."""

    warehouse_id: str
    table: str

    @property
    def namespace(self) -> str:
        """The warehouse: `airflow-txn://<warehouse id>` (an OpenLineage dataset namespace)."""
        return f"{SCHEME}://{self.warehouse_id}"

    @property
    def uri(self) -> str:
        """The Asset URI: `airflow-txn://<warehouse id>/<ns.name>`."""
        return f"{self.namespace}/{urllib.parse.quote(self.table, safe='.')}"

    @property
    def name(self) -> str:
        """The Asset name, readable and unique: `<ns.name>@<first NAME_ID_DIGITS digits of the warehouse id>`."""
        return f"{self.table}@{self.warehouse_id[:NAME_ID_DIGITS]}"

    @property
    def group(self) -> str:
        return GROUP

    @property
    def watch_uri(self) -> str:
        """The URI of the table's commit-log Asset (commit_watcher): `<uri>?watch=commit-log`."""
        return f"{self.uri}?{WATCH_QUERY}"

    @property
    def watch_name(self) -> str:
        return f"{self.name}:commit-log"


def table_identity(warehouse_id: str, table: str) -> TableIdentity:
    """THE naming of table `ns.name` of warehouse `warehouse_id`: its Asset's uri, name and group and its
    lineage namespace (every part of the package names tables through this function). The warehouse id is
    checked (and lower-cased) by asset_uris.check_warehouse_id, the check the URI scheme's handler makes.
    InvalidNameError for a malformed table name or warehouse id."""
    return TableIdentity(check_warehouse_id(warehouse_id), parse_table_name(table).qualified)


_IDS: dict[str, str] = {}
"""{catalog URL: warehouse id} looked up by this process (a catalog keeps its id for life)."""
_IDS_LOCK = threading.Lock()


def warehouse_id_of(conn_id: str = DEFAULT_CONN_ID) -> str:
    """The id of the warehouse connection `conn_id` reaches, read from its catalog once per process and
    catalog (what table_asset() needs while a DAG file is parsed). Parsing never guesses and never creates
    (docs/DESIGN.md, D16): a connection that is not defined, with no catalog configured on purpose, raises
    ConnectionNotFoundError naming it (hooks/txn.parse_config); a catalog that does not exist raises
    WarehouseNotFoundError naming it and the connection; nothing is created, not even a SQLite file."""
    config = parse_config(conn_id)
    url = config.catalog_url
    with _IDS_LOCK:
        found = _IDS.get(url)
    if found is None:
        where = f"catalog {masked_url(url)} (connection {conn_id!r})"
        found = Warehouse.warehouse_id_at(url, where=where, connect_timeout=config.connect_timeout)
        with _IDS_LOCK:
            _IDS[url] = found
    return found


def table_asset(table: str, conn_id: str = DEFAULT_CONN_ID, *, warehouse_id: str | None = None) -> Asset:
    """The Asset of warehouse table `ns.name` (table_identity: `airflow-txn://<warehouse id>/<ns.name>`,
    name `<ns.name>@<id prefix>`, group `airflow-txn`). Schedule a DAG on it to run after each commit that
    wrote the table. The warehouse is the one connection `conn_id` reaches, its id read from the catalog
    when the DAG file is parsed (once per process; warehouse_id_of: a connection that is not defined, or a
    catalog that does not exist, fails the DAG file with a message naming it, and nothing is created); pass
    `warehouse_id` (`airflow-txn doctor` shows it) to name it without reaching the catalog."""
    wid = warehouse_id if warehouse_id is not None else warehouse_id_of(conn_id)
    ident = table_identity(wid, table)
    return Asset(name=ident.name, uri=ident.uri, group=ident.group,
                 extra={"warehouse_id": ident.warehouse_id, "table": ident.table})


def table_uri(table: str, warehouse_id: str) -> str:
    """`table_identity(warehouse_id, table).uri`: the table's Asset URI, from which lineage.py spells its
    OpenLineage dataset (split_table_uri)."""
    return table_identity(warehouse_id, table).uri


def split_table_uri(uri: str) -> tuple[str, str] | None:
    """(warehouse id, table) of a table's Asset URI (table_uri); None for any other URI, a commit-log
    Asset's included."""
    parts = urllib.parse.urlsplit(uri)
    table = urllib.parse.unquote(parts.path.lstrip("/"))
    if parts.scheme != SCHEME or not parts.netloc or not table or parts.query:
        return None
    return parts.netloc, table


def table_of(asset: Any, warehouse_id: str) -> str | None:
    """The table of warehouse `warehouse_id` an Asset made by table_asset() names (None for any other
    Asset: a table of another warehouse, a commit-log Asset)."""
    uri = getattr(asset, "uri", "")
    found = split_table_uri(uri) if isinstance(uri, str) else None
    return found[1] if found is not None and found[0] == warehouse_id else None


def commit_alias(conn_id: str = DEFAULT_CONN_ID) -> AssetAlias:
    """The alias CommitTransactionOperator emits its table events through (its default outlet). Only
    a channel from the task to the scheduler: the events land on the tables' Assets, named by warehouse."""
    return AssetAlias(name=f"{SCHEME}-commits:{conn_id}")


PUBLISHED_KEYS = ("iceberg_snapshot_id", "iceberg_table", "delta_version", "delta_table")
"""What a commit event carries of its table's published version (Warehouse.published), when publishing is on."""


def event_extra(table: str, csn: int, tid: str, metadata: Mapping[str, object] | None = None,
                warehouse_id: str | None = None, tag: str | None = None,
                published: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What every commit event carries: the table, the commit CSN (read exactly that snapshot), the tid,
    the transaction's metadata (the Airflow run that committed it: `{"airflow": {dag_id, run_id, ...}}`),
    the warehouse id; `tag`, the name the commit was tagged with (CommitTransactionOperator(tag=)),
    when it was; and with publishing on, the table's version of this commit in the other formats
    (`iceberg_snapshot_id` and `iceberg_table`, `delta_version` and `delta_table`: an outside engine reads
    every table of the commit at the same CSN by them)."""
    extra: dict[str, Any] = {"table": table, "csn": csn, "tid": tid, "metadata": dict(metadata or {})}
    if warehouse_id is not None:
        extra["warehouse_id"] = warehouse_id
    if tag is not None:
        extra["tag"] = tag
    for key in PUBLISHED_KEYS:
        if published and published.get(key) is not None:
            extra[key] = published[key]
    return extra


def asset_partition_keys(partitions: Iterable[Partition]) -> list[str]:
    """Airflow partition keys of warehouse partitions, sorted: the values in partition_by order joined by
    PARTITION_KEY_DELIMITER (`2024-01-01`, `2024-01-01|eu`), NULL as `__null__`, an empty value as
    `__empty__` (Airflow refuses blank keys). An unpartitioned table's `{}` gives no key. A key longer than
    PARTITION_KEY_MAX (Airflow's limit) is left out: the event still says the table changed."""
    keys = set()
    for partition in partitions:
        if not partition:
            continue
        key = PARTITION_KEY_DELIMITER.join(
            "__null__" if value is None else (value if value.strip() else "__empty__") for value in partition.values())
        if len(key) <= PARTITION_KEY_MAX:
            keys.add(key)
    return sorted(keys)


def commit_watcher(table: str, conn_id: str = DEFAULT_CONN_ID, *, warehouse_id: str | None = None,
                   poll_interval: float = 5.0, include_airflow: bool = True) -> Asset:
    """The commit-log Asset of warehouse table `ns.name`, watched by Airflow's triggerer: schedule a DAG on it
    to run after EVERY commit of the table, those made outside Airflow (plain Python, another scheduler)
    included. An AssetWatcher runs a CommitLogTrigger (triggers/commits.py) that reads the warehouse's
    commit log and fires an Asset event per new commit of the table, its extra's `payload` carrying the CSN
    (readers.snapshot_of reads it). `include_airflow=False` leaves out commits made by Airflow tasks (for a
    DAG also scheduled on `table_asset(table)`, where those emit their events). Compaction never fires.

    A separate Asset from table_asset(table) (`<its uri>?watch=commit-log`): Airflow keeps the watchers
    of an Asset's last definition, and the table's Asset is also defined by DAGs with no watcher (commit
    outlets, other readers). The watcher runs while a DAG scheduled on it is deployed and not paused."""
    from airflow_txn.airflow.triggers.commits import CommitLogTrigger

    ident = table_identity(warehouse_id if warehouse_id is not None else warehouse_id_of(conn_id), table)
    trigger = CommitLogTrigger(tables=[ident.table], conn_id=conn_id, poll_interval=poll_interval,
                               include_airflow=include_airflow)
    watcher = AssetWatcher(name=f"{SCHEME}:{ident.watch_name}", trigger=trigger)
    return Asset(name=ident.watch_name, uri=ident.watch_uri, group=ident.group,
                 extra={"warehouse_id": ident.warehouse_id, "table": ident.table, "watch": "commit-log"},
                 watchers=[watcher])
