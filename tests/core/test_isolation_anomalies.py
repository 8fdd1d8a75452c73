"""Adya's anomalies P0, P1, G1b, P4, A5A and A5B under snapshot and serializable isolation."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn import Transaction, Warehouse
from airflow_txn.errors import SerializationError, TransactionClosedError
from tests.helpers import ACCOUNTS, EVENTS, accounts, events, ids

LEVELS = ["snapshot", "serializable"]
DOCTORS = pa.schema([("name", pa.string()), ("on_call", pa.bool_())])


def _balances(table: pa.Table) -> dict[int, int]:
    return {r["id"]: r["balance"] for r in table.to_pylist()}


def _seed_accounts(wh: Warehouse, *parts: dict[int, int]) -> int:
    """bank.accounts with one committed part per dict; returns the CSN."""
    wh.create_table("bank.accounts", ACCOUNTS)
    with wh.begin() as t:
        for rows in parts:
            t.append("bank.accounts", accounts(rows))
    return wh.readable_csn()


def _balance(reader: Transaction | Warehouse, account: int) -> int:
    rows = reader.read("bank.accounts", filter=pc.field("id") == account).to_pylist()
    assert len(rows) == 1, rows
    return int(rows[0]["balance"])


# -- P0 dirty write ---------------------------------------------------------------------------------
@pytest.mark.parametrize("isolation", LEVELS)
def test_p0_dirty_write_is_prevented(wh: Warehouse, open_wh: Callable[[], Warehouse], isolation: str) -> None:
    _seed_accounts(wh, {1: 10, 2: 20})
    t1 = wh.begin(isolation=isolation)
    t2 = open_wh().begin(isolation=isolation)
    t1.update("bank.accounts", pc.field("id") == 1, {"balance": 11})
    with pytest.raises(SerializationError):  # would overwrite T1's uncommitted write
        t2.update("bank.accounts", pc.field("id") == 1, {"balance": 12})
    with pytest.raises(TransactionClosedError):  # after the conflict T2 can only roll back
        t2.overwrite("bank.accounts", accounts({1: 13, 2: 23}))
    t2.rollback()
    t1.commit()
    assert t2.state == "rolled_back"
    assert _balances(wh.read("bank.accounts")) == {1: 11, 2: 20}


def test_p0_dirty_write_prevented_even_when_first_writer_aborts(wh: Warehouse) -> None:
    _seed_accounts(wh, {1: 10})
    t1 = wh.begin()
    t2 = wh.begin()
    t1.delete("bank.accounts", pc.field("id") == 1)
    with pytest.raises(SerializationError):
        t2.overwrite("bank.accounts", accounts({1: 99}))
    t1.rollback()
    t2.rollback()
    assert _balances(wh.read("bank.accounts")) == {1: 10}
    with wh.begin() as t3:  # the released part can be written again
        t3.update("bank.accounts", pc.field("id") == 1, {"balance": 30})
    assert _balances(wh.read("bank.accounts")) == {1: 30}


# -- P1 dirty read ----------------------------------------------------------------------------------
@pytest.mark.parametrize("isolation", LEVELS)
def test_p1_dirty_read_is_prevented(wh: Warehouse, open_wh: Callable[[], Warehouse], isolation: str) -> None:
    _seed_accounts(wh, {1: 10})
    other = open_wh()
    t1 = wh.begin(isolation=isolation)
    t1.update("bank.accounts", pc.field("id") == 1, {"balance": 999})
    t1.append("bank.accounts", accounts({2: 5}))
    assert _balance(t1, 1) == 999  # a transaction reads its own writes
    t2 = other.begin(isolation=isolation)  # begun while T1 is in flight
    assert _balances(t2.read("bank.accounts")) == {1: 10}
    assert _balances(other.read("bank.accounts")) == {1: 10}
    t1.rollback()  # T1 aborts: nobody ever saw 999
    assert _balances(t2.read("bank.accounts")) == {1: 10}
    assert _balances(other.read("bank.accounts")) == {1: 10}
    assert t2.commit() == t2.snapshot_csn


# -- G1b intermediate read --------------------------------------------------------------------------
@pytest.mark.parametrize("isolation", LEVELS)
def test_g1b_intermediate_read_is_prevented(wh: Warehouse, open_wh: Callable[[], Warehouse],
                                            isolation: str) -> None:
    seeded = _seed_accounts(wh, {1: 10})
    other = open_wh()
    t1 = wh.begin(isolation=isolation)
    t1.update("bank.accounts", pc.field("id") == 1, {"balance": 50})  # intermediate value
    t2 = other.begin(isolation=isolation)
    assert _balance(t2, 1) == 10
    assert _balance(other, 1) == 10
    t1.update("bank.accounts", pc.field("id") == 1, {"balance": 60})  # final value
    assert _balance(t1, 1) == 60
    csn = t1.commit()
    assert _balance(t2, 1) == 10  # still its snapshot
    assert _balance(other, 1) == 60
    # no snapshot anywhere in history shows the intermediate value
    history = {c: _balances(wh.read("bank.accounts", csn=c)).get(1) for c in range(1, csn + 1)}
    assert 50 not in history.values()
    assert history[seeded] == 10 and history[csn] == 60
    assert t2.commit() == t2.snapshot_csn


# -- P4 lost update ---------------------------------------------------------------------------------
@pytest.mark.parametrize("isolation", LEVELS)
def test_p4_lost_update_first_committer_wins(wh: Warehouse, open_wh: Callable[[], Warehouse],
                                             isolation: str) -> None:
    _seed_accounts(wh, {1: 100})
    t1 = wh.begin(isolation=isolation)
    t2 = open_wh().begin(isolation=isolation)
    seen1, seen2 = _balance(t1, 1), _balance(t2, 1)  # both read 100
    t1.update("bank.accounts", pc.field("id") == 1, {"balance": seen1 + 10})
    t1.commit()
    with pytest.raises(SerializationError):  # T2's update would overwrite T1's without seeing it
        t2.update("bank.accounts", pc.field("id") == 1, {"balance": seen2 + 20})
    t2.rollback()
    assert t2.state == "rolled_back"
    assert _balance(wh, 1) == 110


def test_p4_lost_update_with_both_pending(wh: Warehouse) -> None:
    _seed_accounts(wh, {1: 100})
    t1 = wh.begin(isolation="serializable")
    t2 = wh.begin(isolation="serializable")
    t1.update("bank.accounts", pc.field("id") == 1, {"balance": pc.field("balance") + 10})
    with pytest.raises(SerializationError):  # at once, not at commit
        t2.update("bank.accounts", pc.field("id") == 1, {"balance": pc.field("balance") + 20})
    t2.rollback()
    t1.commit()
    assert _balance(wh, 1) == 110


# -- A5A read skew ----------------------------------------------------------------------------------
@pytest.mark.parametrize("isolation", LEVELS)
def test_a5a_read_skew_is_prevented(wh: Warehouse, open_wh: Callable[[], Warehouse], isolation: str) -> None:
    wh.create_table("bank.checking", ACCOUNTS)
    wh.create_table("bank.savings", ACCOUNTS)
    with wh.begin() as t:
        t.append("bank.checking", accounts({1: 50}))
        t.append("bank.savings", accounts({1: 50}))
    reader = wh.begin(isolation=isolation)
    checking = reader.read("bank.checking").to_pylist()[0]["balance"]
    with open_wh().begin(isolation=isolation) as transfer:  # moves 40 from checking to savings
        transfer.update("bank.checking", pc.field("id") == 1, {"balance": pc.field("balance") - 40})
        transfer.update("bank.savings", pc.field("id") == 1, {"balance": pc.field("balance") + 40})
    savings = reader.read("bank.savings").to_pylist()[0]["balance"]
    assert (checking, savings) == (50, 50)  # a consistent total of 100, not 50 + 90
    assert reader.read("bank.checking").to_pylist()[0]["balance"] == 50  # repeatable
    assert reader.commit() == reader.snapshot_csn
    latest = (wh.read("bank.checking").to_pylist()[0]["balance"], wh.read("bank.savings").to_pylist()[0]["balance"])
    assert latest == (10, 90)


# -- A5B write skew ---------------------------------------------------------------------------------
def _seed_doctors(wh: Warehouse) -> None:
    """Two doctors on call, each row in its own part so updating one never conflicts with the other."""
    wh.create_table("clinic.doctors", DOCTORS)
    with wh.begin() as t:
        t.append("clinic.doctors", pa.table({"name": ["alice"], "on_call": [True]}, schema=DOCTORS))
        t.append("clinic.doctors", pa.table({"name": ["bob"], "on_call": [True]}, schema=DOCTORS))


def _go_off_call(t: Transaction, name: str) -> None:
    """Leave only if someone else stays on call (the constraint write skew breaks)."""
    on_call = t.read("clinic.doctors", filter=pc.field("on_call")).column("name").to_pylist()
    assert len(on_call) == 2
    t.update("clinic.doctors", pc.field("name") == name, {"on_call": False})


def _on_call(wh: Warehouse) -> list[str]:
    return sorted(wh.read("clinic.doctors", filter=pc.field("on_call")).column("name").to_pylist())


def test_a5b_write_skew_commits_under_snapshot(wh: Warehouse, open_wh: Callable[[], Warehouse]) -> None:
    _seed_doctors(wh)
    t1 = wh.begin(isolation="snapshot")
    t2 = open_wh().begin(isolation="snapshot")
    _go_off_call(t1, "alice")
    _go_off_call(t2, "bob")
    c1 = t1.commit()
    c2 = t2.commit()  # disjoint parts: snapshot isolation lets both through
    assert c2 == c1 + 1
    assert t1.state == t2.state == "committed"
    assert _on_call(wh) == []  # the anomaly: nobody on call


@pytest.mark.parametrize("first", ["t1", "t2"])
def test_a5b_write_skew_prevented_under_serializable(wh: Warehouse, open_wh: Callable[[], Warehouse],
                                                     first: str) -> None:
    _seed_doctors(wh)
    txns = {"t1": wh.begin(isolation="serializable"), "t2": open_wh().begin(isolation="serializable")}
    _go_off_call(txns["t1"], "alice")
    _go_off_call(txns["t2"], "bob")
    winner, loser = (txns["t1"], txns["t2"]) if first == "t1" else (txns["t2"], txns["t1"])
    winner.commit()
    with pytest.raises(SerializationError):
        loser.commit()
    assert loser.state == "rolled_back"
    assert winner.state == "committed"
    assert _on_call(wh) == (["bob"] if first == "t1" else ["alice"])


def test_a5b_write_skew_across_tables_prevented_under_serializable(wh: Warehouse) -> None:
    wh.create_table("clinic.ward_a", DOCTORS)
    wh.create_table("clinic.ward_b", DOCTORS)
    with wh.begin() as t:
        t.append("clinic.ward_a", pa.table({"name": ["alice"], "on_call": [True]}, schema=DOCTORS))
        t.append("clinic.ward_b", pa.table({"name": ["bob"], "on_call": [True]}, schema=DOCTORS))
    t1 = wh.begin(isolation="serializable")
    t2 = wh.begin(isolation="serializable")
    for t in (t1, t2):
        assert t.read("clinic.ward_a").num_rows + t.read("clinic.ward_b").num_rows == 2
    t1.update("clinic.ward_a", pc.field("name") == "alice", {"on_call": False})
    t2.update("clinic.ward_b", pc.field("name") == "bob", {"on_call": False})
    t1.commit()
    with pytest.raises(SerializationError):
        t2.commit()
    assert t2.state == "rolled_back"
    assert wh.read("clinic.ward_b").to_pylist() == [{"name": "bob", "on_call": True}]


def test_read_only_anomaly_is_prevented_under_serializable(wh: Warehouse) -> None:
    """Fekete et al.: under SI a read-only transaction can see a state no serial order produces."""
    wh.create_table("bank.checking", ACCOUNTS)
    wh.create_table("bank.savings", ACCOUNTS)
    with wh.begin() as t:
        t.append("bank.checking", accounts({1: 0}))
        t.append("bank.savings", accounts({1: 0}))
    withdraw = wh.begin(isolation="serializable")  # T2: withdraw 10 from savings, fee 1 if overdrawn
    total = sum(withdraw.read(n).to_pylist()[0]["balance"] for n in ("bank.checking", "bank.savings"))
    with wh.begin(isolation="serializable") as deposit:  # T1: deposit 20 into checking
        balance = deposit.read("bank.checking").to_pylist()[0]["balance"]
        deposit.update("bank.checking", pc.field("id") == 1, {"balance": balance + 20})
    reader = wh.begin(isolation="serializable")  # T3 sees the deposit and no withdrawal
    seen = [reader.read(n).to_pylist()[0]["balance"] for n in ("bank.checking", "bank.savings")]
    assert seen == [20, 0]
    assert reader.commit() == reader.snapshot_csn
    withdraw.update("bank.savings", pc.field("id") == 1, {"balance": -10 - (1 if total - 10 < 0 else 0)})
    with pytest.raises(SerializationError):  # committing would make T3's view unserializable
        withdraw.commit()
    assert withdraw.state == "rolled_back"
    assert [wh.read(n).to_pylist()[0]["balance"] for n in ("bank.checking", "bank.savings")] == [20, 0]


# -- serializable details ---------------------------------------------------------------------------
def test_read_only_serializable_transaction_never_aborts(wh: Warehouse) -> None:
    _seed_doctors(wh)
    reader = wh.begin(isolation="serializable")
    assert _on_call_of(reader) == ["alice", "bob"]
    with wh.begin() as writer:
        writer.update("clinic.doctors", pc.field("name") == "alice", {"on_call": False})
    assert _on_call_of(reader) == ["alice", "bob"]  # still its snapshot
    assert reader.commit() == reader.snapshot_csn
    assert reader.state == "committed"


def _on_call_of(t: Transaction) -> list[str]:
    return sorted(t.read("clinic.doctors", filter=pc.field("on_call")).column("name").to_pylist())


def test_serializable_read_of_one_partition_ignores_writes_to_others(wh: Warehouse) -> None:
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    wh.create_table("sales.totals", ACCOUNTS)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2], day="2024-01-01"))
        t.append("sales.events", events([3], day="2024-01-02"))
    t1 = wh.begin(isolation="serializable")
    rows = t1.read("sales.events", partitions=[{"day": "2024-01-01"}])
    assert ids(rows) == [1, 2]
    t1.append("sales.totals", accounts({1: rows.num_rows}))
    with wh.begin() as other:  # writes only another partition of the table T1 read
        other.overwrite("sales.events", events([30, 31], day="2024-01-02"), partitions=[{"day": "2024-01-02"}])
        other.append("sales.events", events([40], day="2024-01-03"))
    t1.commit()
    assert t1.state == "committed"
    assert _balances(wh.read("sales.totals")) == {1: 2}


def test_serializable_read_of_one_partition_conflicts_with_writes_to_it(wh: Warehouse) -> None:
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    wh.create_table("sales.totals", ACCOUNTS)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2], day="2024-01-01"))
        t.append("sales.events", events([3], day="2024-01-02"))
    t1 = wh.begin(isolation="serializable")
    rows = t1.read("sales.events", partitions=[{"day": "2024-01-01"}])
    t1.append("sales.totals", accounts({1: rows.num_rows}))
    with wh.begin() as other:  # an append (never a write-write conflict) into the partition T1 read
        other.append("sales.events", events([4], day="2024-01-01"))
    with pytest.raises(SerializationError):
        t1.commit()
    assert t1.state == "rolled_back"
    assert wh.read("sales.totals").num_rows == 0


def test_serializable_whole_table_read_conflicts_with_any_partition_write(wh: Warehouse) -> None:
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    wh.create_table("sales.totals", ACCOUNTS)
    with wh.begin() as t:
        t.append("sales.events", events([1], day="2024-01-01"))
    t1 = wh.begin(isolation="serializable")
    t1.append("sales.totals", accounts({1: t1.read("sales.events").num_rows}))
    with wh.begin() as other:
        other.append("sales.events", events([9], day="2024-12-31"))
    with pytest.raises(SerializationError):
        t1.commit()
    assert t1.state == "rolled_back"


def test_serializable_conflict_only_with_commits_after_the_snapshot(wh: Warehouse) -> None:
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    wh.create_table("sales.totals", ACCOUNTS)
    with wh.begin() as t:  # committed before T1 begins: already in its snapshot
        t.append("sales.events", events([1], day="2024-01-01"))
    t1 = wh.begin(isolation="serializable")
    t1.append("sales.totals", accounts({1: t1.read("sales.events").num_rows}))
    t1.append("sales.events", events([2], day="2024-01-01"))  # its own writes never conflict
    assert t1.commit() > t1.snapshot_csn
    assert ids(wh.read("sales.events")) == [1, 2]


# -- implicit reads: statements that decide what to write from what they see -------------------------
def test_concurrent_overwrites_of_an_empty_partition_under_snapshot_both_commit(wh: Warehouse) -> None:
    """No part to lock: like DELETE + INSERT of a missing key in PostgreSQL's REPEATABLE READ, both win."""
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    t1 = wh.begin()
    t2 = wh.begin()
    t1.overwrite("sales.events", events([1], day="2024-01-01"), partitions=[{"day": "2024-01-01"}])
    t2.overwrite("sales.events", events([2], day="2024-01-01"), partitions=[{"day": "2024-01-01"}])
    t1.commit()
    t2.commit()
    assert ids(wh.read("sales.events")) == [1, 2]


@pytest.mark.parametrize("whole_table", [False, True])
def test_concurrent_overwrites_of_an_empty_partition_under_serializable(wh: Warehouse, whole_table: bool) -> None:
    """Either serial order leaves ONE writer's rows; the union is not serializable, so one must abort."""
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    scope = None if whole_table else [{"day": "2024-01-01"}]
    t1 = wh.begin(isolation="serializable")
    t2 = wh.begin(isolation="serializable")
    t1.overwrite("sales.events", events([1], day="2024-01-01"), partitions=scope)
    t2.overwrite("sales.events", events([2], day="2024-01-01"), partitions=scope)
    t1.commit()
    with pytest.raises(SerializationError):
        t2.commit()
    assert t2.state == "rolled_back"
    assert ids(wh.read("sales.events")) == [1]


def test_predicate_updates_with_crossed_appends_under_serializable(wh: Warehouse) -> None:
    """T1 updates day X and appends to day Y; T2 updates day Y and appends to day X: a cycle of rw edges."""
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    with wh.begin() as t:
        t.append("sales.events", events([1], day="X", value=0.0))
        t.append("sales.events", events([2], day="Y", value=0.0))
    t1 = wh.begin(isolation="serializable")
    t2 = wh.begin(isolation="serializable")
    t1.update("sales.events", pc.field("day") == "X", {"value": 1.0})
    t1.append("sales.events", events([3], day="Y", value=0.0))
    t2.update("sales.events", pc.field("day") == "Y", {"value": 1.0})
    t2.append("sales.events", events([4], day="X", value=0.0))
    t1.commit()
    # serially, T2's update would also have set the row T1 appended to Y: T2 must not commit as it is
    with pytest.raises(SerializationError):
        t2.commit()
    assert t2.state == "rolled_back"
    values = {r["id"]: r["value"] for r in wh.read("sales.events").to_pylist()}
    assert values == {1: 1.0, 2: 0.0, 3: 0.0}
