"""Tests never time by sleep (issue 35): a test that waits for something to happen polls for it with a generous
deadline (tests.helpers.wait_until, wait_past, outlive_lease) or waits on an event, so a loaded machine slows it
down but never fails it. This check counts the FIXED sleeps left in tests/ (test code, workers, DAG files and the
harness): calls of time.sleep / asyncio.sleep (or a `sleep` imported from them) that are not the pause of a
loop repeating until its condition holds (a `while` loop, or a bounded `for` loop that breaks out: a poll, a
retry, a pacing loop). The count may go down,
never up past BASELINE: a new fixed sleep needs a kind below (or a new kind, with why it is legitimate).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

BASELINE = 10
"""The fixed sleeps left, each of one of KINDS: 3 processes killed while busy, 3 workers pacing, 3 times that must
pass, 1 negative check (the 3 lease sleeps that came with this check now poll the catalog's clock)."""

KINDS = {
    "a process stays busy until the test kills it": "the sleep is what the test interrupts (a crash mid-task)",
    "a worker paces its commits": "pauses between a worker's transactions so that they overlap and spread over "
    "time (randomized histories, fault soaks); nothing waits for them to be long enough",
    "time must pass": "a server stays down a while, a Spark job outlasts its lease: the time itself is the point, "
    "and longer only makes the test stronger",
    "a process must still be running a moment later": "a negative check (the writer hangs mid-write as designed); "
    "a slow machine only makes it weaker, never fails it",
}
"""Why each kind of fixed sleep left is legitimate (one line each)."""

SLEEPS = {("time", "sleep"), ("asyncio", "sleep")}


def _sleep_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound to the modules time/asyncio, names bound to their `sleep`) in a module."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name in {"time", "asyncio"}}
        elif isinstance(node, ast.ImportFrom) and node.module in {"time", "asyncio"}:
            functions |= {alias.asname or alias.name for alias in node.names if alias.name == "sleep"}
    return modules, functions


def _is_sleep(call: ast.Call, modules: set[str], functions: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.attr == "sleep" and func.value.id in modules
    return isinstance(func, ast.Name) and func.id in functions


def _breaks(loop: ast.For | ast.AsyncFor) -> bool:
    """Whether a `break` of this loop (not of a loop inside it) is in its body."""
    def find(nodes: list[ast.stmt]) -> bool:
        for node in nodes:
            if isinstance(node, ast.Break):
                return True
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
                continue
            if any(find(getattr(node, field, [])) for field in ("body", "orelse", "finalbody")):
                return True
            if any(find(handler.body) for handler in getattr(node, "handlers", [])):
                return True
            if any(find(case.body) for case in getattr(node, "cases", [])):
                return True
        return False

    return find(loop.body)


def _in_a_poll(parents: list[ast.AST]) -> bool:
    """Whether the nearest loop around (inside the same function) repeats until a condition holds: a `while`
    loop, or a bounded `for` loop that breaks out once it does."""
    for node in reversed(parents):
        if isinstance(node, ast.While):
            return True
        if isinstance(node, (ast.For, ast.AsyncFor)):
            return _breaks(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
    return False


def fixed_sleeps(source: str, where: str = "<source>") -> list[str]:
    """`where:line: the call` of every fixed sleep in `source` (module doc)."""
    if "sleep" not in source:
        return []
    tree = ast.parse(source)
    modules, functions = _sleep_names(tree)
    parent: dict[ast.AST, ast.AST] = {}
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
        if isinstance(node, ast.Call) and _is_sleep(node, modules, functions):
            calls.append(node)
    found: list[str] = []
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        parents: list[ast.AST] = []
        node: ast.AST = call
        while node in parent:
            node = parent[node]
            parents.insert(0, node)
        if not _in_a_poll(parents):
            found.append(f"{where}:{call.lineno}: {ast.unparse(call)}")
    return found


def all_fixed_sleeps() -> list[str]:
    found: list[str] = []
    for path in sorted(TESTS.rglob("*.py")):
        found += fixed_sleeps(path.read_text(), str(path.relative_to(TESTS.parent)))
    return found


def test_the_check_finds_fixed_sleeps_and_not_the_pauses_of_a_poll() -> None:
    source = '''
import asyncio
import time as clock
from time import sleep as nap

def f():
    clock.sleep(1)
    nap(2)
    for _ in range(3):
        clock.sleep(0.1)
    for _ in range(600):
        if done():
            break
        clock.sleep(0.1)
    while not done():
        clock.sleep(0.05)
        for _ in range(2):
            nap(1)

async def g():
    await asyncio.sleep(0.5)
    while True:
        await asyncio.sleep(0.1)
'''
    assert [line.split(": ", 1)[1] for line in fixed_sleeps(source)] == [
        "clock.sleep(1)", "nap(2)", "clock.sleep(0.1)", "nap(1)", "asyncio.sleep(0.5)"]


def test_tests_have_no_more_fixed_sleeps_than_the_baseline() -> None:
    found = all_fixed_sleeps()
    listing = "\n".join(found)
    print(f"{len(found)} fixed sleeps in tests/ (baseline {BASELINE}):\n{listing}")
    assert len(found) <= BASELINE, (
        f"{len(found)} fixed sleeps in tests/, more than the baseline {BASELINE}: wait on a condition instead "
        f"(tests.helpers.wait_until, wait_past, outlive_lease; an Event), or, if the sleep is one of\n  "
        + "\n  ".join(f"{kind}: {why}" for kind, why in KINDS.items())
        + f"\nraise BASELINE in tests/test_fixed_sleeps.py saying so. They are:\n{listing}")
