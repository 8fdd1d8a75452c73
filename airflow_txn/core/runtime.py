"""The services one open warehouse runs on, handed to every protocol function."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_txn.catalog import Catalog
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.model.tid import TidFactory
from airflow_txn.oracle import CsnOracle
from airflow_txn.storage.root import Storage


@dataclass(frozen=True, slots=True)
class Runtime:
    """Catalog, CSN oracle, storage root and this process's tid factory."""

    catalog: Catalog
    oracle: CsnOracle
    storage: Storage
    tids: TidFactory
    tables: dict[str, TableInfo] = field(default_factory=dict, compare=False, repr=False)
    """Tables writes have looked up, by the name passed (and the ZooKeeper mirror, by qualified name): a
    table's id, name and directory never change once created (no drop or rename), so an append skips the lookup
    of a table seen before (staging.load_table; the version of its schema it used is checked when it registers:
    docs/DESIGN.md, D27), and so does log_mirror for the tables a record names."""
    table_names: dict[int, tuple[str, str]] = field(default_factory=dict, compare=False, repr=False)
    """{table id: (qualified name, directory)} the commit path has looked up (commit.table_names), for
    the same reason."""
