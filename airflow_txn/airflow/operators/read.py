"""SnapshotReadOperator: run a callable on several tables read at ONE snapshot, as Spark DataFrames or
pyarrow Tables. `@task.txn_read` (decorators.py) is its TaskFlow form:

    @task.txn_read(tables=["shop.orders", "shop.order_items"])
    def check(orders, order_items, csn):          # DataFrames of both tables at CSN `csn`
        ...

Each table reaches the parameter named after it (its name without the namespace: `shop.order_items` ->
`order_items`), or the one `tables={"items": "shop.order_items"}` names. The snapshot is, in this order:
the `csn` argument (an int or a template; None or empty: not given), else the newest commit among the
run's `triggering_asset_events` for those tables (readers.snapshot_of; then its `inlet_events`), else
the readable watermark. Every table is read at that one CSN, so the function sees one committed state,
never a mix of commits (invariant 4). The function may also name `csn` (the snapshot), `spark` (the
session; None with frames="arrow"), any context value and its `op_kwargs`.

Lineage (OpenLineage provider, assets/lineage.py): each table as an input, version = the table's newest commit at or
below the snapshot, and the snapshot in the `airflowTxn` run facet; on COMPLETE, and on FAIL when the
function failed after the tables were chosen.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from airflow_txn.airflow.assets.lineage import LineageMixin, reader_lineage
from airflow_txn.airflow.assets.readers import snapshot_of
from airflow_txn.airflow.hooks.txn import coerce_csn
from airflow_txn.airflow.operators.base import TxnBaseOperator, call_with_context, is_template, run_ids
from airflow_txn.airflow.version_compat import AirflowFailException, Context
from airflow_txn.errors import InvalidArgumentError, InvalidNameError, TxnError
from airflow_txn.model.names import parse_table_name

if TYPE_CHECKING:
    from airflow_txn.core.warehouse import Warehouse

FRAMES = ("spark", "arrow")
"""What the tables are handed as: Spark DataFrames, or pyarrow Tables (no Spark started)."""
GIVEN = ("csn", "spark")
"""Parameters the task fills besides the tables (when the function names them)."""


def table_parameters(tables: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    """{parameter: table} of a `tables` argument: a list names each parameter after its table's name (without
    the namespace), a dict names them itself. InvalidNameError for a malformed table or two tables one name."""
    if isinstance(tables, str) or not isinstance(tables, Sequence | Mapping) or not tables:
        raise InvalidNameError(f"tables must be a non-empty list of table names or a dict of parameter: table, "
                               f"got {tables!r}")
    pairs = list(tables.items()) if isinstance(tables, Mapping) else \
        [(parse_table_name(t).table, t) for t in tables]
    found: dict[str, str] = {}
    for parameter, table in pairs:
        if not isinstance(table, str) or not isinstance(parameter, str) or not parameter.isidentifier():
            raise InvalidNameError(f"tables: {parameter!r}: {table!r} is no parameter name and table name")
        parse_table_name(table)
        if parameter in found or parameter in GIVEN:
            raise InvalidNameError(f"tables: two tables would reach parameter {parameter!r} ({found.get(parameter)}, "
                                   f"{table}) or it is one the task gives; name them: tables={{'name': '{table}'}}")
        found[parameter] = table
    return found


def check_reader(fn: Callable[..., Any], parameters: Sequence[str], decorator: str) -> None:
    """TypeError (when the DAG is parsed) unless `fn` takes a parameter for each table (or **kwargs)."""
    if not callable(fn):
        raise TypeError(f"{decorator} needs a callable, got {fn!r}")
    signature = inspect.signature(fn)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return
    named = {p.name for p in signature.parameters.values() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                                      inspect.Parameter.KEYWORD_ONLY)}
    missing = [p for p in parameters if p not in named]
    if missing:
        raise TypeError(f"{decorator}: {getattr(fn, '__name__', fn)}{signature} takes no parameter {missing} for "
                        f"its tables: name the parameters after the tables, or map them: tables={{'param': 'ns.t'}}")


def choose_snapshot(wh: Warehouse, given: Any, context: Mapping[str, Any], tables: Sequence[str]) -> tuple[int, str]:
    """(CSN, where it came from): the `csn` argument, else the run's Asset events for `tables`, else the
    readable watermark."""
    if given not in (None, "", "None"):
        return coerce_csn(given), "the csn argument"
    for source in ("triggering_asset_events", "inlet_events"):
        events = context.get(source)
        csn = snapshot_of(events, tables) if isinstance(events, Mapping) else None
        if csn is not None:
            return csn, source
    return wh.readable_csn(), "the readable watermark"


class SnapshotReadOperator(LineageMixin, TxnBaseOperator):
    """Run `python_callable(*op_args, <one argument per table>, **context_and_op_kwargs)` with the tables read
    at ONE snapshot (module docstring).

    :param python_callable: the reader; its return value is the XCom.
    :param tables: the tables, a list (each reaches the parameter named after it) or {parameter: table}.
    :param csn: the snapshot (an int, or a template such as a sensor's XCom; `op_kwargs["csn"]`, the TaskFlow
        call's `csn=`, when this is None); None: from the run's Asset events, else the readable watermark.
    :param frames: "spark" (DataFrames, default) or "arrow" (pyarrow Tables, read by this process: no Spark).
    :param spark_conf: Spark settings over the connection's `spark_conf` (frames="spark").
    :param remote: a Spark Connect server (`sc://host:15002`) to read through instead of starting Spark here.
    :param op_args: positional arguments, first; op_kwargs: keyword arguments (templated).
    :param conn_id: the airflow_txn connection.
    """

    template_fields: Sequence[str] = ("csn", "op_args", "op_kwargs", "spark_conf", "remote", "conn_id")
    template_fields_renderers = {"op_kwargs": "py", "spark_conf": "json"}
    ui_color = "#d6e9f8"

    def __init__(self, *, python_callable: Callable[..., Any], tables: Sequence[str] | Mapping[str, str],
                 csn: Any = None, frames: str = "spark", op_args: Sequence[Any] | None = None,
                 op_kwargs: Mapping[str, Any] | None = None, spark_conf: Mapping[str, str] | None = None,
                 remote: str | None = None, **kwargs: Any) -> None:
        parameters = table_parameters(tables)
        if frames not in FRAMES:
            raise InvalidArgumentError(f"frames must be one of {FRAMES}, got {frames!r}")
        if csn not in (None, "") and not is_template(csn):
            coerce_csn(csn)
        check_reader(self._target(python_callable), list(parameters), type(self).__name__)
        super().__init__(**kwargs)
        self.python_callable = python_callable
        self.tables = parameters
        self.csn = csn
        self.frames = frames
        self.op_args = list(op_args or [])
        self.op_kwargs = dict(op_kwargs or {})
        self.spark_conf = dict(spark_conf or {})
        self.remote = remote

    @staticmethod
    def _target(fn: Callable[..., Any]) -> Callable[..., Any]:
        """The function whose parameters are filled (the decorator's, whose own signature hides the tables')."""
        return getattr(fn, "__txn_reader__", fn)

    def execute(self, context: Context) -> Any:
        tables = list(self.tables.values())
        with self.hook.warehouse() as wh:
            given_csn = self.csn if self.csn not in (None, "", "None") else self.op_kwargs.get("csn")
            try:
                snapshot, source = choose_snapshot(wh, given_csn, context, tables)
            except InvalidArgumentError as exc:  # a rendered csn that is no CSN: no retry can fix it
                raise AirflowFailException(f"{self.task_id}: {exc}") from exc
            self.record_lineage(context, lambda: reader_lineage(wh, tables, snapshot))
            with self._spark(context) as spark:
                self.log.info("reading %s at CSN %d (%s)", ", ".join(tables), snapshot, source)
                try:
                    frames = self._read(wh, spark, snapshot)
                except TxnError as exc:
                    raise TxnError(f"{self.task_id}: reading {', '.join(tables)} at CSN {snapshot} ({source}): "
                                   f"{exc}") from exc
                given = {**frames, "csn": snapshot, "spark": spark}
                return call_with_context(self._target(self.python_callable), self.op_args,
                                         {**context, **self.op_kwargs, **given})

    def _spark(self, context: Context) -> AbstractContextManager[Any]:
        """The task's SparkSession (None with frames="arrow"), its Connect channel closed when the task ends."""
        if self.frames != "spark":
            return contextlib.nullcontext()
        from airflow_txn.airflow.operators.spark import task_spark_session

        dag_id, _run, task_id, _map, _try = run_ids(context)
        conf = {**self.hook.spark_conf(), **self.spark_conf}
        return task_spark_session(conf, app_name=f"{dag_id}.{task_id}", remote=self.remote or None,
                                  connect_timeout=self.hook.config().connect_timeout)

    def _read(self, wh: Warehouse, spark: Any, snapshot: int) -> dict[str, Any]:
        if spark is None:
            return {parameter: wh.read(table, csn=snapshot) for parameter, table in self.tables.items()}
        import airflow_txn.spark as txn_spark

        return {parameter: txn_spark.read(spark, wh, table, csn=snapshot) for parameter, table in self.tables.items()}
