"""The test command leaves `git status` clean: the reports scripts/test.sh makes (scripts/reliability.py,
benchmarks/run.py --quick) go under build/, which git ignores; the tracked pages change only on request.
Checked from the scripts' argument parsing and test.sh's own command lines, without running a suite."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reliability() -> ModuleType:
    return _load("reliability_script_paths", REPO / "scripts" / "reliability.py")


@pytest.fixture(scope="module")
def bench_run() -> ModuleType:
    return _load("benchmarks_run_paths", REPO / "benchmarks" / "run.py")


def _test_sh_arguments(script: str) -> list[list[str]]:
    """The arguments scripts/test.sh passes to `script` (every line that runs it)."""
    found = []
    for line in (REPO / "scripts" / "test.sh").read_text().splitlines():
        if re.search(rf'"\$VENV/bin/python" {re.escape(script)}\b', line):
            words = shlex.split(line.strip())
            found.append(words[words.index(script) + 1:])
    return found


def test_build_is_ignored_by_git() -> None:
    assert "/build/" in (REPO / ".gitignore").read_text().splitlines()


def test_reliability_writes_under_build_unless_asked_for_the_docs(reliability: ModuleType) -> None:
    assert reliability.parse([]).out.is_relative_to(BUILD)
    assert reliability.parse(["--quick", "--write-docs"]).out == REPO / "docs" / "RELIABILITY.md"
    with pytest.raises(SystemExit):
        reliability.parse(["--write-docs", "--out", "/tmp/r.md"])


def test_the_test_command_writes_its_reports_under_build(reliability: ModuleType, bench_run: ModuleType) -> None:
    reliability_runs = _test_sh_arguments("scripts/reliability.py")
    assert reliability_runs, "scripts/test.sh no longer runs scripts/reliability.py: update this test"
    for arguments in reliability_runs:
        assert reliability.parse(arguments).out.is_relative_to(BUILD), arguments
    bench_runs = _test_sh_arguments("benchmarks/run.py")
    assert bench_runs, "scripts/test.sh no longer runs benchmarks/run.py: update this test"
    for arguments in bench_runs:
        for path in bench_run.outputs(bench_run._parse(arguments)):
            assert path.is_relative_to(BUILD), (arguments, path)


def test_the_tracked_reliability_page_says_how_to_regenerate_it(reliability: ModuleType) -> None:
    header = (REPO / "docs" / "RELIABILITY.md").read_text().split("\n## ", 1)[0]
    assert reliability.REGENERATE in header
