"""What a try of a transaction operator reports as lineage (lineage.py, which re-exports these): plain data,
apart from lineage.py so that openlineage.py, which converts it for the OpenLineage provider and which
lineage.py loads inside its methods, imports it without importing lineage.py back."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_txn.airflow.assets.tables import split_table_uri, table_uri
from airflow_txn.airflow.assets.uris import SCHEME


@dataclass(frozen=True)
class TableVersion:
    """One table of one warehouse at one version (a CSN; None: the table had no commit yet), with what a
    commit wrote into it (outputs only)."""

    warehouse: str
    table: str
    csn: int | None
    rows: int | None = None
    bytes: int | None = None
    fields: tuple[tuple[str, str], ...] | None = None
    """The table's columns: (name, Arrow type as a string); None: not looked up."""

    @property
    def namespace_and_name(self) -> tuple[str, str]:
        """The OpenLineage dataset's (namespace, name): `airflow-txn://<warehouse>`, `ns.name`."""
        return dataset_name(table_uri(self.table, self.warehouse))


@dataclass(frozen=True)
class TxnLineage:
    """What one try of a task reports: its transaction and the tables it read and committed."""

    tid: str | None
    state: str | None = None
    snapshot_csn: int | None = None
    commit_csn: int | None = None
    key: str | None = None
    inputs: tuple[TableVersion, ...] = ()
    outputs: tuple[TableVersion, ...] = ()
    ran_as: tuple[str, str, int, int] = field(default=("", "", -1, 0), compare=False)
    """(dag_id, run_id, map_index, try_number) of the try that recorded it."""


def dataset_name(uri: str) -> tuple[str, str]:
    """The OpenLineage (namespace, name) of a table URI (assets.table_uri): `airflow-txn://<warehouse>` and
    `ns.name`; ValueError for any other URI."""
    found = split_table_uri(uri)
    if found is None:
        raise ValueError(f"{uri!r} names no airflow_txn table (airflow-txn://<warehouse>/<ns.name>)")
    warehouse, table = found
    return f"{SCHEME}://{warehouse}", table
