"""The isolation level as one concept (issue 17, item 2): the Isolation enum parses user input, says
what a read records and what commit checks, and keeps the public face (strings) unchanged."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import schema
from airflow_txn.core.isolation import Isolation
from airflow_txn.errors import InvalidArgumentError, SerializationError
from airflow_txn.model.partitioning import WHOLE_TABLE
from tests.helpers import ACCOUNTS, accounts

BAD_LEVELS: list[object] = ["chaos", "SERIALIZABLE", "Snapshot", "", " snapshot", None, 1, b"snapshot", ["snapshot"]]


@pytest.mark.parametrize("level", list(Isolation))
def test_begin_takes_the_string_or_the_enum_and_the_catalog_keeps_the_text(wh: Warehouse, level: Isolation) -> None:
    for given in (level.value, level):
        t = wh.begin(isolation=given)
        assert t.isolation == level.value and t.isolation is level
        stored = wh.transaction_info(t.tid)["isolation"]
        assert stored == level.value and type(stored) is str  # the catalog column holds the plain text
        assert wh.attach(t.tid).isolation is level
        assert f"isolation={level.value!r}" in repr(t)
        t.rollback()


def test_a_bad_isolation_is_refused_naming_the_levels(wh: Warehouse) -> None:
    before = wh.transactions()
    for bad in BAD_LEVELS:
        with pytest.raises(InvalidArgumentError, match="isolation must be one of 'snapshot', 'serializable', got"):
            wh.begin(isolation=bad)  # type: ignore[arg-type]  # ill-typed on purpose
    assert wh.transactions() == before  # nothing was begun


def test_each_level_says_what_a_read_records() -> None:
    assert Isolation.SNAPSHOT.read_set(["a=1"]) == [] and Isolation.SNAPSHOT.read_set(None) == []
    assert Isolation.SERIALIZABLE.read_set(None) == [WHOLE_TABLE]
    assert Isolation.SERIALIZABLE.read_set([]) == [WHOLE_TABLE]  # no partition listed: the whole table
    assert Isolation.SERIALIZABLE.read_set(["a=1", "a=2", "a=1"]) == ["a=1", "a=2"]
    assert not Isolation.SNAPSHOT.tracks_reads and Isolation.SERIALIZABLE.tracks_reads


@pytest.mark.parametrize("level", list(Isolation))
def test_every_level_is_complete(level: Isolation) -> None:
    """What a new level needs (docs/ARCHITECTURE.md, "How to add an isolation level"): its rules, a value
    the catalog column holds, and parsing back to itself."""
    assert isinstance(level.tracks_reads, bool)  # its row in isolation._RULES exists
    assert 0 < len(level.value) <= schema.transactions.c.isolation.type.length  # type: ignore[attr-defined]
    assert Isolation.parse(level.value, "isolation") is level and Isolation.parse(level, "isolation") is level


def test_the_enum_value_gives_the_same_serializable_check(wh: Warehouse) -> None:
    wh.create_table("bank.accounts", ACCOUNTS)
    with wh.begin() as seed:
        seed.append("bank.accounts", accounts({1: 10}))
    reader = wh.begin(isolation=Isolation.SERIALIZABLE)
    reader.read("bank.accounts")
    with wh.begin() as writer:
        writer.update("bank.accounts", pc.field("id") == 1, {"balance": 0})
    reader.append("bank.accounts", accounts({2: 5}))
    with pytest.raises(SerializationError, match=r"serializable transaction .* read bank\.accounts"):
        reader.commit()
