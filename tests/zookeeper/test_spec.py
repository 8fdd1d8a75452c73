"""Parsing the ZooKeeper oracle spec (no server needed), and the error when kazoo is missing."""

from __future__ import annotations

import sys

import pytest

from airflow_txn.catalog import Catalog
from airflow_txn.errors import OracleUnavailableError, TxnError
from airflow_txn.oracle import make_oracle
from airflow_txn.oracle.zookeeper import DEFAULT_CHROOT, ZooKeeperSpec


def test_parse_ensemble_chroot_and_options() -> None:
    spec = ZooKeeperSpec.parse("zookeeper://zk1:2181,zk2:2182,10.0.0.3:2181/airflow_txn/prod?timeout=3&segment_size=50"
                               "&group_commit=0&max_batch=8&session_timeout=6")
    assert spec.hosts == "zk1:2181,zk2:2182,10.0.0.3:2181"
    assert spec.chroot == "/airflow_txn/prod"
    assert (spec.timeout, spec.session_timeout, spec.segment_size, spec.group_commit, spec.max_batch) == (
        3.0, 6.0, 50, False, 8)
    assert spec.url == "zookeeper://zk1:2181,zk2:2182,10.0.0.3:2181/airflow_txn/prod"


def test_defaults() -> None:
    spec = ZooKeeperSpec.parse("zookeeper://127.0.0.1:2181")
    assert spec.chroot == DEFAULT_CHROOT and spec.group_commit and spec.segment_size == 1000


@pytest.mark.parametrize("bad", [
    "zookeeper://", "zookeeper://host/x", "zookeeper://h:1,h/x", "zookeeper://h:1/../etc", "zookeeper://h:1/a b",
    "zookeeper://h:1/x?timeout=0", "zookeeper://h:1/x?segment_size=-1", "zookeeper://h:1/x?colour=red",
    "zookeeper://h:1/x?group_commit=maybe", "zk://h:1/x",
])
def test_bad_specs_are_refused_with_the_expected_form(bad: str) -> None:
    with pytest.raises(TxnError):
        ZooKeeperSpec.parse(bad)


def test_missing_kazoo_says_what_to_install(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kazoo", None)
    monkeypatch.setitem(sys.modules, "kazoo.client", None)
    monkeypatch.delitem(sys.modules, "airflow_txn.oracle.zookeeper.oracle", raising=False)
    catalog = Catalog(f"sqlite:///{tmp_path}/c.db")
    try:
        with pytest.raises(OracleUnavailableError, match=r"pip install 'airflow-txn\[zookeeper\]'"):
            make_oracle("zookeeper://127.0.0.1:2181/x", catalog)
    finally:
        catalog.dispose()


def test_next_csn_of_the_zookeeper_oracle_is_a_typed_error_saying_what_to_call(tmp_path: object) -> None:
    """issue 17, item 5: no AssertionError as an API. The ZooKeeper oracle allocates CSNs in its log's
    append, never in a catalog transaction; asking it for one is a TxnError naming the right call."""
    pytest.importorskip("kazoo")
    from airflow_txn.oracle.zookeeper import ZooKeeperOracle

    catalog = Catalog(f"sqlite:///{tmp_path}/c.db")
    catalog.initialize()
    oracle = ZooKeeperOracle(ZooKeeperSpec.parse("zookeeper://127.0.0.1:1/x"), catalog)  # connects on first use
    try:
        with catalog.write() as conn, pytest.raises(TxnError, match=r"external_log\.append"):
            oracle.next_csn(conn)
    finally:
        oracle.close()
        catalog.dispose()
