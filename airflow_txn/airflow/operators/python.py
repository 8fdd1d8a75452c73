"""TransactionPythonOperator: run a plain Python callable (pyarrow, pandas, an API client) inside the DAG
run's transaction, as SparkTransactionOperator does for Spark.

    def load(txn, day, **context):
        txn.append("shop.rates", pyarrow_table_for(day))

    TransactionPythonOperator(task_id="load", python_callable=load, op_kwargs={"day": "{{ ds }}"})

The callable gets `txn`, attached to the transaction (inside a transaction_group: the group's; else `tid`)
with its writes keyed by (dag_id, task_id, map_index) and the try number as attempt: a retry replaces what
its failed try staged, a zombie try is refused, a failed try withdraws its writes at once (operators/base.py
keyed_try). Then `op_args`, and the task context plus `op_kwargs` as keyword arguments (only those it names,
unless it takes **kwargs). The lease is renewed while the callable runs. `@task.txn` (decorators.py) is its
TaskFlow form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_txn.airflow.assets.lineage import LineageMixin, writer_lineage
from airflow_txn.airflow.operators.base import (
    TxnCallableOperator,
    call_with_context,
    keyed_try,
    require_tid,
    run_ids,
    task_key,
)
from airflow_txn.airflow.plugins.links import TransactionLink
from airflow_txn.airflow.version_compat import Context


class TransactionPythonOperator(LineageMixin, TxnCallableOperator):
    """Run `python_callable(txn, *op_args, **context_and_op_kwargs)` in transaction `tid`.

    :param python_callable: the work; its return value is the XCom (keep it JSON-serialisable).
    :param tid: the transaction id (BeginTransactionOperator's XCom); inside a transaction_group it defaults
        to the group's.
    :param op_args: extra positional arguments, after txn.
    :param op_kwargs: extra keyword arguments (templated; the usual target of `.expand()`).
    :param conn_id: the airflow_txn connection.

    Lineage (OpenLineage provider): the tables the callable read through `txn` as inputs; no outputs (its
    writes are staged: the commit reports them).
    """

    template_fields: Sequence[str] = ("tid", "op_args", "op_kwargs", "conn_id")
    template_fields_renderers = {"op_kwargs": "py"}
    ui_color = "#c6e2f5"
    operator_extra_links = (TransactionLink(),)

    def execute(self, context: Context) -> Any:
        tid = self.linked_tid = require_tid(self.tid, self.task_id)
        _dag, _run, _task, _map, try_number = run_ids(context)
        with keyed_try(self.hook, tid, context, self.task_id, self.log) as txn:
            self.log.info("running %s in transaction %s (key %s, attempt %d)",
                          getattr(self.python_callable, "__name__", "the callable"), tid, task_key(context),
                          try_number)
            result = call_with_context(self.python_callable, [txn, *self.op_args], {**context, **self.op_kwargs})
            self.record_lineage(context, lambda: writer_lineage(txn, task_key(context), try_number,
                                                                txn.warehouse.warehouse_id))
            return result
