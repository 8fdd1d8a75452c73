"""SparkTransactionOperator: run a Spark callable inside the DAG run's transaction.

    def load(spark, txn, day, **context):
        airflow_txn.spark.write(spark.range(10).toDF("id"), txn, "shop.ids")

    SparkTransactionOperator(task_id="load", tid=begin.output, python_callable=load,
                             op_kwargs={"day": "2024-01-01"})

The callable gets the SparkSession, a `txn` attached to the transaction whose writes are keyed by
(dag_id, task_id, map_index) with the try number as attempt (a retry replaces what its failed try
staged; a zombie try is refused), and the task context plus `op_kwargs` as keyword arguments (only
those it names, unless it takes **kwargs). The lease is renewed while the callable runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_txn.airflow.operators.base import TxnBaseOperator, require_tid, run_ids, task_key
from airflow_txn.airflow.version_compat import AirflowFailException, Context
from airflow_txn.core.transaction import Transaction

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.master": "local[*]",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",  # progress bars garble task logs
}


def spark_session(conf: Mapping[str, str] | None = None, app_name: str = "airflow_txn") -> SparkSession:
    """The process's SparkSession, created with `conf` (over DEFAULT_SPARK_CONF) if none runs yet.

    An existing session is reused (its static settings cannot change; runtime ones are applied).
    """
    from airflow_txn.spark import require_pyspark

    require_pyspark()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in {**DEFAULT_SPARK_CONF, **(conf or {})}.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()


def call_with_context(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """fn(*args, **kwargs), passing only the keyword arguments fn names unless it takes **kwargs."""
    params = inspect.signature(fn).parameters.values()
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        names = {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                      inspect.Parameter.POSITIONAL_OR_KEYWORD)}
        kwargs = {k: v for k, v in kwargs.items() if k in names}
    return fn(*args, **kwargs)


class SparkTransactionOperator(TxnBaseOperator):
    """Run `python_callable(spark, txn, *op_args, **context_and_op_kwargs)` in transaction `tid`.

    :param tid: the transaction id (BeginTransactionOperator's XCom, e.g. `begin.output`).
    :param python_callable: the Spark job; its return value is the XCom (keep it JSON-serialisable).
    :param op_args: extra positional arguments, after spark and txn.
    :param op_kwargs: extra keyword arguments (templated; the usual target of `.expand()`).
    :param spark_conf: Spark settings over DEFAULT_SPARK_CONF and the connection's `spark_conf`,
        used when this process has no SparkSession yet.
    :param conn_id: the airflow_txn connection.
    """

    template_fields: Sequence[str] = ("tid", "op_args", "op_kwargs", "spark_conf", "conn_id")
    template_fields_renderers = {"op_kwargs": "py", "spark_conf": "json"}
    ui_color = "#f5c49b"

    def __init__(self, *, tid: Any, python_callable: Callable[..., Any], op_args: Sequence[Any] | None = None,
                 op_kwargs: Mapping[str, Any] | None = None, spark_conf: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not callable(python_callable):
            raise TypeError(f"{self.task_id}: python_callable must be callable, got {python_callable!r}")
        self.tid = tid
        self.python_callable = python_callable
        self.op_args = list(op_args or [])
        self.op_kwargs = dict(op_kwargs or {})
        self.spark_conf = dict(spark_conf or {})

    def execute(self, context: Context) -> Any:
        tid = require_tid(self.tid, self.task_id)
        dag_id, _run_id, task_id, _map_index, try_number = run_ids(context)
        key = task_key(context)
        hook = self.hook
        with hook.warehouse() as wh:
            txn = wh.attach(tid).use_key(key, attempt=try_number)
            if not txn.heartbeat():
                raise AirflowFailException(f"transaction {tid} is no longer active (state {txn.state}) or its lease "
                                           "ran out: nothing can be staged in it")
            with txn.keep_alive():  # from here on, also while the SparkSession starts
                undone = txn.compensate(attempt=try_number)
                if undone:
                    self.log.info("replaced %d part(s) staged by earlier tries of %s", undone, key)
                spark = spark_session({**hook.spark_conf(), **self.spark_conf}, app_name=f"{dag_id}.{task_id}")
                self.log.info("running %s in transaction %s (key %s, attempt %d)",
                              getattr(self.python_callable, "__name__", "the callable"), tid, key, try_number)
                try:
                    return call_with_context(self.python_callable, [spark, txn, *self.op_args],
                                             {**context, **self.op_kwargs})
                except BaseException:
                    self._withdraw(txn, try_number)
                    raise

    def _withdraw(self, txn: Transaction, try_number: int) -> None:
        """Undo at once what this failed try staged, so sibling tasks stop seeing it (a retry would too)."""
        try:
            txn.compensate(attempt=try_number + 1)
        except Exception as exc:  # the transaction may be gone (rolled back): nothing left to undo
            self.log.info("could not withdraw this try's writes (%s); rollback or the retry will", exc)
