"""SparkTransactionOperator: run a Spark callable inside the DAG run's transaction.

    def load(spark, txn, day, **context):
        airflow_txn.spark.write(spark.range(10).toDF("id"), txn, "shop.ids")

    SparkTransactionOperator(task_id="load", tid=begin.output, python_callable=load,
                             op_kwargs={"day": "2024-01-01"})

The callable gets the SparkSession, a `txn` attached to the transaction whose writes are keyed by
(dag_id, task_id, map_index) with the try number as attempt (a retry replaces what its failed try
staged; a zombie try is refused), and the task context plus `op_kwargs` as keyword arguments (only
those it names, unless it takes **kwargs). The lease is renewed while the callable runs.

Where Spark runs: a local SparkSession in the task's process (the default, `local[*]`), a cluster's
master (`spark_conf={"spark.master": "spark://host:7077"}`, or an Airflow connection of type `spark`
named by `spark_conn_id`), or a running Spark Connect server, which spares the task a JVM of its own
(`remote="sc://host:15002"`, `spark_conf={"spark.remote": ...}`, or a connection of type
`spark_connect`, as the Spark provider's `@task.pyspark` takes it). Through Spark Connect the callable's
airflow_txn.spark writes and reads go through the "airflow_txn" data source, whose driver side runs in
the Spark Connect server: that server must reach the catalog, the oracle and the storage root
(docs/DEPLOYMENT.md); the transaction's tasks share one server session, left open between them
(airflow/utils/connect_sessions.py). A server that does not answer fails the task within the connection's
`connect_timeout` (default 20 s) with SparkConnectUnavailableError, not after pyspark's ten minutes of retries.
Killing the task (`on_kill`) interrupts the Spark jobs it started (by tag).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from airflow_txn.airflow.assets.lineage import LineageMixin, writer_lineage
from airflow_txn.airflow.operators.base import (
    TxnCallableOperator,
    call_with_context,
    keyed_try,
    require_tid,
    run_ids,
    task_key,
)
from airflow_txn.airflow.plugins.links import SparkUILink, TransactionLink
from airflow_txn.airflow.utils.connect_sessions import (
    bound_retries,
    bounded_channel,
    is_closed_session_error,
    leave_open,
    server_address,
    session_id_for,
    unreachable_as_typed,
    with_session_id,
)
from airflow_txn.airflow.version_compat import BaseHook, BaseOperatorLink, Context
from airflow_txn.core.config import connect_timeout_seconds
from airflow_txn.errors import SparkConnectUnavailableError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_txn.core.transaction import Transaction

STAGING_WRITE_NODE = "org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand"
"""The root of the Spark plan of airflow_txn.spark.write's job (Parquet files into a write dir, visible only
once the transaction commits)."""
DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.master": "local[*]",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",  # progress bars garble task logs
    # Spark's own OpenLineage listener (openlineage-spark), if one is enabled, reports no file writes: the
    # staging writes' write dirs are no dataset (the commit task reports the tables; docs/AIRFLOW.md, Lineage)
    "spark.openlineage.filter.deniedSparkNodes": f"[{STAGING_WRITE_NODE}]",
}
REMOTE_DEFAULT_CONF: Mapping[str, str] = {"spark.sql.session.timeZone": "UTC"}
"""A Spark Connect session's defaults: only session settings (a server refuses static ones, spark.master
above all: CANNOT_CONFIGURE_SPARK_CONNECT_MASTER)."""
_NOT_FOR_REMOTE = ("spark.master", "spark.remote")


def spark_session(conf: Mapping[str, str] | None = None, app_name: str = "airflow_txn",
                  remote: str | None = None, tid: str | None = None,
                  connect_timeout: float | None = None, txn: Transaction | None = None) -> SparkSession:
    """The process's SparkSession, created with `conf` (over DEFAULT_SPARK_CONF) if none runs yet; a Spark
    Connect session when `remote` (or `conf["spark.remote"]`) names a server (`sc://host:port`), which is
    transaction `txn`'s session on that server when a transaction is given, kept with it for its other tasks
    (a bare `tid`: a session shared within this process only; airflow/utils/connect_sessions.py). A server
    that does not answer within `connect_timeout` seconds (None: $AIRFLOW_TXN_CONNECT_TIMEOUT, else 20)
    raises SparkConnectUnavailableError, at the first call or any later one of the session.

    An existing session is reused (its static settings cannot change; runtime ones are applied).
    """
    from airflow_txn.spark import require_pyspark

    require_pyspark()
    url = remote or (conf or {}).get("spark.remote")
    if url:
        settings = {k: v for k, v in (conf or {}).items() if k not in _NOT_FOR_REMOTE}
        timeout = connect_timeout_seconds(connect_timeout)
        owner = txn if txn is not None else tid
        if owner is None:
            return _connect_session(str(url), settings, app_name, timeout)
        return _transaction_session(str(url), settings, app_name, owner, timeout)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in {**DEFAULT_SPARK_CONF, **(conf or {})}.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()


def _transaction_session(url: str, conf: Mapping[str, str], app_name: str, owner: Transaction | str,
                         timeout: float) -> SparkSession:
    """The transaction's session on the server; a new one, kept for its next tasks, when the server has closed
    it (idle too long)."""
    session_id = session_id_for(url, owner)
    try:
        spark = _connect_session(with_session_id(url, session_id), conf, app_name, timeout)
        with _unreachable_closes(spark, url, timeout):
            spark.conf.get("spark.sql.session.timeZone")  # reaches the server even without settings to apply
        return spark
    except Exception as exc:
        if not is_closed_session_error(exc):
            raise
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        refused = ConnectSession.getActiveSession()
        if refused is not None:
            leave_open(cast("SparkSession", refused))
        fresh = session_id_for(url, owner, replacing=session_id)
        return _connect_session(with_session_id(url, fresh), conf, app_name, timeout)


def _connect_session(url: str, conf: Mapping[str, str], app_name: str, timeout: float) -> SparkSession:
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:
        raise ImportError(f"attaching to the Spark Connect server {server_address(url)} needs PySpark's Connect "
                          f"client: pip install 'airflow-txn[spark-connect]' ({exc})") from exc
    # what pyspark's own builder does for a remote session: pyspark.sql.functions then build Connect columns
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    channel = bounded_channel(url, timeout)
    # made without settings, the session calls no server yet: its retries are bounded before the first call
    spark = cast("SparkSession", ConnectSession.builder.channelBuilder(channel).getOrCreate())  # duck typed
    bound_retries(spark, timeout)
    builder = ConnectSession.builder.channelBuilder(channel).appName(app_name)
    for key, value in {**REMOTE_DEFAULT_CONF, **conf}.items():
        builder = builder.config(key, str(value))
    with _unreachable_closes(spark, url, timeout):
        return cast("SparkSession", builder.getOrCreate())  # the session above, its settings applied


@contextlib.contextmanager
def _unreachable_closes(spark: SparkSession, url: str, timeout: float) -> Iterator[None]:
    """SparkConnectUnavailableError when the server does not answer; the session is then forgotten here (the
    next spark_session() connects anew) without a call to the server."""
    try:
        with unreachable_as_typed(url, timeout):
            yield
    except SparkConnectUnavailableError:
        leave_open(spark)
        raise


@contextlib.contextmanager
def task_spark_session(conf: Mapping[str, str], app_name: str, remote: str | None = None,
                       tid: str | None = None, connect_timeout: float | None = None,
                       txn: Transaction | None = None) -> Iterator[SparkSession]:
    """spark_session() for the span of one task: a Spark Connect session's channel is closed when the task
    ends (its gRPC threads would keep the task's process alive), leaving transaction `tid`'s server session
    open for the transaction's next task, or releasing it when the task has no transaction. A Connect server
    that stops answering during the task raises SparkConnectUnavailableError naming it (then nothing is
    released: that would wait for the server again)."""
    spark = spark_session(conf, app_name=app_name, remote=remote, tid=tid, connect_timeout=connect_timeout, txn=txn)
    url = remote or conf.get("spark.remote")
    connect = _is_connect(spark)
    lost = False
    try:
        if connect and url:
            with unreachable_as_typed(str(url), connect_timeout_seconds(connect_timeout)):
                yield spark
        else:
            yield spark
    except SparkConnectUnavailableError:
        lost = True
        raise
    finally:
        if connect:
            if tid is None and txn is None and not lost:
                spark.stop()
            else:
                leave_open(spark)


def _is_connect(spark: SparkSession) -> bool:
    from airflow_txn.spark.via import is_connect  # loads pyspark: only once a session exists

    return is_connect(spark)


def spark_ui_url(spark: SparkSession) -> str | None:
    """The web UI of this process's Spark driver (None with `spark.ui.enabled=false`, or through Spark
    Connect: the driver is the server's)."""
    if _is_connect(spark):
        return None
    url = spark.sparkContext.uiWebUrl
    return str(url) if url else None


def spark_target_of(conn_type: str, host: str | None, port: int | None, login: str | None, password: str | None,
                    extra: Mapping[str, Any]) -> dict[str, str]:
    """Spark settings for an Airflow connection of the Spark provider's types: `spark_connect` (a Spark Connect
    server: spark.remote `sc://host:port/;user_id=..;token=..;use_ssl=true`) or `spark` (a master URL)."""
    if conn_type == "spark_connect":
        server = (host or "").removeprefix("sc://").rstrip("/")
        if not server:
            raise ValueError("a spark_connect connection needs a host")
        url = f"sc://{server}" if ":" in server else f"sc://{server}:{port or 15002}"
        ssl = "true" if str(extra.get("use_ssl", "")).lower() in ("1", "true") else None
        params = [f"{name}={value}" for name, value in (("user_id", login), ("token", password), ("use_ssl", ssl))
                  if value]
        return {"spark.remote": url + ("/;" + ";".join(params) if params else "")}
    if conn_type == "spark":
        master = host or "local[*]"
        if port and "://" in master and master.count(":") == 1:
            master = f"{master}:{port}"
        return {"spark.master": master}
    raise ValueError(f"connection type {conn_type!r} is not a Spark connection (spark_connect or spark)")


class SparkTransactionOperator(LineageMixin, TxnCallableOperator):
    """Run `python_callable(spark, txn, *op_args, **context_and_op_kwargs)` in transaction `tid`.

    :param tid: the transaction id (BeginTransactionOperator's XCom, e.g. `begin.output`); inside a
        transaction_group it defaults to the group's.
    :param python_callable: the Spark job; its return value is the XCom (keep it JSON-serialisable).
    :param op_args: extra positional arguments, after spark and txn.
    :param op_kwargs: extra keyword arguments (templated; the usual target of `.expand()`).
    :param spark_conf: Spark settings over DEFAULT_SPARK_CONF and the connection's `spark_conf`,
        used when this process has no SparkSession yet.
    :param remote: a Spark Connect server (`sc://host:15002`) to attach to instead of starting Spark here.
    :param spark_conn_id: an Airflow connection of type `spark_connect` (a Spark Connect server) or `spark`
        (a master URL), as the Spark provider defines them; `remote` and `spark_conf` win over it.
    :param conn_id: the airflow_txn connection.

    Lineage (OpenLineage provider): the tables the callable read through `txn` as inputs; no outputs (its
    writes are staged: the commit reports them).
    """

    template_fields: Sequence[str] = ("tid", "op_args", "op_kwargs", "spark_conf", "remote", "spark_conn_id",
                                      "conn_id")
    template_fields_renderers = {"op_kwargs": "py", "spark_conf": "json"}
    ui_color = "#f5c49b"
    operator_extra_links: tuple[BaseOperatorLink, ...] = (TransactionLink(), SparkUILink())
    spark_ui_url: str | None = None
    """The web UI of the Spark driver this try started, while it runs ("Spark UI" link: links.py)."""

    def __init__(self, *, python_callable: Callable[..., Any], tid: Any = None, op_args: Sequence[Any] | None = None,
                 op_kwargs: Mapping[str, Any] | None = None, spark_conf: Mapping[str, str] | None = None,
                 remote: str | None = None, spark_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(python_callable=python_callable, tid=tid, op_args=op_args, op_kwargs=op_kwargs, **kwargs)
        self.spark_conf = dict(spark_conf or {})
        self.remote = remote
        self.spark_conn_id = spark_conn_id
        self._running: tuple[SparkSession, str] | None = None  # the session and the tag of this try's jobs

    def execute(self, context: Context) -> Any:
        tid = self.linked_tid = require_tid(self.tid, self.task_id)
        dag_id, _run_id, task_id, _map_index, try_number = run_ids(context)
        key = task_key(context)
        hook = self.hook
        with keyed_try(hook, tid, context, self.task_id, self.log) as txn:  # also while the SparkSession starts
            conf = {**self._connection_conf(), **hook.spark_conf(), **self.spark_conf}
            with task_spark_session(conf, app_name=f"{dag_id}.{task_id}", remote=self.remote or None,
                                    tid=tid, connect_timeout=hook.config().connect_timeout, txn=txn) as spark:
                tag = f"airflow_txn-{tid}-{key}-{try_number}".replace(",", "_")
                spark.addTag(tag)
                self._running = (spark, tag)
                self._link_spark_ui(spark, context)
                self.log.info("running %s in transaction %s (key %s, attempt %d) on %s",
                              getattr(self.python_callable, "__name__", "the callable"), tid, key, try_number,
                              "Spark Connect" if _is_connect(spark) else "a local SparkSession")
                try:
                    result = call_with_context(self.python_callable, [spark, txn, *self.op_args],
                                               {**context, **self.op_kwargs})
                    self.record_lineage(context,
                                        lambda: writer_lineage(txn, key, try_number, txn.warehouse.warehouse_id))
                    return result
                finally:
                    self._running = None
                    spark.removeTag(tag)

    def _link_spark_ui(self, spark: SparkSession, context: Context) -> None:
        """Record the driver's UI and publish its link now (Airflow pushes links only when a task ends,
        and the UI lives only as long as the task's process). The task runner's push of every link at the end
        then leaves this one out: it would push the same URL again, or an empty one where there is no UI (the
        link shows disabled either way), one Execution API call per task for nothing."""
        self.spark_ui_url = spark_ui_url(spark)
        if self.spark_ui_url:
            self.log.info("Spark UI of this task: %s", self.spark_ui_url)
            context["ti"].xcom_push(key=SparkUILink().xcom_key, value=self.spark_ui_url)
        self.operator_extra_links = tuple(link for link in self.operator_extra_links
                                          if not isinstance(link, SparkUILink))

    def _connection_conf(self) -> dict[str, str]:
        """Spark settings from `spark_conn_id` (none without it)."""
        if not self.spark_conn_id:
            return {}
        conn = BaseHook.get_connection(self.spark_conn_id)
        return spark_target_of(str(conn.conn_type), conn.host, conn.port, conn.login, conn.password,
                               conn.extra_dejson)

    def on_kill(self) -> None:
        """The task is being killed: interrupt the Spark jobs this try started (locally or on the server)."""
        running = self._running
        if running is not None:
            spark, tag = running
            self.log.info("interrupting the Spark jobs tagged %s", tag)
            spark.interruptTag(tag)
