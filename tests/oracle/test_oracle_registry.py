"""The oracle registry (airflow_txn/oracle/registry.py): configuration, make_oracle, doctor and the
commit metric all find an oracle's kind there, so a new oracle is its module plus one entry in KINDS
(issue 17, item 2: one home per concept)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import Catalog
from airflow_txn.cli import doctor
from airflow_txn.core.config import WarehouseConfig
from airflow_txn.errors import TxnError
from airflow_txn.oracle import registry
from airflow_txn.oracle.sql import SQL, SqlKind, SqlOracle
from airflow_txn.oracle.zookeeper import ZOOKEEPER, ZooKeeperSpec
from airflow_txn.telemetry import metrics


class ToyOracle(SqlOracle):
    """A new kind of oracle for the test: the SQL counter under another name."""

    name = "toy"


class ToyKind(SqlKind):
    name = ToyOracle.name
    form = "toy"

    def open(self, spec: str, catalog: Catalog, timeout: float | None = None) -> ToyOracle:
        self.parse(spec)
        return ToyOracle(catalog)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyKind:
    """The toy kind registered: one more entry in KINDS, nothing else."""
    kind = ToyKind()
    monkeypatch.setattr(registry, "KINDS", (*registry.KINDS, kind))
    return kind


def test_every_spec_finds_its_kind() -> None:
    assert registry.kind_of("sql") is SQL
    assert registry.kind_of("zookeeper://zk1:2181,zk2:2181/airflow_txn") is ZOOKEEPER
    assert isinstance(ZOOKEEPER.parse("zookeeper://zk1:2181/x?timeout=3"), ZooKeeperSpec)
    assert [k.name for k in registry.KINDS] == ["sql", "zookeeper"]


@pytest.mark.parametrize("spec", ["etcd://x", "bogus", "sql://x", "zk://h:1/x", ""])
def test_an_unknown_kind_is_refused_naming_every_known_form(spec: str) -> None:
    with pytest.raises(TxnError, match=r"unknown oracle .*: use 'sql' or 'zookeeper://host:port"):
        registry.kind_of(spec)


def test_a_new_kind_is_one_registry_entry(toy: ToyKind, tmp_path: Path) -> None:
    catalog, root = f"sqlite:///{tmp_path / 'c.db'}", str(tmp_path / "warehouse")
    with pytest.raises(TxnError, match=r"'sql' or 'zookeeper://.*' or 'toy'"):
        WarehouseConfig.resolve(catalog=catalog, root=root, oracle="etcd://x")
    assert WarehouseConfig.resolve(catalog=catalog, root=root, oracle="toy").oracle == "toy"
    recording = metrics.RecordingSink()
    previous = metrics.set_sink(recording)
    wh = Warehouse.open(catalog=catalog, root=root, oracle="toy")
    try:
        assert isinstance(wh.runtime.oracle, ToyOracle)
        wh.create_table("ns.t", pa.schema([("id", pa.int64())]))
        with wh.begin() as t:
            t.append("ns.t", pa.table({"id": [1]}))
        assert wh.watermark_info()["oracle"] == "toy"
    finally:
        wh.close()
        metrics.set_sink(previous)
    [latency] = recording.of(metrics.COMMIT_LATENCY)
    assert latency.tags == {"oracle": "toy"}
    checks = {c["name"]: c for c in doctor.run(catalog, root, "toy", timeout=5)["checks"]}
    assert (checks["config"]["status"], checks["oracle"]["status"]) == ("ok", "ok")
    assert checks["oracle"]["detail"] == "toy: last CSN 2"


def test_the_sql_oracle_takes_no_options(tmp_path: Path) -> None:
    catalog = Catalog(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        with pytest.raises(TxnError, match="takes no options"):
            SQL.open("sql?x=1", catalog)
        assert isinstance(registry.make_oracle("sql", catalog), SqlOracle)
    finally:
        catalog.dispose()
