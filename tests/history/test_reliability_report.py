"""scripts/reliability.py: it counts what pytest and the evidence say, draws the crash grid, and fails
(exit 1, report FAILED) when a test or an evidence case failed or a suite ran nothing."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rel() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reliability", REPO / "scripts" / "reliability.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reliability"] = module
    spec.loader.exec_module(module)
    return module


def _case(suite: str, case: str, passed: bool, **details: object) -> dict[str, object]:
    return {"suite": suite, "case": case, "passed": passed, "details": details, "at": 0.0}


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.a" name="test_ok" time="0.1"/>
<testcase classname="tests.a" name="test_bad" time="0.1">
  <failure message="AssertionError: boom&#10;more">x</failure></testcase>
<testcase classname="tests.a" name="test_skip" time="0.0"><skipped message="no server"/></testcase>
<testcase classname="tests.a" name="test_err" time="0.0"><error message="fixture broke"/></testcase>
</testsuite></testsuites>"""


def test_junit_outcomes_and_verdicts(rel: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "j.xml").write_text(JUNIT)
    suite = rel.SUITES[0]
    o = rel.Outcome(suite, ["python", "-m", "pytest"], {})
    rel.read_junit(tmp_path / "j.xml", o)
    assert o.tests == {"tests.a::test_ok": "passed", "tests.a::test_bad": "failed", "tests.a::test_skip": "skipped",
                       "tests.a::test_err": "error"}
    assert o.failed_tests == ["tests.a::test_bad", "tests.a::test_err"]
    assert o.messages["tests.a::test_bad"] == "AssertionError: boom / more"
    assert not o.ok
    good = rel.Outcome(suite, [], {}, tests={"t": "passed"}, cases=[_case("x", "c", True)])
    assert good.ok
    assert not rel.Outcome(suite, [], {}, tests={"t": "passed"}, cases=[_case("x", "c", False)]).ok
    assert not rel.Outcome(suite, [], {}, tests={"t": "skipped"}).ok, "a suite that ran nothing passed"
    assert not rel.Outcome(suite, [], {}, tests={"t": "passed"}, returncode=2).ok
    assert not rel.Outcome(suite, [], {}, missing=True).ok


def test_the_report_draws_the_grid_and_the_histories(rel: ModuleType) -> None:
    suites = {s.name: s for s in rel.SUITES}
    crash = rel.Outcome(suites["crash_matrix"], ["python", "-m", "pytest", "-q"], {}, tests={"t": "passed"}, cases=[
        _case("crash_matrix", "commit.mid_apply|sqlite|sql", True),
        _case("crash_matrix", "commit.mid_apply|postgres|zookeeper", False, error="AssertionError: half visible"),
        _case("crash_matrix", "vacuum.mid|sqlite|sql", True),
        _case("crash_matrix", "merge @ commit.mid_apply|sqlite|sql", True),
    ])
    hist = rel.Outcome(suites["histories"], ["python", "-m", "pytest", "-q"], {}, tests={"t": "passed"}, cases=[
        _case("histories", "sqlite-seed7", True, backend="sqlite", seed=7, txns=900, committed=600, aborted=250,
              unknown=3, reads=100, killed=5, committed_merges=40, committed_changes=12,
              allowed_constraint_breaks=2, mutations_caught=5,
              seconds=31.0),
        _case("histories", "postgres-seed7", True, backend="postgres", seed=7, txns=300, committed=200, aborted=90,
              unknown=1, reads=60, killed=4, allowed_constraint_breaks=0, mutations_caught=5, seconds=33.0),
    ])
    args = rel.parse(["--seed", "7"])
    text = rel.render([crash, hist], args, {"AIRFLOW_TXN_HISTORY_SEED": "7"}, "postgresql://nowhere:1/x",
                      "python scripts/reliability.py")
    assert "Result: **FAILED**" in text
    assert "| crash point | postgres + zookeeper | sqlite + sql |" in text
    assert "| `commit.mid_apply` | FAIL | pass |" in text
    assert "| `vacuum.mid` | - | pass |" in text
    assert "| `merge @ commit.mid_apply` | - | pass |" in text
    assert "2 crash points and 1 statements at a crash point" in text
    assert "AssertionError: half visible" in text
    assert "1200 transactions and 160 snapshot reads checked in 2 histories" in text
    assert "| sqlite | 7 | 900 | 600 | 250 | 3 | 100 | 5 | 40 | 12 | 2 | 5 | 31 s | pass |" in text
    assert "--soak" in text and "How to reproduce" in text


@pytest.mark.parametrize("fails", [False, True])
def test_main_runs_pytest_and_exits_by_the_result(rel: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  fails: bool) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text("from tests import evidence\n\n\ndef test_probe():\n"
                     f"    evidence.record('probe', 'one', {not fails})\n    assert {not fails}\n")
    monkeypatch.setattr(rel, "SUITES", [rel.Suite("probe", "Probe", (str(probe),), "a probe")])
    monkeypatch.setenv("AIRFLOW_TXN_TEST_PG", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    out = tmp_path / "report.md"
    code = rel.main(["--suites", "probe", "--seed", "3", "--out", str(out), "--keep", str(tmp_path / "keep")])
    text = out.read_text()
    assert code == (1 if fails else 0)
    assert ("Result: **FAILED**" if fails else "Result: **PASSED**") in text
    assert f"| Probe | a probe | {0 if fails else 1} / 1 | {0 if fails else 1} / 1 |" in text
    records = [json.loads(line) for line in (tmp_path / "keep" / "evidence" / "probe" / "probe.jsonl").read_text()
               .splitlines()]
    assert records[0]["passed"] is (not fails)
