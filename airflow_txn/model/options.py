"""The options a caller picks by name: one string enum each, its Literal, and the one parse that checks a value.

    Via               which way airflow_txn.spark's write, read, delete, update and compact go    ViaName
    WriteMode         what a statement does to its table (the engines' adapter.open_write)       WriteModeName
                      SAVE_MODES: the ones a caller asks of a DataFrame write (spark.write)      SaveModeName
    CompactionEngine  what writes a compaction's merged parts (CompactOperator)                  CompactionEngineName
    CheckEngine       what evaluates write-audit-publish checks (TransactionCheckOperator)       CheckEngineName
    Manifests         when snapshot manifests are written (Warehouse.open, $AIRFLOW_TXN_MANIFESTS) ManifestsName

The isolation level (core/isolation.Isolation, IsolationName in model/results.py) is one too. A public parameter
taking an option is typed `Enum | Literal` (a member, or its string as users write it: "native", "overwrite"),
and is normalised ONCE where it enters: `Enum.parse(value, name)` returns the member or raises InvalidOptionError
naming the parameter, the value and the values allowed, before anything is done. Past that point the code holds
and compares members (a member also compares equal to its string, and is its string in JSON and in the catalog).

The Literals are written out for mypy (a type checker cannot compute a Literal from an enum);
tests/core/test_options.py holds each equal to its enum's values.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum, StrEnum
from typing import Literal, Self

from airflow_txn.errors import InvalidOptionError


class Option(StrEnum):
    """Base of the option enums (no members of its own): `parse`, the one check of a caller's value."""

    @classmethod
    def parse(cls, value: object, name: str, allowed: Sequence[Self] | None = None) -> Self:
        """`value` (a member, or a member's string) as a member of `allowed` (None: every member); else
        InvalidOptionError: "<name> must be one of 'a', 'b', got 'c'" (nothing was done)."""
        members = tuple(cls) if allowed is None else tuple(allowed)
        if isinstance(value, str):
            for member in members:
                if value == member.value:
                    return member
        shown = value.value if isinstance(value, Enum) else value
        raise InvalidOptionError(f"{name} must be one of {', '.join(repr(m.value) for m in members)}, got {shown!r}")


class Via(Option):
    """Which way airflow_txn.spark's write, read, delete, update and compact go (spark/via.py)."""

    AUTO = "auto"
    """The default: DATASOURCE for an object-store root or a Spark Connect session, else NATIVE."""
    NATIVE = "native"
    """Spark's own Parquet writer and reader, through Hadoop's filesystem: the root must be a path every executor
    reaches (a local or shared filesystem); fastest where it works."""
    DATASOURCE = "datasource"
    """The "airflow_txn" data source: files written and read through pyarrow.fs on the executors, so any root
    (s3://, gs://, ...) and Spark Connect, with no Hadoop connector."""


ViaName = Literal["auto", "native", "datasource"]


class WriteMode(Option):
    """What a statement does to its table (the core decides what it replaces: adapter.open_write)."""

    APPEND = "append"
    """Adds parts; never conflicts."""
    OVERWRITE = "overwrite"
    """Replaces the whole table, or the listed partitions (then every row must belong to one of them)."""
    REWRITE = "rewrite"
    """Replaces parts it chose by their rows (copy-on-write: the engines' delete, update and merge, and the
    data source's option `replaces`); chosen by an engine, never asked of a DataFrame write (SAVE_MODES)."""


WriteModeName = Literal["append", "overwrite", "rewrite"]
SAVE_MODES = (WriteMode.APPEND, WriteMode.OVERWRITE)
"""The modes a caller asks of a DataFrame write: airflow_txn.spark.write(mode=...), and the data source's
`.mode("append" | "overwrite")` (which Spark itself checks)."""
SaveModeName = Literal["append", "overwrite"]


class CompactionEngine(Option):
    """What writes a compaction's merged parts (CompactOperator's `engine`; docs/COMPACTION.md)."""

    ARROW = "arrow"
    """The core merges in this process with pyarrow: Warehouse.compact."""
    SPARK = "spark"
    """Spark writes the merged files: airflow_txn.spark.compact."""


CompactionEngineName = Literal["arrow", "spark"]


class CheckEngine(Option):
    """What evaluates write-audit-publish checks (TransactionCheckOperator's and transaction_group's engine)."""

    DUCKDB = "duckdb"
    """DuckDB in the task, over the Parquet files of the transaction's manifest (airflow_txn.checks)."""
    SPARK = "spark"
    """Spark, each table read at the transaction's view (airflow_txn.spark.checks.SparkEngine): large tables."""


CheckEngineName = Literal["duckdb", "spark"]


class Manifests(Option):
    """When snapshot manifests are written (Warehouse.open(manifests=...), $AIRFLOW_TXN_MANIFESTS)."""

    OFF = "off"
    """Only on request (Warehouse.write_manifest, `airflow-txn manifest`)."""
    ON_COMMIT = "on-commit"
    """Also after every commit (docs/MANIFESTS.md)."""


ManifestsName = Literal["off", "on-commit"]
