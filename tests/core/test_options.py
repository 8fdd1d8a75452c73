"""Options as enums (issue 31, item 7): every option a caller picks by name (isolation, via, the write mode, the
compaction's and the checks' engine, manifests) is a string enum of model/options.py whose Literal says the same
values to mypy, parsed once where it comes in, refused with InvalidOptionError naming the parameter, the value
and the values allowed, before anything is done. (The Spark and Airflow entry points are tested with their
layers: tests/spark/test_datasource.py, tests/airflow/test_maintenance.py and test_taskflow.py, and every engine
path by tests/conformance/test_protocol.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

import airflow_txn
from airflow_txn import Warehouse
from airflow_txn.core import adapter
from airflow_txn.core.config import ENV_MANIFESTS, WarehouseConfig
from airflow_txn.core.isolation import Isolation
from airflow_txn.errors import InvalidArgumentError, InvalidNameError, InvalidOptionError
from airflow_txn.model.options import (
    SAVE_MODES,
    CheckEngine,
    CheckEngineName,
    CompactionEngine,
    CompactionEngineName,
    Manifests,
    ManifestsName,
    Option,
    SaveModeName,
    Via,
    ViaName,
    WriteMode,
    WriteModeName,
)
from airflow_txn.model.results import IsolationName
from tests.helpers import accounts, events, make_tables

LITERALS: list[tuple[Any, tuple[Option, ...]]] = [
    (IsolationName, tuple(Isolation)),
    (ViaName, tuple(Via)),
    (WriteModeName, tuple(WriteMode)),
    (SaveModeName, SAVE_MODES),
    (CompactionEngineName, tuple(CompactionEngine)),
    (CheckEngineName, tuple(CheckEngine)),
    (ManifestsName, tuple(Manifests)),
]


@pytest.mark.parametrize(("literal", "members"), LITERALS, ids=["Isolation", "Via", "WriteMode", "SAVE_MODES",
                                                                 "CompactionEngine", "CheckEngine", "Manifests"])
def test_each_literal_names_exactly_its_enums_values_in_order(literal: Any, members: tuple[Option, ...]) -> None:
    """The Literal mypy checks callers against and the enum the code runs on say the same values (a value added
    to one and not the other fails here: the static-versus-run-time guard)."""
    assert get_args(literal) == tuple(m.value for m in members)


def test_every_option_enum_has_its_literal_here() -> None:
    """A new option enum (a subclass of Option) must join LITERALS, so its Literal is guarded too."""
    covered = {type(members[0]) for _, members in LITERALS}
    assert set(Option.__subclasses__()) == covered


@pytest.mark.parametrize("enum", sorted({type(m[0]) for _, m in LITERALS}, key=lambda e: e.__name__))
def test_parse_takes_a_member_or_its_string_and_refuses_the_rest_naming_all(enum: type[Option]) -> None:
    for member in enum:
        assert enum.parse(member.value, "x") is member and enum.parse(member, "x") is member
        assert member == member.value and json.dumps(member) == json.dumps(member.value)  # its string everywhere
    allowed = ", ".join(repr(m.value) for m in enum)
    first = next(iter(enum)).value
    for bad in ["bogus", first.upper(), f" {first}", "", None, 1, first.encode(), [first]]:
        with pytest.raises(InvalidOptionError) as raised:
            enum.parse(bad, "the_option")
        assert str(raised.value) == f"the_option must be one of {allowed}, got {bad!r}"
        # the typed bad-input errors a caller catches today, whichever this option raised before
        assert isinstance(raised.value, InvalidArgumentError) and isinstance(raised.value, InvalidNameError)


def test_a_subset_refuses_the_other_members_by_their_value() -> None:
    assert WriteMode.parse("overwrite", "mode", SAVE_MODES) is WriteMode.OVERWRITE
    for bad in ("rewrite", WriteMode.REWRITE):
        with pytest.raises(InvalidOptionError, match=r"^mode must be one of 'append', 'overwrite', got 'rewrite'$"):
            WriteMode.parse(bad, "mode", SAVE_MODES)


def test_the_options_are_exported_where_users_import_from() -> None:
    for name in ("Isolation", "Via", "WriteMode", "CompactionEngine", "CheckEngine", "Manifests"):
        assert name in airflow_txn.__all__
    assert airflow_txn.Via is Via and airflow_txn.WriteMode is WriteMode and airflow_txn.Isolation is Isolation
    assert airflow_txn.Manifests is Manifests and airflow_txn.CheckEngine is CheckEngine
    assert airflow_txn.CompactionEngine is CompactionEngine
    assert airflow_txn.errors.InvalidOptionError is InvalidOptionError


def test_the_spark_package_exports_via_and_mode_without_loading_pyspark() -> None:
    code = ("import sys, airflow_txn.spark as s; from airflow_txn.model.options import Via, WriteMode; "
            "assert s.Via is Via and s.WriteMode is WriteMode and 'Via' in s.__all__; "
            "assert 'pyspark' not in sys.modules, 'pyspark loaded'")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the core's entry points --------------------------------------------------------------------------------------
def test_warehouse_open_takes_manifests_as_a_member_or_string_and_refuses_a_bad_one(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_MANIFESTS, raising=False)
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    assert WarehouseConfig.resolve(catalog=catalog).manifests is Manifests.OFF
    for given in ("on-commit", Manifests.ON_COMMIT):
        assert WarehouseConfig.resolve(catalog=catalog, manifests=given).manifests is Manifests.ON_COMMIT
    with pytest.raises(InvalidOptionError, match=r"^manifests must be one of 'off', 'on-commit', got 'always'$"):
        WarehouseConfig.resolve(catalog=catalog, manifests="always")  # type: ignore[arg-type]  # on purpose
    monkeypatch.setenv(ENV_MANIFESTS, "on-commit")
    assert WarehouseConfig.resolve(catalog=catalog).manifests is Manifests.ON_COMMIT
    monkeypatch.setenv(ENV_MANIFESTS, "sometimes")
    from_env = r"^manifests must be one of 'off', 'on-commit', got 'sometimes' \(from \$AIRFLOW_TXN_MANIFESTS\)$"
    with pytest.raises(InvalidOptionError, match=from_env):
        WarehouseConfig.resolve(catalog=catalog)


@pytest.mark.parametrize("mode", [*WriteMode, *(m.value for m in WriteMode)])
def test_open_write_takes_the_mode_as_a_member_or_its_string(wh: Warehouse, mode: WriteMode | str) -> None:
    make_tables(wh)
    t = wh.begin()
    plan = adapter.open_write(t, "sales.events", mode)  # type: ignore[arg-type]  # str: as a caller's text
    assert plan.mode is WriteMode(mode) and f"{plan.what}" == f"{WriteMode(mode).value} of sales.events"
    again = adapter.WritePlan.from_json(plan.to_json(), {})
    assert again.mode is plan.mode
    t.rollback()


def test_open_write_refuses_a_bad_mode_before_anything_is_staged(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin()
    t.append("sales.accounts", accounts({1: 1}))
    before = wh.transaction_info(t.tid)["parts"]
    for bad in ("upsert", "APPEND", None):
        with pytest.raises(InvalidOptionError,
                           match=r"^mode must be one of 'append', 'overwrite', 'rewrite', got "):
            adapter.open_write(t, "sales.events", bad)  # type: ignore[arg-type]  # ill-typed on purpose
    assert t.state == "active" and wh.transaction_info(t.tid)["parts"] == before  # usable, nothing staged
    t.append("sales.events", events([1]))
    t.commit()


def test_a_write_plan_whose_mode_was_tampered_with_is_refused(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin()
    found = json.loads(adapter.open_write(t, "sales.events").to_json())
    found["mode"] = "truncate"
    with pytest.raises(InvalidOptionError, match=r"the write plan's mode must be one of .*got 'truncate'"):
        adapter.WritePlan.from_json(json.dumps(found), {})
    t.rollback()
