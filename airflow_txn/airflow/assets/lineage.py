"""Lineage of the transaction operators: what a task read, and what a commit made visible, as the operators
record it while they run (TxnLineage, plain data), and LineageMixin, which hands it to the OpenLineage
provider (`get_openlineage_facets_on_start` / `_on_complete` / `_on_failure`, converted by openlineage.py)
when that provider is installed (`pip install 'airflow-txn[openlineage]'`).

What is reported (docs/DESIGN.md, D15), event by event:
- START: no dataset; the `airflowTxn` run facet with the tid when the task's rendered `tid` names one.
- COMPLETE: outputs only on CommitTransactionOperator's, once the commit stood: every table the commit
  changed, its version the commit CSN, with the rows and bytes the commit added. Writers stage: nothing they
  write is visible before the commit, so they report no outputs. Inputs: the tables a task (a writer) or the
  whole transaction (the commit) read through `txn`, the tables CommitCSNSensor waited for and those a
  SnapshotReadOperator (`@task.txn_read`) read; each at the version the read saw: the CSN of the newest
  commit of the table at or below the snapshot.
- FAIL: never an output (a rollback, a failed commit); what the try recorded before failing (a reader's
  inputs), else the `airflowTxn` facet of the transaction the task worked in, its state read at the failure.
- every event of an operator that knows its transaction carries the `airflowTxn` run facet (tid, snapshot,
  state, commit CSN, staging key); a reader's carries the snapshot it read.
Every dataset has the schema facet (the table's columns, Arrow types as strings) and the storage facet.
The provider adds a task's declared inlets and outlets (a commit's table Assets) to any event whose lineage
lists no dataset; openlineage.py's lists keep it from doing so on our operators' events.
Datasets are named as the tables' Assets are (assets.table_uri): namespace `airflow-txn://<warehouse id>`,
name `ns.name`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_txn.airflow.assets.lineage_records import TableVersion as TableVersion
from airflow_txn.airflow.assets.lineage_records import TxnLineage as TxnLineage
from airflow_txn.airflow.assets.lineage_records import dataset_name as dataset_name

if TYPE_CHECKING:
    from airflow_txn.core.transaction import Transaction
    from airflow_txn.core.warehouse import Warehouse
    from airflow_txn.model.results import TransactionInfo


def committed_outputs(info: TransactionInfo, csn: int, warehouse: str) -> tuple[TableVersion, ...]:
    """The tables the commit of `info` at `csn` changed, version `csn`, with the rows and bytes of the parts it
    made visible (a table it only removed rows from: 0)."""
    written: dict[str, list[int]] = {}
    for part in info["parts"]:
        if part["role"] == "created" and part["creation_csn"] == csn:
            totals = written.setdefault(part["table"], [0, 0])
            totals[0] += part["rows"]
            totals[1] += part["bytes"]
        elif part["role"] == "removed" and part["removal_csn"] == csn:
            written.setdefault(part["table"], [0, 0])
    return tuple(TableVersion(warehouse, table, csn, rows, size) for table, (rows, size) in sorted(written.items()))


def described(wh: Warehouse, tables: Iterable[TableVersion]) -> tuple[TableVersion, ...]:
    """`tables` with their columns (the schema facet): a table's schema is the one it was created with."""
    return tuple(replace(t, fields=tuple((f.name, str(f.type)) for f in wh.schema(t.table))) for t in tables)


def read_versions(wh: Warehouse, tables: Iterable[str], snapshot: int, warehouse: str) -> tuple[TableVersion, ...]:
    """`tables` as a read at `snapshot` saw them: each at its newest commit at or below `snapshot`, with its
    columns."""
    return described(wh, (TableVersion(warehouse, t, wh.last_commit_csn(t, at=snapshot)) for t in sorted(set(tables))))


def reader_lineage(wh: Warehouse, tables: Iterable[str], snapshot: int) -> TxnLineage:
    """What a reader outside any transaction (SnapshotReadOperator) reports: the tables it read at `snapshot`."""
    return TxnLineage(None, snapshot_csn=snapshot, inputs=read_versions(wh, tables, snapshot, wh.warehouse_id))


def transaction_reads(wh: Warehouse, tid: str, snapshot: int, warehouse: str, key: str | None = None,
                      attempt: int | None = None) -> tuple[TableVersion, ...]:
    """What transaction `tid` read through `txn` (every task's, or `key`'s under `attempt`), at its snapshot."""
    return read_versions(wh, wh.tables_read(tid, key, attempt), snapshot, warehouse)


def writer_lineage(txn: Transaction, key: str, attempt: int, warehouse: str) -> TxnLineage:
    """What a writer's try reports: its transaction and staging key, and what it read (no outputs: it staged)."""
    reads = transaction_reads(txn.warehouse, txn.tid, txn.snapshot_csn, warehouse, key, attempt)
    return TxnLineage(txn.tid, state="active", snapshot_csn=txn.snapshot_csn, key=key, inputs=reads)


def lineage_wanted() -> bool:
    """True when the OpenLineage provider is installed and enabled (a transport configured): only then do the
    operators spend catalog reads on what they report."""
    try:
        from airflow.providers.openlineage import conf
    except ImportError:
        return False
    return not conf.is_disabled()


def ran_as(context: Mapping[str, Any]) -> tuple[str, str, int, int]:
    """(dag_id, run_id, map_index, try_number) of the running task instance (context["ti"])."""
    return _identity(context["ti"])


def _identity(ti: Any) -> tuple[str, str, int, int]:
    map_index = getattr(ti, "map_index", -1)
    return (str(ti.dag_id), str(ti.run_id), -1 if map_index is None else int(map_index),
            int(getattr(ti, "try_number", 0) or 0))


class LineageMixin:
    """The OpenLineage methods of an operator that records its lineage with `record_lineage` while it runs.

    The provider calls them in the task's process: on start before `execute`, on complete or failure once the
    try ended, on the operator that ran it; what another try or an earlier run (Airflow may reuse an operator
    object) recorded is never reported."""

    txn_lineage: TxnLineage | None = None

    def record_lineage(self, context: Mapping[str, Any], lineage: TxnLineage | Callable[[], TxnLineage]) -> None:
        """Record what this try reports. A callable (lineage that costs catalog reads) is called only when the
        provider is enabled (lineage_wanted); its failure is logged, never the task's."""
        if callable(lineage):
            if not lineage_wanted():
                return
            try:
                lineage = lineage()
            except Exception:
                logging.getLogger(__name__).warning("could not gather this task's lineage", exc_info=True)
                return
        self.txn_lineage = replace(lineage, ran_as=ran_as(context))

    def lineage_of(self, task_instance: Any) -> TxnLineage | None:
        """What the try `task_instance` recorded (None: nothing, e.g. it failed before it knew its transaction)."""
        recorded = self.txn_lineage
        if recorded is None or task_instance is None or recorded.ran_as != _identity(task_instance):
            return None
        return recorded

    def get_openlineage_facets_on_start(self) -> Any:
        """START: no dataset (nothing is read or committed yet: a commit's declared outlets are no output
        before it stood); the `airflowTxn` facet with the tid when the rendered `tid` names one."""
        from airflow_txn.airflow.assets.openlineage import operator_lineage

        tid = lineage_tid(self)
        return operator_lineage(None if tid is None else TxnLineage(tid))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The provider's OperatorLineage of this try (inputs, outputs, the `airflowTxn` run facet)."""
        from airflow_txn.airflow.assets.openlineage import operator_lineage

        return operator_lineage(self.lineage_of(task_instance))

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """What the failed try recorded, without outputs (a rollback or a failed commit made nothing
        visible), else the transaction the task worked in, its state read now (failed_lineage)."""
        from airflow_txn.airflow.assets.openlineage import operator_lineage

        recorded = self.lineage_of(task_instance)
        if recorded is None:
            recorded = failed_lineage(self, task_instance)
        return operator_lineage(None if recorded is None else replace(recorded, outputs=()))


def lineage_tid(operator: Any) -> str | None:
    """The transaction `operator` works in: its rendered `tid` argument when that names a transaction (rendered
    before the START event), else the tid it linked while running (None: no tid, or an unrendered template)."""
    from airflow_txn.model.tid import Tid

    for value in (getattr(operator, "tid", None), getattr(operator, "linked_tid", None)):
        if isinstance(value, str):
            try:
                return str(Tid.parse(value.strip()))
            except Exception:
                continue
    return None


def failed_lineage(operator: Any, task_instance: Any) -> TxnLineage | None:
    """The `airflowTxn` facet of a try that failed before recording its lineage: the tid, the transaction's
    state, snapshot and commit CSN read from the catalog now (only the tid if that read fails: logged), and
    a writer's staging key. None for an operator with no transaction."""
    from airflow_txn.airflow.operators.base import TxnCallableOperator

    tid = lineage_tid(operator)
    if tid is None:
        return None
    key = None
    if isinstance(operator, TxnCallableOperator) and task_instance is not None:
        dag_id, _run, map_index, _try = _identity(task_instance)
        key = f"{dag_id}/{task_instance.task_id}/{map_index}"
    try:
        with operator.hook.warehouse() as wh:
            info = wh.transaction_info(tid)
    except Exception:
        logging.getLogger(__name__).warning("could not read the state of transaction %s", tid, exc_info=True)
        return TxnLineage(tid, key=key)
    return TxnLineage(tid, state=info["state"], snapshot_csn=info["snapshot_csn"], commit_csn=info["commit_csn"],
                      key=key)


def to_openlineage_dataset(asset: Any, lineage_context: Any = None) -> Any:
    """The provider's asset converter (provider info `to_openlineage_converter` of the `airflow-txn` scheme):
    a table's Asset (assets.table_asset) as the OpenLineage dataset the operators report for that table."""
    from airflow.providers.common.compat.openlineage.facet import Dataset

    namespace, name = dataset_name(asset.uri)
    return Dataset(namespace=namespace, name=name)
