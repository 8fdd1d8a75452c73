"""D27 point 4 on the ZooKeeper oracle: an incompatible table change (a column dropped, the table dropped or renamed)
and a concurrent write of that table never both commit, whichever reaches the log first, however far the first got: its
record only in the log (its committer stopped there, nothing mirrored), mirrored but not applied, or still committing
(no record yet). Before this was closed, a change recorded but not mirrored passed the other's check (found by the
random histories on postgres-zookeeper, seeds 823238 and 409836)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

pytest.importorskip("kazoo")

from airflow_txn import Transaction, Warehouse
from airflow_txn.catalog import txn_records
from airflow_txn.core import apply, commit_external, log_mirror
from airflow_txn.errors import SerializationError
from airflow_txn.oracle.zookeeper import ZooKeeperOracle
from tests.helpers import events, ids, make_tables
from tests.zookeeper.conftest import OpenWh

pytestmark = pytest.mark.zookeeper

Change = Callable[[Transaction], None]
CHANGES: dict[str, Change] = {
    "drop_column": lambda t: t.drop_column("sales.events", "value"),
    "drop_table": lambda t: t.drop_table("sales.events"),
    "rename_table": lambda t: t.rename_table("sales.events", "sales.renamed"),
}
STAGES = ["committing", "recorded", "mirrored"]


def _oracle(wh: Warehouse) -> ZooKeeperOracle:
    oracle = wh.runtime.oracle
    assert isinstance(oracle, ZooKeeperOracle)
    return oracle


def _commit_until(wh: Warehouse, t: Transaction, stage: str) -> None:
    """Run `t`'s commit as far as `stage`, then stop, as a committer that died there: `committing` (prepared, no
    record), `recorded` (its checks passed and its record is in the log: the commit point, nothing mirrored),
    `mirrored` (the record in the catalog too, the transaction committed, its rows not stamped yet)."""
    rt = wh.runtime
    oracle = _oracle(wh)
    _, tables, changed = commit_external._prepare(rt, t.tid, oracle, None)
    if stage == "committing":
        return
    with rt.catalog.read() as conn:
        row = txn_records.fetch(conn, t.tid)
    entry = commit_external.entry_of(t.tid, tables, None)
    csn = commit_external._record(rt, oracle, entry, row, changed)
    if stage == "mirrored":
        assert log_mirror.catch_up(rt) == 1
    assert oracle.commit_csn(t.tid) == csn


def _settle(wh: Warehouse, first: Transaction, stage: str) -> None:
    """Finish what the first committer left: resume its commit (committing), or mirror and apply its record."""
    if stage == "committing":
        first.commit()
    else:
        log_mirror.catch_up(wh.runtime)
        apply.apply_pending(wh.runtime)
    assert first.state == "committed"


def _changed(wh: Warehouse, change: str) -> None:
    """The change committed and no row of the refused append is in the table."""
    if change == "drop_column":
        assert "value" not in wh.schema("sales.events").names
        assert ids(wh.read("sales.events")) == []
    elif change == "drop_table":
        assert "sales.events" not in wh.tables()
    else:
        assert "sales.events" not in wh.tables()
        assert ids(wh.read("sales.renamed")) == []


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("change", list(CHANGES))
def test_an_append_beside_a_table_change_that_reached_the_log_first_is_refused(make_wh: OpenWh, change: str,
                                                                               stage: str) -> None:
    wh = make_wh()
    make_tables(wh)
    writer = wh.begin()
    writer.append("sales.events", events([1, 2]))
    changer = wh.begin()
    CHANGES[change](changer)
    _commit_until(wh, changer, stage)
    with pytest.raises(SerializationError, match=changer.tid):
        writer.commit()
    assert writer.state == "rolled_back"
    _settle(wh, changer, stage)
    _changed(wh, change)


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_table_change_beside_an_append_that_reached_the_log_first_is_refused(make_wh: OpenWh, change: str,
                                                                               stage: str) -> None:
    wh = make_wh()
    make_tables(wh)
    changer = wh.begin()
    CHANGES[change](changer)
    writer = wh.begin()
    writer.append("sales.events", events([1, 2]))
    _commit_until(wh, writer, stage)
    with pytest.raises(SerializationError, match=writer.tid):
        changer.commit()
    assert changer.state == "rolled_back"
    _settle(wh, writer, stage)
    assert ids(wh.read("sales.events")) == [1, 2]
    assert wh.schema("sales.events").names == ["id", "day", "value"]


def test_a_compatible_change_in_the_log_does_not_hold_off_an_append(make_wh: OpenWh) -> None:
    """Adding a column keeps the meaning of rows written before it (D27 point 4): an append beside it commits."""
    wh = make_wh()
    make_tables(wh)
    writer = wh.begin()
    writer.append("sales.events", events([1]))
    changer = wh.begin()
    changer.add_column("sales.events", pa.field("note", pa.string()))
    _commit_until(wh, changer, "recorded")
    writer.commit()
    _settle(wh, changer, "recorded")
    assert ids(wh.read("sales.events")) == [1]
    assert wh.schema("sales.events").names == ["id", "day", "value", "note"]


def test_a_table_change_waits_for_no_one_once_the_append_beside_it_rolled_back(make_wh: OpenWh) -> None:
    """A writer that was committing and then rolled back holds off nothing: the change commits."""
    wh = make_wh()
    make_tables(wh)
    writer = wh.begin()
    writer.append("sales.events", events([1]))
    changer = wh.begin()
    changer.drop_column("sales.events", "value")
    _commit_until(wh, writer, "committing")
    writer.rollback()
    changer.commit()
    _changed(wh, "drop_column")
