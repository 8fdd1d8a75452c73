"""`wh.maintenance` and `wh.tags` (core/warehouse_groups.py, issue 35): each group method takes the same
arguments as the flat name it stands for, does the same, and refuses bad input with the same typed error
before anything changes; the flat names (`wh.vacuum`, `wh.tag`, `wh.tags()`, ...) keep working."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.core.warehouse_groups import Maintenance, Tags
from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    TableNotFoundError,
    TagExistsError,
    TagNotFoundError,
    TxnError,
)
from tests.helpers import accounts, commit_writes, events, ids, make_tables

EV, AC = "sales.events", "sales.accounts"

SAME = [
    (Maintenance.vacuum, Warehouse.vacuum), (Maintenance.compact, Warehouse.compact),
    (Maintenance.recover, Warehouse.recover), (Maintenance.retention, Warehouse.retention),
    (Maintenance.set_retention, Warehouse.set_retention),
    (Tags.create, Warehouse.tag), (Tags.get, Warehouse.tag_info), (Tags.drop, Warehouse.untag),
]


@pytest.mark.parametrize(("grouped", "flat"), SAME, ids=lambda f: f.__qualname__)
def test_a_group_method_takes_what_its_flat_name_takes(grouped: Callable[..., Any], flat: Callable[..., Any]) -> None:
    assert inspect.signature(grouped) == inspect.signature(flat)


def test_the_groups_are_properties_of_the_warehouse(wh: Warehouse) -> None:
    assert isinstance(wh.maintenance, Maintenance) and isinstance(wh.tags, Tags)
    assert inspect.signature(Tags.list) == inspect.signature(Tags.__call__)


def test_tags_through_the_group_are_the_tags_of_the_flat_names(wh: Warehouse) -> None:
    make_tables(wh)
    first = commit_writes(wh, ("append", EV, events([1, 2])), ("append", AC, accounts({1: 10})))
    commit_writes(wh, ("overwrite", EV, events([7])))
    made = wh.tags.create("month-end", csn=first, tables=[EV], note="closed")
    assert made == wh.tag_info("month-end") == wh.tags.get("month-end")
    assert (made["csn"], made["tables"], made["note"]) == (first, [EV], "closed")
    wh.tag("latest")  # the flat name, seen by the group
    assert [t["name"] for t in wh.tags.list()] == ["latest", "month-end"]  # newest CSN first
    assert wh.tags() == wh.tags.list()  # wh.tags() lists them, as before
    assert ids(wh.read(EV, tag="month-end")) == [1, 2]
    assert wh.tags.drop("month-end") == made
    assert [t["name"] for t in wh.tags()] == ["latest"]
    assert wh.untag("latest")["name"] == "latest" and wh.tags.list() == []


def test_tags_through_the_group_refuse_what_the_flat_names_refuse(wh: Warehouse) -> None:
    make_tables(wh)
    csn = commit_writes(wh, ("append", EV, events([1])))
    wh.tags.create("kept")
    before = wh.tags()
    refused: list[tuple[type[Exception], str, Callable[[], object]]] = [
        (InvalidNameError, "invalid tag name", lambda: wh.tags.create("../x")),
        (TagExistsError, "'kept' exists already", lambda: wh.tags.create("kept")),
        (InvalidArgumentError, "above the readable watermark", lambda: wh.tags.create("future", csn=csn + 5)),
        (TableNotFoundError, "sales.nope", lambda: wh.tags.create("t1", tables=[EV, "sales.nope"])),
        (TagNotFoundError, "no tag 'nope'", lambda: wh.tags.get("nope")),
        (TagNotFoundError, "no tag 'nope'", lambda: wh.tags.drop("nope")),
    ]
    for error, message, call in refused:
        with pytest.raises(error, match=message):
            call()
    assert wh.tags() == before


def test_maintenance_through_the_group_is_the_flat_maintenance(wh: Warehouse) -> None:
    make_tables(wh)
    for n in range(3):  # three small parts of one partition
        commit_writes(wh, ("append", EV, events([n])))
    commit_writes(wh, ("overwrite", EV, events([10, 11])))  # the three are garbage once outside the retention
    assert wh.maintenance.vacuum(retention_seconds=0, dry_run=True)["parts_removed"] == \
        wh.vacuum(retention_seconds=0, dry_run=True)["parts_removed"] > 0
    done = wh.maintenance.vacuum(retention_seconds=0)
    assert done["parts_removed"] > 0 and wh.vacuum(retention_seconds=0)["parts_removed"] == 0
    for n in range(3):
        commit_writes(wh, ("append", EV, events([20 + n])))
    report = wh.maintenance.compact(EV)
    assert report["merged"] >= 1 and wh.compact(EV)["merged"] == 0  # nothing left to merge
    assert ids(wh.read(EV)) == [10, 11, 20, 21, 22]
    assert set(wh.maintenance.recover()) == set(wh.recover())
    assert wh.maintenance.set_retention(EV, versions=3) == wh.retention(EV) == wh.maintenance.retention(EV)
    assert wh.maintenance.retention(EV)["versions"] == 3
    wh.set_retention(EV)  # the flat name clears it, the group sees it
    assert wh.maintenance.retention(EV)["versions"] is None


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda m: m.vacuum(retention_seconds=-1), TxnError, "retention_seconds"),
    (lambda m: m.set_retention(EV, versions=0), TxnError, "versions"),
    (lambda m: m.set_retention("sales.nope", versions=2), TableNotFoundError, "does not exist"),
    (lambda m: m.retention("sales.nope"), TableNotFoundError, "does not exist"),
    (lambda m: m.compact("sales.nope"), TableNotFoundError, "sales.nope"),
])
def test_maintenance_through_the_group_refuses_what_the_flat_names_refuse(
        wh: Warehouse, call: Callable[[Maintenance], object], error: type[Exception], message: str) -> None:
    make_tables(wh)
    wh.set_retention(EV, versions=5)
    with pytest.raises(error, match=message):
        call(wh.maintenance)
    assert wh.retention(EV)["versions"] == 5
