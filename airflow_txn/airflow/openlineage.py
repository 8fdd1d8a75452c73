"""A TxnLineage (lineage.py) as the OpenLineage provider takes it: the provider's OperatorLineage, with a
dataset per table (namespace `airflow-txn://<warehouse>`, name `ns.name`), its version facet (the CSN), a
commit's output statistics (rows, bytes), and the `airflowTxn` run facet. Imports the provider: loaded only
by LineageMixin's methods, which the provider alone calls."""

from __future__ import annotations

from typing import Any

from airflow.providers.openlineage.extractors import OperatorLineage
from attrs import define
from openlineage.client.generated.base import Dataset, InputDataset, OutputDataset, RunFacet
from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet
from openlineage.client.generated.output_statistics_output_dataset import OutputStatisticsOutputDatasetFacet

from airflow_txn.airflow.lineage import TableVersion, TxnLineage
from airflow_txn.airflow.provider import INTEGRATION_DOC_URL

RUN_FACET = "airflowTxn"
"""The key of AirflowTxnRunFacet in a run's facets."""


@define
class AirflowTxnRunFacet(RunFacet):
    """The warehouse transaction a task worked in: its tid and state, the snapshot it read at, the CSN it
    committed at (once committed), and the staging key of a writer's try."""

    tid: str
    state: str | None = None
    snapshotCsn: int | None = None  # OpenLineage's facets spell fields in camelCase
    commitCsn: int | None = None
    stagingKey: str | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{INTEGRATION_DOC_URL}#lineage"


def _version(table: TableVersion) -> dict[str, Any]:
    return {} if table.csn is None else {"version": DatasetVersionDatasetFacet(datasetVersion=str(table.csn))}


def input_dataset(table: TableVersion) -> InputDataset:
    namespace, name = table.namespace_and_name
    return InputDataset(namespace=namespace, name=name, facets=_version(table))


def output_dataset(table: TableVersion) -> OutputDataset:
    namespace, name = table.namespace_and_name
    return OutputDataset(namespace=namespace, name=name, facets=_version(table), outputFacets={
        "outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=table.rows, size=table.bytes)})


def operator_lineage(lineage: TxnLineage | None) -> OperatorLineage[Dataset, RunFacet]:
    """The OperatorLineage of a try that recorded `lineage` (None: an empty one)."""
    if lineage is None:
        return OperatorLineage()
    run_facets: dict[str, RunFacet] = {}
    if lineage.tid is not None:
        run_facets[RUN_FACET] = AirflowTxnRunFacet(tid=lineage.tid, state=lineage.state,
                                                   snapshotCsn=lineage.snapshot_csn, commitCsn=lineage.commit_csn,
                                                   stagingKey=lineage.key)
    inputs: list[Dataset] = [input_dataset(t) for t in lineage.inputs]
    outputs: list[Dataset] = [output_dataset(t) for t in lineage.outputs]
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run_facets)
