"""A transaction's metadata (catalog schema version 4): a JSON object recorded at begin and merged by
Transaction.annotate while the transaction is open, shown by transaction_info, transactions() and
`airflow-txn show`; bad metadata is refused before anything changes; a catalog of schema version 3
(Alembic's indexes_v2) is upgraded with its transactions kept, their metadata empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_txn import Warehouse
from airflow_txn.catalog import Catalog, migrate, schema
from airflow_txn.cli import main
from airflow_txn.core.bounds import MAX_METADATA_BYTES
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import InvalidArgumentError, TransactionClosedError
from tests.helpers import events, make_tables

RUN = {"airflow": {"dag_id": "backfill", "run_id": "manual__1", "task_id": "begin",
                   "url": "/dags/backfill/runs/manual__1"}}


def test_metadata_is_recorded_at_begin_merged_while_open_and_shown(wh: Warehouse, catalog_url: str, root: Path | str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    make_tables(wh)
    plain = wh.begin()
    assert wh.transaction_info(plain.tid)["metadata"] == {}
    plain.rollback()
    t = wh.begin(label="backfill/manual__1", metadata=RUN)
    assert wh.transaction_info(t.tid)["metadata"] == RUN
    t.append("sales.events", events([1, 2]))
    committing = {"airflow": {**RUN["airflow"], "task_id": "commit", "try_number": 2}}
    assert t.annotate(committing) == committing  # a key's new value replaces the old one
    assert t.annotate({"ticket": "OPS-7"}) == {**committing, "ticket": "OPS-7"}  # other keys are kept
    csn = t.commit()
    info = wh.transaction_info(t.tid)
    assert info["commit_csn"] == csn and info["metadata"] == {**committing, "ticket": "OPS-7"}
    assert [r["metadata"] for r in wh.transactions(limit=2)] == [info["metadata"], {}]
    with pytest.raises(TransactionClosedError):  # a committed transaction's record is final
        t.annotate({"late": True})

    opts = ["--catalog", catalog_url, "--root", str(root)]
    assert main([*opts, "show", t.tid, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"] == info["metadata"]
    assert main([*opts, "show", t.tid]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("metadata"))
    assert json.loads(line.removeprefix("metadata").strip()) == info["metadata"]


@pytest.mark.parametrize("bad", [["a", "list"], {1: "int key"}, {"x": float("nan")}, {"x": object()},
                                 {"x": "y" * MAX_METADATA_BYTES}], ids=["list", "int_key", "nan", "object", "too_big"])
def test_bad_metadata_is_refused_before_anything_changes(wh: Warehouse, bad: object) -> None:
    before = wh.transactions()
    with pytest.raises(InvalidArgumentError, match="metadata"):
        wh.begin(metadata=bad)  # type: ignore[arg-type]
    assert wh.transactions() == before  # no transaction began
    t = wh.begin(metadata={"kept": 1})
    with pytest.raises(InvalidArgumentError, match="metadata"):
        t.annotate(bad)  # type: ignore[arg-type]
    assert wh.transaction_info(t.tid)["metadata"] == {"kept": 1} and t.state == "active"  # still usable
    with pytest.raises(InvalidArgumentError, match="more than"):  # the merged result is bounded too
        t.annotate({"big": "z" * (MAX_METADATA_BYTES - 12)})  # alone it fits: '{"big":"..."}' adds 10 bytes
    t.rollback()


def test_a_schema_version_3_catalog_keeps_its_transactions(catalog_url: str, tmp_path: Path) -> None:
    """A catalog Alembic left at indexes_v2 (schema version 3), holding a transaction: opening it with this
    code (upgrade=True: opening alone never upgrades) runs schema_v4 (and the later revisions), and the old
    transaction reads back with empty metadata."""
    from alembic import command

    catalog = Catalog(catalog_url)
    with catalog.engine.begin() as conn:
        command.upgrade(migrate.config(conn), "indexes_v2")
        columns = {c["name"] for c in sa.inspect(conn).get_columns("txn_transactions")}
        assert "metadata_json" not in columns
        conn.execute(sa.text(
            "INSERT INTO txn_transactions (tid, label, state, isolation, snapshot_csn, lease_seconds, lease_deadline,"
            " created_at, cleanup_done) VALUES ('1-1-0123456789abcdef', 'old', 'rolled_back', 'snapshot', 1, 60, 0,"
            " 0, :done)"), {"done": True})
    catalog.dispose()
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"), upgrade=True) as wh:
        old = wh.transaction_info("1-1-0123456789abcdef")
        assert (old["label"], old["state"], old["metadata"]) == ("old", "rolled_back", {})
        with wh.runtime.catalog.read() as conn:
            assert migrate.read_versions(conn).revision == migrate.HEAD
            version = conn.execute(sa.select(schema.meta.c.value).where(schema.meta.c.key == "schema_version"))
            assert version.scalar() == str(schema.SCHEMA_VERSION)
        new = wh.begin(metadata={"after": "upgrade"})
        assert wh.transaction_info(new.tid)["metadata"] == {"after": "upgrade"}
        new.rollback()


# -- issue 30, item 7: values airflow_txn keeps with a transaction for itself ------------------------------------


def test_a_private_value_is_kept_first_writer_wins_and_never_shown(wh: Warehouse, catalog_url: str,
                                                                    root: Path | str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Transaction.claim_private: the first value stored under a key is the one every later caller gets (a
    Spark Connect session id the transaction's tasks share); it is in no listing, page or CLI output."""
    t = wh.begin(metadata=RUN)
    key = "spark_connect_session sc://spark:15002"
    assert t.claim_private(key, "first") == "first"
    assert t.claim_private(key, "second") == "first"  # first writer wins
    with Warehouse.open(catalog=catalog_url, root=root) as other:  # another process's handle on the same tid
        assert other.attach(t.tid).claim_private(key, "third") == "first"
    assert t.claim_private(key, "replaced", replacing="stale") == "first"  # replaces only the value it names
    assert t.claim_private(key, "replaced", replacing="first") == "replaced"
    assert t.annotate({"ticket": "OPS-7"}) == {**RUN, "ticket": "OPS-7"}  # annotate neither shows nor drops it
    assert t.claim_private(key, "again") == "replaced"
    assert wh.transaction_info(t.tid)["metadata"] == {**RUN, "ticket": "OPS-7"}
    assert all("replaced" not in json.dumps(r["metadata"]) for r in wh.transactions())
    assert main(["--catalog", catalog_url, "--root", str(root), "show", t.tid, "--json"]) == 0
    assert main(["--catalog", catalog_url, "--root", str(root), "show", t.tid]) == 0
    t.commit()
    assert main(["--catalog", catalog_url, "--root", str(root), "log", "--json"]) == 0
    out = capsys.readouterr().out
    assert "OPS-7" in out and "replaced" not in out and "spark_connect_session" not in out
    assert all("replaced" not in json.dumps(e) for e in wh.commit_log())
    with pytest.raises(TransactionClosedError):
        t.claim_private(key, "after the end")


def test_two_callers_at_once_agree_on_one_private_value(wh: Warehouse, catalog_url: str, root: Path | str) -> None:
    import threading

    handles = [Warehouse.open(catalog=catalog_url, root=root) for _ in range(2)]
    try:
        for round_ in range(10):
            tid = wh.begin().tid
            txns = [h.attach(tid) for h in handles]
            start, got = threading.Barrier(2), [""] * 2

            def claim(i: int, start: threading.Barrier, got: list[str], txns: list[Transaction]) -> None:
                start.wait()
                got[i] = txns[i].claim_private("k", f"value-{i}")

            threads = [threading.Thread(target=claim, args=(i, start, got, txns)) for i in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert got[0] == got[1] and got[0] in ("value-0", "value-1"), (round_, got)
            wh.attach(tid).rollback()
    finally:
        for h in handles:
            h.close()


@pytest.mark.parametrize("bad", [("", "v"), ("k", ""), ("k", 5), (5, "v"), ("k", "x" * 1025)])
def test_a_bad_private_value_is_refused(wh: Warehouse, bad: tuple[object, object]) -> None:
    t = wh.begin()
    with pytest.raises(InvalidArgumentError):
        t.claim_private(*bad)  # type: ignore[arg-type]
    assert t.claim_private("k", "v") == "v"
