"""Layering: importing and using the core engine (and cli) loads neither Airflow nor Spark nor kazoo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The layers above the core (docs/DESIGN.md, Layers: the Airflow and Spark layers); every other module is core or cli.
UPPER_LAYERS = {"airflow", "spark", "operators", "sensors", "triggers", "hooks", "hook", "plugin", "plugins",
                "listener", "listeners", "task_group", "dags", "example_dags", "providers"}

# The ZooKeeper oracle's kazoo parts (airflow_txn/oracle/zookeeper/ but its __init__, kind, spec, layout and
# group commit) are where kazoo belongs: `make_oracle` imports them only for a zookeeper:// oracle. The walk
# below leaves them out (and so loads the package's kazoo-free modules); their own test loads them.
OPTIONAL_ADAPTERS = {f"airflow_txn.oracle.zookeeper.{part}"
                     for part in ("oracle", "session", "segments", "records", "decisions", "compaction")}

# Run in a fresh interpreter; prints sys.modules after each step as one JSON object.
PROBE = r"""
import importlib, json, pkgutil, sys, tempfile
seen = {}
import airflow_txn
from airflow_txn import Warehouse, Transaction  # the package loads its names on first use
seen["import"] = sorted(sys.modules)

import pyarrow as pa
d = tempfile.mkdtemp()
wh = airflow_txn.Warehouse.open(catalog=f"sqlite:///{d}/c.db", root=f"{d}/w")
wh.create_table("ns.t", pa.schema([("id", pa.int64())]))
with wh.begin() as t:
    t.append("ns.t", pa.table({"id": [1]}))
assert wh.read("ns.t").num_rows == 1
wh.vacuum(retention_seconds=0)
wh.recover()
wh.close()
seen["use"] = sorted(sys.modules)

for info in pkgutil.walk_packages(airflow_txn.__path__, "airflow_txn."):
    if info.name.split(".")[1] not in UPPER and info.name not in OPTIONAL:
        importlib.import_module(info.name)
seen["all_core"] = sorted(sys.modules)
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def seen() -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_TXN_")}
    env["PYTHONPATH"] = str(REPO)
    code = f"UPPER = {sorted(UPPER_LAYERS)!r}\nOPTIONAL = {sorted(OPTIONAL_ADAPTERS)!r}\n{PROBE}"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    loaded: dict[str, list[str]] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def forbidden(modules: list[str]) -> list[str]:
    """Modules of Airflow (airflow, airflow.*; not airflow_txn), Spark (pyspark, py4j) or kazoo."""
    return [m for m in modules if m.split(".")[0] in {"airflow", "pyspark", "py4j", "kazoo"}]


def test_forbidden_recognises_the_heavy_layers() -> None:
    names = ["airflow", "airflow.models", "pyspark.sql", "py4j", "kazoo.client", "airflow_txn", "airflow_txn.spark",
             "airflowish"]
    assert forbidden(names) == ["airflow", "airflow.models", "pyspark.sql", "py4j", "kazoo.client"]


def test_importing_the_core_loads_no_heavy_layer(seen: dict[str, list[str]]) -> None:
    assert "airflow_txn.core.warehouse" in seen["import"]  # the probe does see what it imported
    assert forbidden(seen["import"]) == []


def test_importing_the_core_loads_no_pandas(seen: dict[str, list[str]]) -> None:
    """pyarrow.dataset loads pandas (about 0.4 s of a process's start): the core imports it where an expression
    is evaluated or a dataset made, so a CLI call, a worker or a Spark Python worker that never does starts
    without it."""
    assert {"pyarrow.dataset", "pandas"}.isdisjoint(seen["import"])


def test_using_the_core_loads_no_heavy_layer(seen: dict[str, list[str]]) -> None:
    assert "airflow_txn.core.vacuum" in seen["use"] and "pyarrow.parquet" in seen["use"]
    assert forbidden(seen["use"]) == []


def test_every_core_and_cli_module_loads_no_heavy_layer(seen: dict[str, list[str]]) -> None:
    assert "airflow_txn.cli" in seen["all_core"]
    assert forbidden(seen["all_core"]) == []


@pytest.mark.parametrize("adapter", sorted(OPTIONAL_ADAPTERS))
def test_the_zookeeper_adapter_loads_kazoo_but_no_upper_layer(adapter: str) -> None:
    pytest.importorskip("kazoo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_TXN_")}
    env["PYTHONPATH"] = str(REPO)
    code = f"import sys, {adapter}; print(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.split()
    assert adapter in loaded and "kazoo.client" in loaded, "the adapter is what loads kazoo"
    assert [m for m in forbidden(loaded) if m.split(".")[0] != "kazoo"] == [], "no Airflow or Spark"
    ours = [m for m in loaded if m.startswith("airflow_txn.")]
    assert [m for m in ours if m.split(".")[1] in UPPER_LAYERS | {"cli"}] == [], "no upper layer of airflow_txn"


def test_no_public_name_of_a_lazy_package_is_also_one_of_its_modules() -> None:
    """`airflow_txn.spark.merge` is a function the package loads on first use (its module `__getattr__`); a module
    of the same name, once imported by anyone (Python then sets it as the package's attribute), shadowed it, and
    `txn_spark.merge(...)` raised "'module' object is not callable" in any process that had imported every
    module of the package first (as tests/spark/test_engine_calls.py does)."""
    import pkgutil

    import airflow_txn.spark as spark_package

    modules = {info.name for info in pkgutil.iter_modules(spark_package.__path__)}
    assert not modules & set(spark_package.__all__), modules & set(spark_package.__all__)
