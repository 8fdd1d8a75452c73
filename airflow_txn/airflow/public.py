"""The Airflow layer's public names, each listed ONCE with its kind and home module (PUBLIC); every
`__all__` and lazy import of the layer's packages and of the `airflow_txn.operators` /
`airflow_txn.sensors` shims, and provider.py's module lists, are derived from it. Imports nothing
heavy (Airflow reads provider.py in every component; importing a package of the layer loads no Airflow).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_txn.airflow._lazy import lazy_exports, require_airflow


class Kind(enum.Enum):
    """What a public name is."""

    OPERATOR = "operator"
    SENSOR = "sensor"
    TRIGGER = "trigger"
    HOOK = "hook"
    TASK_GROUP = "task group"
    ASSET = "asset helper"
    SPARK = "spark helper"
    CONSTANT = "constant"


@dataclass(frozen=True)
class Public:
    """One public name: `from <module> import <name>` is where it is defined."""

    name: str
    kind: Kind
    module: str


PUBLIC = (
    Public("BeginTransactionOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.transaction"),
    Public("CommitTransactionOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.transaction"),
    Public("RollbackTransactionOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.transaction"),
    Public("TransactionOutcomeOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.transaction"),
    Public("SparkTransactionOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.spark"),
    Public("TransactionPythonOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.python"),
    Public("SnapshotReadOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.read"),
    Public("TransactionCheckOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.check"),
    Public("CompactOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.maintenance"),
    Public("VacuumOperator", Kind.OPERATOR, "airflow_txn.airflow.operators.maintenance"),
    Public("CommitCSNSensor", Kind.SENSOR, "airflow_txn.airflow.sensors.csn"),
    Public("CommitCSNTrigger", Kind.TRIGGER, "airflow_txn.airflow.triggers.csn"),
    Public("CommitLogTrigger", Kind.TRIGGER, "airflow_txn.airflow.triggers.commits"),
    Public("TxnHook", Kind.HOOK, "airflow_txn.airflow.hooks.txn"),
    Public("DEFAULT_CONN_ID", Kind.CONSTANT, "airflow_txn.airflow.hooks.txn"),
    Public("transaction_group", Kind.TASK_GROUP, "airflow_txn.airflow.task_group"),
    Public("TransactionTaskGroup", Kind.TASK_GROUP, "airflow_txn.airflow.task_group"),
    Public("table_asset", Kind.ASSET, "airflow_txn.airflow.assets.tables"),
    Public("commit_alias", Kind.ASSET, "airflow_txn.airflow.assets.tables"),
    Public("commit_watcher", Kind.ASSET, "airflow_txn.airflow.assets.tables"),
    Public("table_identity", Kind.ASSET, "airflow_txn.airflow.assets.tables"),
    Public("snapshot_of", Kind.ASSET, "airflow_txn.airflow.assets.readers"),
    Public("spark_session", Kind.SPARK, "airflow_txn.airflow.operators.spark"),
)

BY_NAME = {p.name: p for p in PUBLIC}

# The packages that re-export public names (besides each name's home module), and the kinds each one does.
PACKAGES: dict[str, tuple[Kind, ...]] = {
    "airflow_txn.airflow": tuple(Kind),
    "airflow_txn.airflow.operators": (Kind.OPERATOR,),
    "airflow_txn.airflow.sensors": (Kind.SENSOR,),
    "airflow_txn.airflow.triggers": (Kind.TRIGGER,),
    "airflow_txn.airflow.hooks": (Kind.HOOK, Kind.CONSTANT),
    "airflow_txn.airflow.assets": (Kind.ASSET,),
    "airflow_txn.operators": (Kind.OPERATOR,),  # the shims README.md imports from
    "airflow_txn.sensors": (Kind.SENSOR,),
}


def of_kind(kind: Kind) -> list[Public]:
    return [p for p in PUBLIC if p.kind is kind]


def exports(package: str) -> dict[str, str]:
    """{name: home module} of the names `package` re-exports."""
    kinds = PACKAGES[package]
    return {p.name: p.module for p in PUBLIC if p.kind in kinds}


def names(package: str) -> list[str]:
    """The `__all__` of `package`."""
    return sorted(exports(package))


def lazy_getattr(package: str) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: imports a name's home module (and so Airflow) on first use."""
    return lazy_exports(package, exports(package), before=require_airflow)


def modules(kind: Kind) -> list[str]:
    """The home modules of the names of `kind`, in PUBLIC's order (provider info lists them)."""
    return list(dict.fromkeys(p.module for p in of_kind(kind)))


def class_path(name: str) -> str:
    """`module.Name` of a public name, as Airflow's provider info and connection types spell a class."""
    return f"{BY_NAME[name].module}.{name}"
