"""The CLI's modules (issue 35): the commands in groups of one small module each, no import cycle inside
airflow_txn/cli (deferred and TYPE_CHECKING imports count), and --oracle's help naming what the oracle
registry knows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_txn.cli import commands
from airflow_txn.cli.commands import options
from airflow_txn.oracle import registry
from tests.architecture.test_import_graph import PACKAGE, REPO, imports_in, module_name

CLI = PACKAGE / "cli"


def cli_modules() -> dict[str, tuple[Path, bool]]:
    return {module: (path, is_package) for path in sorted(CLI.rglob("*.py"))
            for module, is_package in [module_name(path)]}


def cli_imports() -> dict[str, set[str]]:
    """Module -> the cli modules it imports, wherever the import stands (a name imported from a module counts
    as that module: `from airflow_txn.cli import main` is an edge to the package)."""
    modules = cli_modules()

    def owner(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    return {module: {found for target, _line, _deferred in imports_in(path.read_text(encoding="utf-8"), module, pkg)
                     if (found := owner(target)) is not None and found != module}
            for module, (path, pkg) in modules.items()}


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (empty: none)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_the_cli_has_no_import_cycle() -> None:
    graph = cli_imports()
    assert "airflow_txn.cli.airflow_connections" in graph["airflow_txn.cli.commands.settings"]  # --conn-id
    assert "airflow_txn.cli.commands" in graph["airflow_txn.cli.in_airflow"]  # `airflow txn` runs the commands
    assert cycle(graph) == []
    assert [m for m, targets in graph.items() if "airflow_txn.cli.in_airflow" in targets] == []


def test_the_cycle_finder_finds_one() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []


def test_every_command_is_in_one_small_group_module() -> None:
    names = [c.name for group in commands.GROUPS for c in group.COMMANDS]
    assert sorted(names) == sorted(commands.cli.commands) and len(names) == len(set(names))
    for module in (*commands.GROUPS, commands.options, commands.settings):
        lines = len(Path(str(module.__file__)).read_text(encoding="utf-8").splitlines())
        assert lines <= 200, f"{module.__name__}: {lines} lines"


def test_the_oracle_help_names_every_kind_of_the_registry() -> None:
    assert tuple(kind.form for kind in registry.KINDS) == options.ORACLE_FORMS
    assert options.oracle_help() == f"CSN oracle: {registry.forms()} [env AIRFLOW_TXN_ORACLE]."


@pytest.mark.parametrize("page", ["docs/CLI.md", "README.md", "docs/AIRFLOW.md", "docs/ORACLES.md"])
def test_the_docs_name_every_kind_of_oracle(page: str) -> None:
    text = (REPO / page).read_text(encoding="utf-8")
    oracle_rows = [line for line in text.splitlines() if line.startswith("|") and "`sql`" in line and "://" in line]
    assert oracle_rows, f"{page} lists the oracle forms in a table row"
    for row in oracle_rows:
        assert all(f"`{kind.form}" in row for kind in registry.KINDS), (page, row)


def test_oracle_help_without_loading_the_registry() -> None:
    """--help shows the forms without importing the registry (which loads SQLAlchemy and the catalog)."""
    code = ("import sys; from airflow_txn.cli import main; main(['--help']); "
            "print('airflow_txn.oracle.registry' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)})
    assert done.stderr.strip().endswith("False")
    assert registry.forms() in done.stdout
