"""A TxnLineage (lineage.py) as the OpenLineage provider takes it: the provider's OperatorLineage, with a
dataset per table (namespace `airflow-txn://<warehouse>`, name `ns.name`) carrying its version facet (the
CSN), schema facet (the columns, Arrow types as strings) and storage facet, a commit's output statistics
(rows, bytes), and the `airflowTxn` run facet. Imports the provider: loaded only by LineageMixin's methods,
which the provider alone calls."""

from __future__ import annotations

from airflow.providers.openlineage.extractors import OperatorLineage
from attrs import define
from openlineage.client.generated.base import Dataset, DatasetFacet, InputDataset, OutputDataset, RunFacet
from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet
from openlineage.client.generated.output_statistics_output_dataset import OutputStatisticsOutputDatasetFacet
from openlineage.client.generated.schema_dataset import SchemaDatasetFacet, SchemaDatasetFacetFields
from openlineage.client.generated.storage_dataset import StorageDatasetFacet

from airflow_txn.airflow.assets.lineage_records import TableVersion, TxnLineage
from airflow_txn.airflow.provider import INTEGRATION_DOC_URL

RUN_FACET = "airflowTxn"
"""The key of AirflowTxnRunFacet in a run's facets."""
STORAGE_LAYER = "airflow-txn"
"""The storage facet's `storageLayer`: a table's data is Parquet files the catalog makes a table."""
FILE_FORMAT = "parquet"


@define
class AirflowTxnRunFacet(RunFacet):
    """The warehouse transaction a task worked in: its tid and state, the snapshot it read at, the CSN it
    committed at (once committed), and the staging key of a writer's try. A reader outside any transaction
    (SnapshotReadOperator) reports only the snapshot it read at."""

    tid: str | None = None
    state: str | None = None
    snapshotCsn: int | None = None  # OpenLineage's facets spell fields in camelCase
    commitCsn: int | None = None
    stagingKey: str | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{INTEGRATION_DOC_URL}#lineage-openlineage"


class Reported(list[Dataset]):
    """A list of datasets that is true even when empty. The provider's ExtractorManager adds a task's
    declared inlets and outlets (a commit's table Assets) to any event whose lineage lists no dataset;
    our operators' events list exactly what was read and made visible, so an empty list must stay empty."""

    def __bool__(self) -> bool:
        return True


def _facets(table: TableVersion) -> dict[str, DatasetFacet]:
    facets: dict[str, DatasetFacet] = {"storage": StorageDatasetFacet(storageLayer=STORAGE_LAYER,
                                                                      fileFormat=FILE_FORMAT)}
    if table.csn is not None:
        facets["version"] = DatasetVersionDatasetFacet(datasetVersion=str(table.csn))
    if table.fields is not None:
        facets["schema"] = SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=name, type=kind)
                                                      for name, kind in table.fields])
    return facets


def input_dataset(table: TableVersion) -> InputDataset:
    namespace, name = table.namespace_and_name
    return InputDataset(namespace=namespace, name=name, facets=_facets(table))


def output_dataset(table: TableVersion) -> OutputDataset:
    namespace, name = table.namespace_and_name
    return OutputDataset(namespace=namespace, name=name, facets=_facets(table), outputFacets={
        "outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=table.rows, size=table.bytes)})


def operator_lineage(lineage: TxnLineage | None) -> OperatorLineage[Dataset, RunFacet]:
    """The OperatorLineage of a try that recorded `lineage` (None: one with no dataset and no facet)."""
    if lineage is None:
        return OperatorLineage(inputs=Reported(), outputs=Reported())
    run_facets: dict[str, RunFacet] = {}
    if lineage.tid is not None or lineage.snapshot_csn is not None:
        run_facets[RUN_FACET] = AirflowTxnRunFacet(tid=lineage.tid, state=lineage.state,
                                                   snapshotCsn=lineage.snapshot_csn, commitCsn=lineage.commit_csn,
                                                   stagingKey=lineage.key)
    inputs = Reported(input_dataset(t) for t in lineage.inputs)
    outputs = Reported(output_dataset(t) for t in lineage.outputs)
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run_facets)

