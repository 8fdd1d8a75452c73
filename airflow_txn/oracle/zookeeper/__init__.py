"""The ZooKeeper CSN oracle (kazoo) as a package of recipe-sized modules, kazoo's `recipe/` style.

Each module does one job; the arrows only go down this list (no module imports one above it):
  kind.py        the registry entry (ZOOKEEPER): parses a spec, imports oracle.py only when opening (no kazoo)
  oracle.py      `ZooKeeperOracle`, the facade the engine uses (CsnOracle + ExternalLog): wires the recipes
  compaction.py  removing sealed, applied segments and old abort decisions
  decisions.py   per transaction: the commit multi-op (THE COMMIT POINT) or the abort
  records.py     reading commit records
  segments.py    creating the layout; the segments, the open one, sealing
  session.py     the kazoo client, its retry policy and time limits -> OracleUnavailableError
  group.py       group commit: concurrent appends of a process share one multi-op (no kazoo)
  layout.py      which node holds what under the chroot, and their encodings (no kazoo)
  spec.py        the spec `zookeeper://hosts/chroot?options` (no kazoo)

Importing this package loads no kazoo (oracle/registry.py imports it for every process): `ZooKeeperOracle` and
`ABORT_DECISION_TTL` are loaded on first use, from oracle.py and compaction.py.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from airflow_txn.oracle.zookeeper.kind import ZOOKEEPER, ZooKeeperKind
from airflow_txn.oracle.zookeeper.spec import DEFAULT_CHROOT, ZooKeeperSpec

if TYPE_CHECKING:
    from airflow_txn.oracle.zookeeper.compaction import ABORT_DECISION_TTL
    from airflow_txn.oracle.zookeeper.oracle import ZooKeeperOracle

__all__ = ["ABORT_DECISION_TTL", "DEFAULT_CHROOT", "ZOOKEEPER", "ZooKeeperKind", "ZooKeeperOracle", "ZooKeeperSpec"]

_LAZY = {"ZooKeeperOracle": "airflow_txn.oracle.zookeeper.oracle",
         "ABORT_DECISION_TTL": "airflow_txn.oracle.zookeeper.compaction"}


def __getattr__(name: str) -> Any:
    """The names whose modules load kazoo, imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
