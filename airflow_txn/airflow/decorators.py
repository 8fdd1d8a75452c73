"""TaskFlow forms of the transaction operators, registered as task decorators in provider info:

    @task.txn_spark                          # SparkTransactionOperator
    def load_orders(spark, txn, day):
        airflow_txn.spark.write(orders_for(spark, day), txn, "shop.orders", mode="overwrite",
                                partitions=[{"day": day}])

    @task.txn                                # TransactionPythonOperator: pyarrow, no Spark
    def load_rates(txn, day):
        txn.append("shop.rates", rates_for(day))

    @task.txn_check                          # TransactionCheckOperator: the checks, built when it runs
    def audit(days):
        return [RowCountCheck("shop.orders", min=10 * days, max=10 * days)]

    with transaction_group("daily") as group:   # no tid= needed inside a group
        orders = load_orders.expand(day=days)   # keyed per map index: a retry replaces its own try's parts
        rates = load_rates(day="{{ ds }}")
        [orders, rates] >> audit(days=3)        # last before the commit: a failed check rolls back

    @task.txn_read(tables=["shop.orders", "shop.order_items"])   # SnapshotReadOperator: a reader
    def check(orders, order_items, csn):     # DataFrames of both tables at ONE snapshot, its CSN
        ...
    check()                                  # CSN: the run's Asset events, else the readable watermark
    check(csn=wait.output)                   # or the CSN given (a sensor's XCom)

The decorated function takes `spark, txn` (`@task.txn_spark`) or `txn` (`@task.txn`) first: the task gives
them (a `@task.txn_check` function takes nothing first and returns the checks); the call passes the
rest (its arguments are checked against the function without them when the DAG is parsed, and
`.partial()/.expand()` map over them). Context values (`ds`, `ti`, `params`, ...) reach parameters named
after them, as for `@task`. Outside a transaction_group pass `tid=` to the decorator
(`@task.txn_spark(tid=begin.output)`). Operator arguments (conn_id, spark_conf, remote, spark_conn_id,
retries, map_index_template, ...) go to the decorator as for any `@task.<kind>`.

`@task.txn_read(tables=..., frames="spark" | "arrow")` hands its function one argument per table (named after
the table, or as `tables={"param": "ns.table"}` maps them), read at one snapshot, and `csn` and `spark` when it
names them (operators/read.py says where the snapshot comes from); the call may pass `csn=`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_txn.airflow.operators.check import TransactionCheckOperator
from airflow_txn.airflow.operators.python import TransactionPythonOperator
from airflow_txn.airflow.operators.read import GIVEN, SnapshotReadOperator, check_reader, table_parameters
from airflow_txn.airflow.operators.spark import SparkTransactionOperator


def _without(fn: Callable[..., Any], given: Sequence[str], decorator: str) -> Callable[..., Any]:
    """`fn` as Airflow's TaskFlow should see it: its first parameters (`given`, which the task supplies) hidden
    from the signature the call's arguments are checked against; calling it still passes them first."""
    if not callable(fn):
        raise TypeError(f"@task.{decorator} decorates a function, got {fn!r}")
    params = list(inspect.signature(fn).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    first = [p.name for p in params[:len(given)] if p.kind in positional]
    if first != list(given):
        raise TypeError(f"@task.{decorator} functions take ({', '.join(given)}, ...) first: the task gives them; "
                        f"{getattr(fn, '__name__', fn)}({', '.join(p.name for p in params)}) does not")

    @functools.wraps(fn)
    def task_function(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    task_function.__signature__ = inspect.signature(fn).replace(  # type: ignore[attr-defined]
        parameters=params[len(given):])
    return task_function


def _reader(fn: Callable[..., Any], tables: Sequence[str] | Mapping[str, str]) -> Callable[..., Any]:
    """`fn` as Airflow's TaskFlow should see a reader: its table parameters and `spark` hidden (the task gives
    them), `csn` an optional keyword (the call may give the snapshot); `__txn_reader__` is `fn` itself, whose
    parameters the operator fills."""
    parameters = table_parameters(tables)
    check_reader(fn, list(parameters), "@task.txn_read")
    signature = inspect.signature(fn)
    kept = [p for p in signature.parameters.values() if p.name not in {*parameters, *GIVEN}]
    csn = inspect.Parameter("csn", inspect.Parameter.KEYWORD_ONLY, default=None)
    at = next((i for i, p in enumerate(kept) if p.kind is inspect.Parameter.VAR_KEYWORD), len(kept))

    @functools.wraps(fn)
    def task_function(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    task_function.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*kept[:at], csn, *kept[at:]])
    task_function.__txn_reader__ = fn  # type: ignore[attr-defined]
    return task_function


def _decorated_operator(operator: type, decorator: str, given: Sequence[str]) -> type:
    from airflow.sdk.bases.decorator import DecoratedOperator

    class Decorated(DecoratedOperator, operator):  # type: ignore[misc]
        custom_operator_name = f"@task.{decorator}"
        template_fields: Sequence[str] = operator.template_fields  # type: ignore[attr-defined]

        def __init__(self, *, python_callable: Callable[..., Any], op_args: Sequence[Any] | None = None,
                     op_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
            super().__init__(python_callable=python_callable, op_args=op_args, op_kwargs=op_kwargs,
                             kwargs_to_upstream={"python_callable": python_callable, "op_args": op_args,
                                                 "op_kwargs": op_kwargs}, **kwargs)

    Decorated.__name__ = Decorated.__qualname__ = f"_{operator.__name__}Decorated"
    return Decorated


_TxnSparkDecorated = _decorated_operator(SparkTransactionOperator, "txn_spark", ("spark", "txn"))
_TxnDecorated = _decorated_operator(TransactionPythonOperator, "txn", ("txn",))
_TxnReadDecorated = _decorated_operator(SnapshotReadOperator, "txn_read", ())
_TxnCheckDecorated = _decorated_operator(TransactionCheckOperator, "txn_check", ())


def txn_spark_task(python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None,
                   **kwargs: Any) -> Any:
    """`@task.txn_spark`: the function `(spark, txn, ...)` as a SparkTransactionOperator (module docstring)."""
    return _factory(python_callable, multiple_outputs, _TxnSparkDecorated, "txn_spark", ("spark", "txn"), kwargs)


def txn_task(python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None,
             **kwargs: Any) -> Any:
    """`@task.txn`: the function `(txn, ...)` as a TransactionPythonOperator (module docstring)."""
    return _factory(python_callable, multiple_outputs, _TxnDecorated, "txn", ("txn",), kwargs)


def txn_read_task(python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None,
                  **kwargs: Any) -> Any:
    """`@task.txn_read(tables=[...])`: the function, given the tables at ONE snapshot, as a SnapshotReadOperator
    (module docstring)."""
    from airflow.sdk.bases.decorator import task_decorator_factory

    if "tables" not in kwargs:
        raise TypeError("@task.txn_read needs tables=[...] (the tables to read at one snapshot)")

    def decorate(fn: Callable[..., Any]) -> Any:
        if not callable(fn):
            raise TypeError(f"@task.txn_read decorates a function, got {fn!r}")
        return task_decorator_factory(_reader(fn, kwargs["tables"]), multiple_outputs=multiple_outputs,
                                      decorated_operator_class=_TxnReadDecorated, **kwargs)

    return decorate if python_callable is None else decorate(python_callable)


def txn_check_task(python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None,
                   **kwargs: Any) -> Any:
    """`@task.txn_check`: the function, returning a list of checks, as a TransactionCheckOperator (module
    docstring); operator arguments (engine, conn_id, ...) go to the decorator."""
    return _factory(python_callable, multiple_outputs, _TxnCheckDecorated, "txn_check", (), kwargs)


def _factory(python_callable: Callable[..., Any] | None, multiple_outputs: bool | None, operator: type,
             decorator: str, given: Sequence[str], kwargs: dict[str, Any]) -> Any:
    from airflow.sdk.bases.decorator import task_decorator_factory

    def decorate(fn: Callable[..., Any]) -> Any:
        return task_decorator_factory(_without(fn, given, decorator), multiple_outputs=multiple_outputs,
                                      decorated_operator_class=operator, **kwargs)

    return decorate if python_callable is None else decorate(python_callable)


__all__ = ["txn_check_task", "txn_read_task", "txn_spark_task", "txn_task"]
