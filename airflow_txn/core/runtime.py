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
    """Tables writes have looked up, by the name passed: an append skips the lookup of a table seen before
    (staging.load_table; the version of its schema it used, and so the name, is checked when it registers:
    docs/DESIGN.md, D27). A name may change (a rename) or be given to another table, so nothing else maps names to
    tables through it (commit records carry table ids: log_mirror)."""
    table_directories: dict[int, str] = field(default_factory=dict, compare=False, repr=False)
    """{table id: directory} the commit path has looked up (commit.table_directories): a table's directory never
    changes; its name may (a rename), so a commit record names each table by its version the committing
    transaction sees (commit.table_names), never from a cache."""
