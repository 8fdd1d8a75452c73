"""TxnHook: the warehouse named by an Airflow connection of type `airflow_txn`, one open Warehouse per
configuration per process.

The connection's extra holds `{"catalog": URL, "root": path or s3://bucket/prefix, "oracle": "sql" |
"zookeeper://...", "storage_options": {...}}` (S3 settings, taken whole: storage/location.S3_OPTIONS; optionally
`"spark_conf": {...}` for SparkTransactionOperator; `"publish": "iceberg"` (or "delta", "iceberg,delta") and
`"iceberg_catalog": {...}` to publish every commit, docs/INTEROP.md); the catalog's database password goes in the
connection's own password field (a secret: masked in the UI and the logs), not in the URL. Two fields name other Airflow
connections instead: `catalog_conn_id`, a `postgres` or `sqlite` connection the catalog URL is built from
(host, port, schema, login, password: no provider needed), and `aws_conn_id`, an Amazon `aws` connection the
S3 credentials, endpoint and region come from (hooks/aws.py: they refresh before they expire). A field the
connection does not set (or a missing connection) falls back to the `[airflow_txn]` section of Airflow's
configuration (`AIRFLOW__AIRFLOW_TXN__CATALOG`, ...), then to the AIRFLOW_TXN_* variables and the embedded
defaults (airflow_txn.core.config). The first hook of a process also installs the metrics sink
(airflow/utils/metrics.py). `connection_config` reads a connection that must exist (the command line's --conn-id);
`parse_config` what a DAG file being parsed may use (no embedded default: assets/tables.py).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import URL, make_url

from airflow_txn import environment
from airflow_txn.airflow.utils.metrics import install as install_metrics
from airflow_txn.airflow.version_compat import (
    AirflowNotFoundException,
    BaseHook,
    aget_connection,
    airflow_conf,
    connection_field_behaviour,
    connection_form_widgets,
)
from airflow_txn.core.adapter import check_csn, check_lease_seconds, parse_storage_options
from airflow_txn.core.config import DEFAULT_LEASE_SECONDS, ENV_CATALOG, WarehouseConfig
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import (
    ConnectionNotFoundError,
    InvalidArgumentError,
    InvalidNameError,
    TableNotFoundError,
    TableNotInTagError,
    TagNotFoundError,
    TxnError,
    WaitTimeoutError,
)
from airflow_txn.model.csn import PREHISTORIC_CSN
from airflow_txn.model.names import check_tag_name, parse_table_name
from airflow_txn.model.secrets import mask_secrets

DEFAULT_CONN_ID = "airflow_txn_default"
CONN_TYPE = "airflow_txn"
EXTRA_FIELDS = ("catalog", "root", "oracle")
KNOWN_FIELDS = (*EXTRA_FIELDS, "catalog_conn_id", "aws_conn_id", "storage_options", "spark_conf", "connect_timeout",
                "publish", "iceberg_catalog")
CONFIG_SECTION = "airflow_txn"


def config_option(name: str) -> str | None:
    """Option `name` of Airflow's `[airflow_txn]` section (None when unset or empty)."""
    value = airflow_conf().get(CONFIG_SECTION, name, fallback="")
    return None if value in (None, "") else str(value)


def default_lease_seconds() -> float:
    """`[airflow_txn] lease_seconds`: the lease of transactions whose DAG does not choose one."""
    value = config_option("lease_seconds")
    try:
        lease = float(value) if value is not None else DEFAULT_LEASE_SECONDS
    except ValueError as exc:
        raise TxnError(f"[airflow_txn] lease_seconds must be a number of seconds, got {value!r}") from exc
    try:
        return check_lease_seconds(lease)
    except InvalidArgumentError as exc:
        raise TxnError(f"[airflow_txn] {exc}") from exc


def default_deferrable() -> bool:
    """`[operators] default_deferrable` (AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE): whether deferrable
    operators and sensors that are not told defer, as Airflow's own providers read it."""
    return bool(airflow_conf().getboolean("operators", "default_deferrable", fallback=False))


def _field(extra: Mapping[str, Any], name: str) -> Any:
    """An extra field, stored plain (`catalog`) or as the connection form prefixes it."""
    value = extra.get(name)
    if value in (None, ""):
        value = extra.get(f"extra__{CONN_TYPE}__{name}")
    return None if value in (None, "") else value


def config_from_extra(extra: Mapping[str, Any], password: str | None = None) -> WarehouseConfig:
    """The warehouse configuration an `airflow_txn` connection's extra describes (missing fields:
    Airflow's `[airflow_txn]` options, then the AIRFLOW_TXN_* environment and the embedded defaults);
    `password`, the connection's password field, is the catalog database's password. `catalog_conn_id`
    and `aws_conn_id` are looked up (TxnError when they contradict a field the extra also sets)."""
    unknown = sorted(k for k in extra if k not in KNOWN_FIELDS and not k.startswith("extra__"))
    if unknown:
        raise TxnError(f"unknown field(s) {unknown} in the airflow_txn connection's extra; use {list(KNOWN_FIELDS)}")
    catalog = _catalog(extra, password)
    root, oracle = (_field(extra, name) or config_option(name) for name in ("root", "oracle"))
    options = _field(extra, "storage_options") or config_option("storage_options")  # None: the environment's
    timeout = _field(extra, "connect_timeout")
    timeout = config_option("connect_timeout") if timeout is None else timeout  # None: the environment's
    publish, iceberg_catalog = (_field(extra, name) or config_option(name) for name in ("publish", "iceberg_catalog"))
    config = WarehouseConfig.resolve(catalog=catalog, root=root, oracle=oracle, storage_options=options,
                                     connect_timeout=timeout, publish=publish, iceberg_catalog=iceberg_catalog)
    aws_conn_id = _field(extra, "aws_conn_id")
    if aws_conn_id is not None:
        config = _with_aws(config, str(aws_conn_id), options)
    if not password or _field(extra, "catalog_conn_id") is not None:
        return config
    return dataclasses.replace(config, catalog_url=with_password(config.catalog_url, password))


def _catalog(extra: Mapping[str, Any], password: str | None) -> str | None:
    """The catalog URL: the extra's `catalog`, or the one `catalog_conn_id` names, or the configuration's."""
    linked = _field(extra, "catalog_conn_id")
    if linked is None:
        return _field(extra, "catalog") or config_option("catalog")
    if _field(extra, "catalog") is not None:
        raise TxnError("the airflow_txn connection sets both catalog and catalog_conn_id: keep one")
    if password:
        raise TxnError(f"the airflow_txn connection names its catalog by catalog_conn_id {linked!r} and also has a "
                       "password: the catalog's password is that connection's; clear this one")
    try:
        conn = BaseHook.get_connection(str(linked))
    except AirflowNotFoundException:
        raise ConnectionNotFoundError(f"the airflow_txn connection's catalog_conn_id names connection {linked!r}, "
                                      "which is not defined: define it (type postgres or sqlite) or set `catalog`",
                                      conn_id=str(linked)) from None
    return catalog_url_of(conn)


CATALOG_CONN_TYPES = ("postgres", "sqlite")
"""The connection types `catalog_conn_id` may name (their URL is built here: no provider is needed)."""
PG_URL_PARAMETERS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "options", "application_name",
                     "connect_timeout", "target_session_attrs", "keepalives", "keepalives_idle")
"""libpq parameters a postgres connection's extra may hold; they become the catalog URL's query."""


def catalog_url_of(conn: Any) -> str:
    """The SQLAlchemy URL of Airflow connection `conn` (type postgres: psycopg 3 `postgresql+psycopg://`
    from host, port, schema (the database), login, password and the libpq parameters of its extra;
    type sqlite: its host is the file's path). TxnError for any other type."""
    kind = str(conn.conn_type or "")
    if kind in ("postgres", "postgresql"):
        extra = dict(conn.extra_dejson or {})
        query = {k: str(extra[k]) for k in PG_URL_PARAMETERS if extra.get(k) not in (None, "")}
        url = URL.create("postgresql+psycopg", username=conn.login or None, password=conn.password or None,
                         host=conn.host or None, port=int(conn.port) if conn.port else None,
                         database=conn.schema or None, query=query)
        return url.render_as_string(hide_password=False)
    if kind == "sqlite":
        path = conn.host or conn.schema
        if not path:
            raise TxnError(f"connection {conn.conn_id!r} (type sqlite) names no file: set its host to the "
                           "catalog file's path")
        return f"sqlite:///{path}"
    raise TxnError(f"catalog_conn_id names connection {conn.conn_id!r} of type {kind!r}; a catalog connection is "
                   f"one of {list(CATALOG_CONN_TYPES)}")


def _with_aws(config: WarehouseConfig, aws_conn_id: str, given: Any) -> WarehouseConfig:
    """`config` with the S3 settings of Amazon connection `aws_conn_id` (hooks/aws.py)."""
    from airflow_txn.airflow.hooks import aws

    if not config.root.startswith("s3://"):
        raise TxnError(f"the airflow_txn connection sets aws_conn_id {aws_conn_id!r} but its root {config.root!r} is "
                       "not an s3:// root: aws_conn_id gives the credentials of an S3 root")
    own = parse_storage_options(given, "storage_options") if given is not None else {}
    return dataclasses.replace(config, storage_options=aws.credentials(aws_conn_id).storage_options(own))


def with_password(catalog_url: str, password: str) -> str:
    """The catalog URL with the connection's password; TxnError when the URL has one of its own (keep it in
    the password field only) or names a database without passwords (SQLite)."""
    url = make_url(catalog_url)
    if url.get_backend_name() == "sqlite":
        raise TxnError("the airflow_txn connection has a password, but its catalog is a SQLite file, which takes "
                       "none: clear the password field (it is the catalog database server's password)")
    if url.password:
        raise TxnError("the airflow_txn connection's catalog URL holds a password and so does its password field: "
                       "remove it from the URL (the password field keeps it secret)")
    return url.set(password=password).render_as_string(hide_password=False)


def connection_config(conn_id: str) -> WarehouseConfig | None:
    """The warehouse connection `conn_id` describes (config_from_extra of its extra and password), or None
    when Airflow knows no such connection (TxnHook then warns and applies the defaults); `airflow-txn
    --conn-id`, which names a connection on purpose, refuses it."""
    try:
        conn = TxnHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None
    return config_from_extra(dict(conn.extra_dejson), conn.password)


def without_connection(conn_id: str, where: str, way_out: str = "") -> None:
    """Connection `conn_id` is not defined `where` (a DAG file being parsed): allowed only when the deployment
    names a catalog on purpose (`[airflow_txn] catalog` or AIRFLOW_TXN_CATALOG), whose warehouse the AIRFLOW_TXN_*
    settings then describe. Never the embedded default under ~/.airflow_txn: a guess that would name (and once
    create) a warehouse of its own. ConnectionNotFoundError naming `conn_id` otherwise (docs/DESIGN.md, D16)."""
    if config_option("catalog") is None and not environment.given(ENV_CATALOG):
        raise ConnectionNotFoundError(
            f"connection {conn_id!r} is not defined {where}, and neither [airflow_txn] catalog nor {ENV_CATALOG} "
            f"names a catalog: define the connection (type airflow_txn){way_out}", conn_id=conn_id)


def parse_config(conn_id: str) -> WarehouseConfig:
    """The warehouse a DAG file being parsed means by connection `conn_id`: the connection's, else a
    catalog the deployment names on purpose (without_connection)."""
    found = connection_config(conn_id)
    if found is not None:
        return found
    without_connection(conn_id, "where this DAG file is parsed",
                       " for the dag-processor and the workers, or pass warehouse_id='<id>' (`airflow-txn doctor` "
                       "shows it)")
    return config_from_extra({})


def spark_conf_from_extra(extra: Mapping[str, Any]) -> dict[str, str]:
    raw = _field(extra, "spark_conf") or {}
    if isinstance(raw, str):
        raw = json.loads(raw)
    if not isinstance(raw, Mapping):
        raise TxnError(f"spark_conf in the airflow_txn connection must be a JSON object, got {raw!r}")
    return {str(k): str(v) for k, v in raw.items()}


class TxnHook(BaseHook):
    """Opens the warehouse of connection `conn_id` (default `airflow_txn_default`).

        with TxnHook().warehouse() as wh:
            wh.readable_csn()
    """

    conn_name_attr = "conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "airflow_txn warehouse"

    def __init__(self, conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id
        self._extra: dict[str, Any] | None = None
        self._password: str | None = None
        install_metrics()  # once per process: the engine's metrics go to Airflow's stats

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The connection form's fields for Airflow 3.1, from the provider info's `conn-fields` (provider.py):
        Airflow 3.2 and later read those and never call this (version_compat.connection_form_widgets)."""
        return connection_form_widgets(_connection_type_info()["conn-fields"])

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The standard fields hidden and relabelled, for Airflow 3.1 (as get_connection_form_widgets)."""
        return connection_field_behaviour(_connection_type_info()["ui-field-behaviour"])

    def extra(self) -> dict[str, Any]:
        """The connection's extra ({} when the connection does not exist: the `[airflow_txn]` options, the
    AIRFLOW_TXN_* variables and the embedded defaults apply, with a warning naming the connection)."""
        if self._extra is None:
            try:
                conn = self.get_connection(self.conn_id)
                self._extra, self._password = dict(conn.extra_dejson), conn.password
            except AirflowNotFoundException:
                self._extra = self._no_connection("where this task runs")
        return self._extra

    async def aconfig(self) -> WarehouseConfig:
        """config() for async code (triggers): never blocks the event loop on the connection lookup."""
        if self._extra is None:
            try:
                conn = await aget_connection(self, self.conn_id)
                self._extra, self._password = dict(conn.extra_dejson), conn.password
            except AirflowNotFoundException:
                self._extra = self._no_connection("where this trigger runs")
        return self.config()

    def _no_connection(self, where: str) -> dict[str, Any]:
        """No connection `conn_id` here: the `[airflow_txn]` options, the AIRFLOW_TXN_* variables and the embedded
        defaults describe the warehouse (the public contract), said as a warning naming the catalog it means, so
        a mistyped connection id shows in the task's or the triggerer's log (parsing refuses instead: D16)."""
        config = config_from_extra({})
        self.log.warning("connection %r is not defined %s: using the warehouse of the [airflow_txn] options, "
                         "the AIRFLOW_TXN_* variables and the defaults, catalog %s", self.conn_id, where,
                         mask_secrets(config.catalog_url))
        return {}

    def config(self) -> WarehouseConfig:
        """The warehouse of the connection: its extra, and its password field as the catalog's password."""
        return config_from_extra(self.extra(), self._password)

    def spark_conf(self) -> dict[str, str]:
        """Spark settings from the connection's `spark_conf` (operators add their own on top)."""
        return spark_conf_from_extra(self.extra())

    def aws_conn_id(self) -> str | None:
        """The connection's `aws_conn_id` (None: the root's credentials come from storage_options or the
        AWS environment)."""
        found = _field(self.extra(), "aws_conn_id")
        return None if found is None else str(found)

    def get_conn(self) -> Warehouse:
        """The warehouse of the connection: ONE open Warehouse per configuration per process, shared by every
        hook (and thread) that resolves to it (shared_warehouse). Do not close it: it lives as long as the
        process (close_warehouses() closes them all)."""
        return shared_warehouse(self.config(), self.aws_conn_id())

    @contextmanager
    def warehouse(self) -> Iterator[Warehouse]:
        """`with hook.warehouse() as wh:` the shared warehouse (get_conn); leaving the block keeps it open for
        the next user in this process (it used to close a warehouse opened for the block)."""
        yield self.get_conn()

    def test_connection(self) -> tuple[bool, str]:
        """The UI's "Test" button: open the warehouse and read its watermark, on a Warehouse of its own (closed
        after: the form's tries are not kept). Creates nothing: a warehouse
        that does not exist (a typo in the catalog URL or root, or one never created) fails the test with
        "no warehouse at ...; run `airflow-txn init`"."""
        try:
            with open_warehouse(self.config(), self.aws_conn_id()) as wh:
                return True, f"warehouse reachable, readable CSN {wh.readable_csn()}"
        except Exception as exc:
            return False, str(exc)


def _connection_type_info() -> dict[str, Any]:
    """The provider info's entry for the `airflow_txn` connection type (its form)."""
    from airflow_txn.airflow.provider import get_provider_info

    [info] = [t for t in get_provider_info()["connection-types"] if t["connection-type"] == CONN_TYPE]
    return dict(info)


class _Shared:
    """The process's open warehouses, by configuration (reset in a forked child: hooks/txn.py)."""

    def __init__(self) -> None:
        self.open: dict[tuple[Any, ...], Warehouse] = {}
        self.lock = threading.Lock()


_SHARED = _Shared()


def _forget_in_child() -> None:
    """A forked child (a LocalExecutor worker) opens its own: the parent's catalog engines are disposed by
    the Catalog's own fork hook, a ZooKeeper client's threads do not survive a fork."""
    global _SHARED
    _SHARED = _Shared()


os.register_at_fork(after_in_child=_forget_in_child)


def _key(config: WarehouseConfig, aws_conn_id: str | None) -> tuple[Any, ...]:
    """What makes two configurations one warehouse handle: the configuration (its storage options and Iceberg
    catalog properties are not part of its equality: they are here), and the aws connection, whose credentials
    change as they refresh."""
    options = {k: v for k, v in config.storage_options.items()
               if aws_conn_id is None or k not in ("access_key_id", "secret_access_key", "session_token")}
    return config, aws_conn_id, tuple(sorted(options.items())), tuple(sorted(config.iceberg_catalog.items()))


def shared_warehouse(config: WarehouseConfig, aws_conn_id: str | None = None) -> Warehouse:
    """The open Warehouse of `config` in this process, opened on first use (thread-safe), never closed by its
    users (close_warehouses)."""
    key = _key(config, aws_conn_id)
    shared = _SHARED
    with shared.lock:
        wh = shared.open.get(key)
        if wh is None:
            wh = shared.open[key] = open_warehouse(config, aws_conn_id)
        return wh


def open_warehouse(config: WarehouseConfig, aws_conn_id: str | None = None) -> Warehouse:
    """A new Warehouse of `config`, the caller's to close; with `aws_conn_id` its S3 filesystem takes that
    connection's current credentials before each call (hooks/aws.py)."""
    filesystem = None
    if aws_conn_id is not None:
        from airflow_txn.airflow.hooks import aws

        filesystem, _ = aws.refreshing_s3(config.storage_options, aws.credentials(aws_conn_id))
    return Warehouse.open(catalog=config.catalog_url, root=config.root, oracle=config.oracle,
                          manifests=config.manifests, storage_options=dict(config.storage_options),
                          filesystem=filesystem, connect_timeout=config.connect_timeout,
                          publish=list(config.publish), iceberg_catalog=dict(config.iceberg_catalog))


def close_warehouses() -> None:
    """Close every warehouse the hooks of this process opened (the next get_conn opens anew): for tests, and
    a process that changes its connections' targets for good."""
    shared = _SHARED
    with shared.lock:
        opened = list(shared.open.values())
        shared.open.clear()
    for wh in opened:
        wh.close()


def snapshot_ready(wh: Warehouse, csn: int, tables: Sequence[str] = ()) -> int | None:
    """The snapshot a reader waiting for `csn` may read now, or None while it must wait.

    Ready when the readable watermark covers `csn` and each of `tables` has a readable commit at or
    after `csn`; the snapshot is then `csn` or the latest such table commit, whichever is later.
    Commit records not yet applied (a committer that died mid-apply) are applied on the way. A warehouse
    nobody has created yet is waited for, as a table nobody has created is.
    """
    if not wh.exists():
        return None
    latest = wh.commit_log(limit=1)
    target = max([csn, *(r["csn"] for r in latest)])
    try:
        wh.wait_for_csn(target, timeout=0)
    except WaitTimeoutError:
        if wh.readable_csn() < csn:
            return None
    snapshot = csn
    for table in tables:
        try:
            last = wh.last_commit_csn(table)
        except TableNotFoundError:
            return None
        if last is None or last < csn:
            return None
        snapshot = max(snapshot, last)
    return snapshot


def tag_ready(wh: Warehouse, tag: str, tables: Sequence[str] = ()) -> int | None:
    """The CSN of tag `tag` once it exists (None while it does not); TableNotInTagError when it exists
    and does not hold one of `tables` (a tag never changes: no wait can help)."""
    try:
        info = wh.tag_info(tag)
    except TagNotFoundError:
        return None
    held = set(info["tables"])
    for table in tables:
        name = parse_table_name(table).qualified
        if name not in held:
            raise TableNotInTagError(f"tag {tag!r} (CSN {info['csn']}) does not hold table {name}; it holds "
                                     f"{', '.join(info['tables'])}", table=name, tag=tag)
    return info["csn"]


def coerce_tag(value: Any) -> str | None:
    """A rendered `tag` argument: None (or empty text) for none, else a checked tag name."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    return check_tag_name(value.strip() if isinstance(value, str) else value)


def coerce_csn(value: Any) -> int:
    """A rendered `csn` argument as an int (None or "" mean "any commit": the prehistoric CSN 1)."""
    if value is None or value == "" or value == "None":
        return PREHISTORIC_CSN
    if isinstance(value, bool):
        raise InvalidArgumentError(f"csn must be an integer, got {value!r}")
    try:
        csn = int(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"csn must be an integer, got {value!r}") from exc
    return check_csn(csn)


def coerce_tables(value: Any) -> list[str]:
    """A rendered `tables` argument as a list: a list, or text ("a.b,c.d" or a rendered list literal)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = ast.literal_eval(text)
            except (ValueError, SyntaxError) as exc:
                raise InvalidNameError(f"tables must be a list of table names, got {value!r}") from exc
            return coerce_tables(list(parsed))
        return [t.strip() for t in text.split(",") if t.strip()]
    if not isinstance(value, Sequence) or not all(isinstance(t, str) for t in value):
        raise InvalidNameError(f"tables must be a list of table names, got {value!r}")
    return list(value)
