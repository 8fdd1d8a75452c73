"""No protocol decision outside core/ (issue 31; docs/ARCHITECTURE.md, "The two plans"; docs/DESIGN.md D24).

An engine path (spark/, and the write-audit-publish checks in checks/) reaches the core through the two plans
only: the write plan (`open_write` -> WritePlan -> `commit`; for compaction, `open_compaction` -> CompactionPlan ->
`run`, each merge a MergePlan) and the read plan (`plan_read` -> ReadPlan), plus the public `Warehouse` and
`Transaction` handles. What a statement replaces,
what it scanned, the stray-partition check, the read set, the retention and tag checks are decided by the core,
so a new path cannot drift from the core's answer. test_import_graph.py keeps every layer to the core's public
modules; this test narrows the engines to the names of the two plans, checks the overwrite rule's message
is written once, and that the core's own compaction and an engine's run the same steps (compaction.run, swap).
tests/spark/test_engine_calls.py counts each Spark path's calls into the core (at most 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.core import adapter, compaction
from tests.architecture.test_import_graph import PACKAGE, REPO, imports_in, module_name
from tests.helpers import events, ids, make_tables

ENGINE_PACKAGES = ("airflow_txn.spark", "airflow_txn.checks")

WRITE_PLAN = frozenset({"open_write", "WritePlan", "WriteDir", "WrittenPart", "APPEND", "OVERWRITE", "REWRITE",
                        "open_compaction", "CompactionPlan", "MergePlan", "MergeWrite"})
"""The write interface: a statement as the core decided it, and a compaction's (the core plans, runs and swaps
each merge; the engine writes its part)."""
READ_PLAN = frozenset({"plan_read", "ReadPlan", "PartView", "ColumnSource", "TableView", "StoredTable", "stored_table"})
"""The read interface: exactly the parts a read sees, and the table an engine reads and writes through."""
VALUES = frozenset({"DEFAULT_TARGET_FILE_BYTES", "Progress", "MergedAwayError"})
"""Values an engine passes on, deciding nothing."""

ENGINE_FACE = {
    "airflow_txn.core.adapter": WRITE_PLAN | READ_PLAN | VALUES,
    "airflow_txn.core.warehouse": frozenset({"Warehouse"}),
    "airflow_txn.core.transaction": frozenset({"Transaction"}),
}
"""{core module: the names an engine path may import of it}."""

PROTOCOL_VALUES = frozenset({"airflow_txn.model.partitioning.WHOLE_TABLE"})
"""Foundation names that only a protocol decision needs (what a statement scanned): the core's alone."""

OVERWRITE_MESSAGE = "also holds rows of"
EVENTS = "sales.events"


def engine_violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """One line per import of an engine module that reaches the core outside the two plans and the handles."""
    found = []
    for target, line, _deferred in imports_in(source, module, is_package):
        if target in PROTOCOL_VALUES:
            found.append(f"{module}:{line}: {target} is a protocol decision's value: the core decides it")
            continue
        if not target.startswith("airflow_txn.core"):
            continue
        home, _, name = target.rpartition(".")
        allowed = ENGINE_FACE.get(home)
        if allowed is None or name not in allowed:
            found.append(f"{module}:{line}: imports {target}: an engine path reaches the core through the write and "
                         "read plans and the Warehouse/Transaction handles only "
                         "(tests/architecture/test_engine_plans.py)")
    return found


def engine_modules() -> list[tuple[Path, str, bool]]:
    found = []
    for package in ENGINE_PACKAGES:
        directory = REPO / package.replace(".", "/")
        found += [(path, *module_name(path)) for path in sorted(directory.rglob("*.py"))]
    return found


def test_engine_paths_reach_the_core_through_the_two_plans_only() -> None:
    modules = engine_modules()
    assert {m for _p, m, _k in modules} >= {"airflow_txn.spark.writer", "airflow_txn.spark.datasource",
                                              "airflow_txn.spark.cow", "airflow_txn.spark.reader",
                                              "airflow_txn.checks.runner"}
    found = [v for path, module, is_package in modules
             for v in engine_violations(path.read_text(encoding="utf-8"), module, is_package)]
    assert found == [], "\n".join(found)


def test_the_checker_fails_on_a_protocol_step_outside_the_plans() -> None:
    """The rule is not vacuous: each of yesterday's steps of a Spark statement is reported."""
    for source in ("from airflow_txn.core.adapter import open_statement\n",
                   "from airflow_txn.core.adapter import check_read\n",
                   "from airflow_txn.core import staging\n",
                   "from airflow_txn.core.reading import snapshot_for\n",
                   "def f():\n    from airflow_txn.core.transaction import run_statement\n",
                   "from airflow_txn.model.partitioning import WHOLE_TABLE\n",
                   "from airflow_txn.core.compaction import swap\n",
                   "from airflow_txn.core.adapter import new_statement_id\n"):
        assert engine_violations(source, "airflow_txn.spark.writer"), source
    assert engine_violations("from airflow_txn.core.adapter import plan_read, open_write\n",
                             "airflow_txn.spark.writer") == []


def test_the_overwrite_rule_and_its_message_are_written_once() -> None:
    """The stray-partition refusal of an overwrite of listed partitions is the core's (staging.check_stray),
    whatever path wrote the rows."""
    holders = [str(path.relative_to(REPO)) for path in sorted(PACKAGE.rglob("*.py"))
               if OVERWRITE_MESSAGE in path.read_text(encoding="utf-8")]
    assert holders == ["airflow_txn/core/staging.py"]
    source = (PACKAGE / "core" / "staging.py").read_text(encoding="utf-8")
    assert source.count(OVERWRITE_MESSAGE) == 1


def test_the_core_and_an_engine_compact_through_the_same_steps(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Warehouse.compact (the pyarrow writer) and an engine's compaction plan (adapter.open_compaction, the way
    airflow_txn.spark.compact goes) both run compaction.run, and every merge of either is swapped in by
    compaction.swap: the protocol (catalog swap, same CSN, yielding) is decided in one place."""
    runs: list[str] = []
    swaps: list[int] = []
    real_run, real_swap = compaction.run, compaction.swap

    def run(rt: Any, prepared: compaction.Prepared, *args: Any) -> Any:
        runs.append(prepared.table.name.qualified)
        return real_run(rt, prepared, *args)

    def swap(rt: Any, job: compaction.MergeJob, written: Any) -> Any:
        swaps.append(len(job.group.sources))
        return real_swap(rt, job, written)

    monkeypatch.setattr(compaction, "run", run)
    monkeypatch.setattr(compaction, "swap", swap)
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'catalog.db'}", root=str(tmp_path / "root")) as wh:
        make_tables(wh)
        for i in range(4):
            with wh.begin() as t:
                t.append(EVENTS, events([i]))
        plan = adapter.open_compaction(wh, EVENTS, min_parts=2, target_file_bytes=1 << 30)
        assert plan.merges == 1 and plan.table.name == EVENTS
        with pytest.raises(AssertionError, match="engine wrote nothing"):
            plan.run(_refusing_writer)
        assert runs == [EVENTS] and swaps == []  # the writer failed: nothing swapped, the merge rolled back
        assert wh.compact(EVENTS)["merged"] == 1
        assert runs == [EVENTS, EVENTS] and swaps == [4]
        assert ids(wh.read(EVENTS)) == [0, 1, 2, 3]


def _refusing_writer(task: adapter.MergePlan) -> adapter.WrittenPart:
    assert task.replaces == tuple(s.id for s in task.sources) and task.rows == 4
    assert task.read_plan.parts == task.sources and task.read_plan.snapshot == task.snapshot
    raise AssertionError("the engine wrote nothing")
