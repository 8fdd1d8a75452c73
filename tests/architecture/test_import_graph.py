"""Layering, statically: every import written in the package goes in an allowed direction (issue 17, item 7).

The rules are the table LAYERS below (docs/ARCHITECTURE.md, "Layer rules", says the same in words). The
checker reads each module's syntax tree, so it sees what `tests/architecture/test_layers.py` (which watches the
modules a fresh interpreter loads) cannot: imports inside functions, under `if TYPE_CHECKING:`, relative
imports, and `importlib.import_module("literal")` calls, whether or not any code path runs them. It does
not see a module name built at run time (e.g. the values of the lazy `_EXPORTS` tables, which the
packages mirror under TYPE_CHECKING, where the checker does see them). It knows which imports stand in a
function's body: a layer may be allowed a few modules there only (`Layer.deferred`: the cli's --conn-id
and `airflow txn` reach TxnHook's module and Airflow's CLI classes that way).

The layers above the core (spark, airflow) reach it through its public face only (PUBLIC_FACE: the
adapter interface, the handles, the configuration; docs/ARCHITECTURE.md, "The adapter interface"), and
touch no private attribute of what it hands them (`txn._run`): `private_attributes` reads that too.

The catalog (catalog/) is a layer of its own below the core: it speaks in the foundation's values only
(issue 35, item 1). And no module reaches itself through others (issue 35, item 2): `cycles` finds the
strongly connected components of the module graph these same imports make (deferred and TYPE_CHECKING
ones included), and every one must be in ALLOWED_CYCLES, which says why.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "airflow_txn"


@dataclass(frozen=True)
class Layer:
    name: str
    modules: tuple[str, ...]
    """fnmatch patterns of module names, each also covering what lies under it (`airflow_txn.cli` covers
    `airflow_txn.cli.doctor`); a module belongs to the FIRST layer of LAYERS that matches it."""
    may_import: frozenset[str]
    """The layers (of this package) whose modules it may import, its own included."""
    optional: frozenset[str] = frozenset()
    """The packages of OPTIONAL it may import."""
    core_face: tuple[str, ...] | None = None
    """For a layer above the core: the only core modules it may import (with what they define, private
    names excepted) besides the root package's own names (`from airflow_txn import Warehouse`); None: any."""
    deferred: tuple[str, ...] = ()
    """fnmatch patterns of modules (of this package or of OPTIONAL) it may import besides, inside a function
    only: loaded by the one code path that needs them, never by importing the layer."""


OPTIONAL = frozenset({"airflow", "fastapi", "starlette", "pyspark", "py4j", "kazoo", "psycopg", "duckdb"})
"""Third-party packages that come only with an extra (airflow: Airflow and its API server's fastapi and
starlette; spark: pyspark and py4j; zookeeper: kazoo; postgres: psycopg, which SQLAlchemy loads by URL; checks:
duckdb).
Every other third-party import (pyarrow, sqlalchemy, click, rich, ...) is the base install's or an
upper layer's own business and is not governed here."""

CORE = frozenset({"core", "zookeeper adapter", "catalog", "foundation"})

PUBLIC_FACE = ("airflow_txn.core.adapter", "airflow_txn.core.warehouse", "airflow_txn.core.transaction",
               "airflow_txn.core.config")
"""What an adapter layer may import of the core: the adapter interface, the Warehouse and Transaction
handles, and the configuration (light, for modules Airflow loads in every component: provider.py). The
foundation (errors, environment, model/, telemetry/) is a layer of its own, open to every layer."""

LAYERS = (
    # `from airflow_txn.operators import ...` / `from airflow_txn.sensors import ...`: re-exports of the airflow layer
    Layer("shims", ("airflow_txn.operators", "airflow_txn.sensors"), frozenset({"airflow"})),
    Layer("airflow", ("airflow_txn.airflow",), CORE | {"spark", "airflow", "checks"},
          frozenset({"airflow", "fastapi", "starlette", "pyspark", "py4j"}), PUBLIC_FACE),
    Layer("spark", ("airflow_txn.spark",), CORE | {"spark"}, frozenset({"pyspark", "py4j"}), PUBLIC_FACE),
    # write-audit-publish checks (airflow_txn.checks): on the core's public face, DuckDB their engine's own
    Layer("checks", ("airflow_txn.checks",), CORE | {"checks"}, frozenset({"duckdb"}), PUBLIC_FACE),
    # the cli's --conn-id and `airflow txn` (cli/in_airflow.py): TxnHook's module and Airflow's CLI classes,
    # imported inside the functions that run only for them
    Layer("cli", ("airflow_txn.cli",), CORE | {"cli"},
          deferred=("airflow_txn.airflow.hooks.txn", "airflow.cli.cli_config")),
    # `python -m airflow_txn.demo`: a program on top of the core that nothing imports
    Layer("demo", ("airflow_txn.demo",), CORE),
    # the values every layer speaks in (model/), the exceptions, the environment's reader, logs and metrics:
    # they import nothing above them
    Layer("foundation", ("airflow_txn.model", "airflow_txn.errors", "airflow_txn.environment", "airflow_txn.telemetry"),
          frozenset({"foundation"})),
    # the catalog: its tables and the statements on them, in the foundation's values (model/: the visibility rule
    # too); it knows no oracle (the readable watermark takes the last CSN), no storage and no configuration
    Layer("catalog", ("airflow_txn.catalog",), frozenset({"catalog", "foundation"})),
    # the core's ZooKeeper oracle: the one place for kazoo (imported inside functions, for a zookeeper:// oracle)
    Layer("zookeeper adapter", ("airflow_txn.oracle.zookeeper",), CORE, frozenset({"kazoo"})),
    # everything else: core/ (warehouse, transaction, the protocols), oracle/, storage/, publish/, ...
    Layer("core", ("airflow_txn",), CORE),
)
BY_NAME = {layer.name: layer for layer in LAYERS}


def layer_of(module: str) -> Layer:
    """The layer of a module, or of a name imported from one (`airflow_txn.operators.VacuumOperator`)."""
    return next(layer for layer in LAYERS
                if any(fnmatchcase(module, p) or fnmatchcase(module, f"{p}.*") for p in layer.modules))


# -- reading the imports -----------------------------------------------------------------------------------------
def module_name(path: Path) -> tuple[str, bool]:
    """(dotted module name, is it a package's __init__) of a file of the package."""
    parts = path.relative_to(REPO).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def imported_by_call(node: ast.Call) -> str | None:
    """The module of `importlib.import_module("x")`, `import_module("x")` or `__import__("x")`."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in {"import_module", "__import__"} or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
        return first.value
    return None


def function_bodies(tree: ast.AST) -> Iterator[ast.AST]:
    """What runs only when a function is called: its statements (not its decorators or defaults)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from node.body
        elif isinstance(node, ast.Lambda):
            yield node.body


def imports_in(source: str, module: str, is_package: bool) -> Iterator[tuple[str, int, bool]]:
    """(imported name, line, inside a function) for every import in `source`, wherever it stands.
    `from m import n` yields `m.n` (n may be a submodule, e.g. `from airflow_txn import spark`); relative
    imports are resolved."""
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source)
    in_function = {id(node) for body in function_bodies(tree) for node in ast.walk(body)}
    for node in ast.walk(tree):
        deferred = id(node) in in_function
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno, deferred) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            yield from ((base if a.name == "*" else f"{base}.{a.name}", node.lineno, deferred) for a in node.names)
        elif isinstance(node, ast.Call) and (called := imported_by_call(node)) is not None:
            yield called, node.lineno, deferred


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_root_name(target: str) -> bool:
    """`airflow_txn` itself, or a name its __init__ defines (`airflow_txn.Warehouse`), not a module of it."""
    parts = target.split(".")
    return len(parts) == 1 or (len(parts) == 2 and not (PACKAGE / parts[1]).is_dir()
                               and not (PACKAGE / f"{parts[1]}.py").is_file())


def outside_face(face: tuple[str, ...], target: str) -> str | None:
    """Why an import of the core's `target` is not one of its public face (None: it is)."""
    home = next((m for m in face if target == m or target.startswith(f"{m}.")), None)
    if home is None and not is_root_name(target):
        return f"an internal of the core (may import of the core only: the root package's names, {list(face)})"
    name = target.rpartition(".")[2] if target != home else ""
    return f"a private name of the core ({name})" if is_private(name) else None


def covers(pattern: str, module: str) -> bool:
    return fnmatchcase(module, pattern) or fnmatchcase(module, f"{pattern}.*")


def broken_rule(layer: Layer, target: str, deferred: bool = False) -> str | None:
    """Why `layer` may not import `target`, inside a function if `deferred` (None: it may)."""
    if deferred and any(covers(p, target) for p in layer.deferred):
        return None
    top = target.split(".")[0]
    if top == "tests":
        return "the test suite, which is not installed with the package"
    if top == "airflow_txn":
        other = layer_of(target).name
        if other not in layer.may_import:
            return f"the {other} layer (may import: {sorted(layer.may_import)})"
        if layer.core_face is not None and other in {"core", "zookeeper adapter", "catalog"}:
            return outside_face(layer.core_face, target)
        return None
    if top in OPTIONAL and top not in layer.optional:
        return f"{top}, an optional dependency (may import: {sorted(layer.optional)})"
    return None


def violations(source: str, module: str, is_package: bool = False, where: str = "") -> list[str]:
    """One line per import of `module` (whose code is `source`) that the rules forbid."""
    layer = layer_of(module)
    found = []
    for target, line, deferred in imports_in(source, module, is_package):
        reason = broken_rule(layer, target, deferred)
        if reason is not None:
            found.append(f"{where or module}:{line}: {module} ({layer.name}) imports {target}: {reason}")
    return found


def package_modules() -> list[tuple[Path, str, bool]]:
    return [(path, *module_name(path)) for path in sorted(PACKAGE.rglob("*.py"))]


# -- the package keeps the rules ---------------------------------------------------------------------------------
def test_every_import_in_the_package_follows_the_layer_rules() -> None:
    found = [v for path, module, is_package in package_modules()
             for v in violations(path.read_text(encoding="utf-8"), module, is_package, str(path.relative_to(REPO)))]
    assert found == [], "\n".join(found)


def test_every_layer_owns_modules() -> None:
    """A rule about modules that no longer exist protects nothing: every layer must match some module."""
    owners = {layer_of(module).name for _path, module, _pkg in package_modules()}
    assert owners == set(BY_NAME)
    assert {m for _p, m, _k in package_modules() if layer_of(m).name == "zookeeper adapter"} >= {
        "airflow_txn.oracle.zookeeper"}


def test_the_checker_sees_deferred_type_checking_and_dynamic_imports() -> None:
    """The scan is not vacuous: imports the interpreter never runs at import time are found in the real code."""
    seen = {(module, target) for path, module, is_package in package_modules()
            for target, _line, _deferred in imports_in(path.read_text(encoding="utf-8"), module, is_package)}
    assert ("airflow_txn.core.table_changes", "airflow_txn.core.reading") in seen  # inside a function
    assert ("airflow_txn.spark", "airflow_txn.spark.writer.write") in seen  # under TYPE_CHECKING
    assert ("airflow_txn.spark", "pyspark.sql") in seen  # importlib.import_module("pyspark.sql")
    assert ("airflow_txn.airflow.version_compat", "airflow.models.xcom.XComModel") in seen  # inside a function
    assert ("airflow_txn.cli.airflow_connections", "airflow_txn.airflow.hooks.txn.connection_config") in seen  # def


# -- the checker fails on a forbidden edge -----------------------------------------------------------------------
DEFERRED_PYSPARK = '''
def to_frame(table):
    import pyspark.sql
    return pyspark.sql.SparkSession.builder.getOrCreate().createDataFrame(table.to_pandas())
'''

TYPE_CHECKING_HOOK = '''
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from airflow_txn.airflow.hooks.txn import TxnHook
'''

FORBIDDEN = [
    # (module the source pretends to be, is it a package, its source, the import that must be reported)
    ("airflow_txn.core.commit", False, "from airflow_txn.airflow import TxnHook\n", "airflow_txn.airflow.TxnHook"),
    ("airflow_txn.core.commit", False, "from airflow_txn import spark\n", "airflow_txn.spark"),
    ("airflow_txn.core.commit", False, DEFERRED_PYSPARK, "pyspark.sql"),
    ("airflow_txn.catalog.database", False, "from ..cli import render\n", "airflow_txn.cli.render"),
    ("airflow_txn.oracle", True, "from ..airflow.version_compat import airflow_conf\n",
     "airflow_txn.airflow.version_compat.airflow_conf"),
    ("airflow_txn.core.warehouse", False, "import importlib\nimportlib.import_module('airflow.sdk')\n", "airflow.sdk"),
    ("airflow_txn.storage.root", False, "from kazoo.client import KazooClient\n", "kazoo.client.KazooClient"),
    ("airflow_txn.core.recovery", False, "from tests.harness.ports import free_port\n",
     "tests.harness.ports.free_port"),
    ("airflow_txn.model.names", False, "from airflow_txn.core.config import Config\n",
     "airflow_txn.core.config.Config"),
    ("airflow_txn.telemetry.metrics", False, "def f():\n    from airflow_txn.catalog import schema\n",
     "airflow_txn.catalog.schema"),
    ("airflow_txn.spark.writer", False, TYPE_CHECKING_HOOK, "airflow_txn.airflow.hooks.txn.TxnHook"),
    ("airflow_txn.spark.writer", False, "def f():\n    from airflow.sdk import Variable\n", "airflow.sdk.Variable"),
    ("airflow_txn.cli.commands", False, "def f():\n    import airflow_txn.spark.reader\n", "airflow_txn.spark.reader"),
    ("airflow_txn.cli.commands", False, "from airflow_txn.airflow.plugins import web\n",
     "airflow_txn.airflow.plugins.web"),
    ("airflow_txn.airflow.hooks.txn", False, "from airflow_txn.cli import main\n", "airflow_txn.cli.main"),
    # the cli's deferred imports: inside a function only, and only those listed
    ("airflow_txn.cli.in_airflow", False, "from airflow_txn.airflow.hooks.txn import TxnHook\n",
     "airflow_txn.airflow.hooks.txn.TxnHook"),
    ("airflow_txn.cli.in_airflow", False, TYPE_CHECKING_HOOK, "airflow_txn.airflow.hooks.txn.TxnHook"),
    ("airflow_txn.cli.in_airflow", False, "import airflow.cli.cli_config\n", "airflow.cli.cli_config"),
    ("airflow_txn.cli.in_airflow", False, "@importlib.import_module('airflow.cli.cli_config').x\ndef f():\n    pass\n",
     "airflow.cli.cli_config"),
    ("airflow_txn.cli.commands", False, "def f():\n    from airflow_txn.airflow.plugins.web import app\n",
     "airflow_txn.airflow.plugins.web.app"),
    ("airflow_txn.cli.commands", False, "def f():\n    from airflow.models import Connection\n",
     "airflow.models.Connection"),
    ("airflow_txn.core.warehouse", False, "def f():\n    from airflow_txn.airflow.hooks.txn import TxnHook\n",
     "airflow_txn.airflow.hooks.txn.TxnHook"),
    ("airflow_txn.airflow.plugins.plugin", False, "from airflow_txn.operators import VacuumOperator\n",
     "airflow_txn.operators.VacuumOperator"),
    # the layers above the core import only its public face (PUBLIC_FACE)
    ("airflow_txn.spark.frames", False, "from airflow_txn.catalog.part_records import PartRow\n",
     "airflow_txn.catalog.part_records.PartRow"),
    ("airflow_txn.spark.writer", False, "from airflow_txn.core import staging\n", "airflow_txn.core.staging"),
    ("airflow_txn.spark.compaction", False, "def f():\n    from ..storage.root import WrittenPart\n",
     "airflow_txn.storage.root.WrittenPart"),
    ("airflow_txn.spark", True, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from airflow_txn.core.runtime import Runtime\n", "airflow_txn.core.runtime.Runtime"),
    ("airflow_txn.spark.cow", False, "from airflow_txn import core\n", "airflow_txn.core"),
    ("airflow_txn.spark.reader", False, "from airflow_txn.core.warehouse import _GATE_SHARED\n",
     "airflow_txn.core.warehouse._GATE_SHARED"),
    ("airflow_txn.airflow.plugins.web.data", False, "from airflow_txn.catalog.txn_records import ACTIVE\n",
     "airflow_txn.catalog.txn_records.ACTIVE"),
    ("airflow_txn.airflow.hooks.txn", False, "from airflow_txn.core import bounds\n", "airflow_txn.core.bounds"),
    ("airflow_txn.airflow.plugins.listener", False, "def f():\n    import airflow_txn.oracle.zookeeper\n",
     "airflow_txn.oracle.zookeeper"),
    # the catalog imports only itself and the foundation (issue 35, item 1)
    ("airflow_txn.catalog.part_records", False, "from airflow_txn.core.visibility import is_visible\n",
     "airflow_txn.core.visibility.is_visible"),
    ("airflow_txn.catalog.commit_log", False, "from airflow_txn.oracle import CsnOracle\n",
     "airflow_txn.oracle.CsnOracle"),
    ("airflow_txn.catalog.compaction_records", False, "from ..storage.root import WrittenPart\n",
     "airflow_txn.storage.root.WrittenPart"),
    ("airflow_txn.catalog.database", False,
     "def f():\n    from airflow_txn.core.config import connect_timeout_seconds\n",
     "airflow_txn.core.config.connect_timeout_seconds"),
    ("airflow_txn.catalog.migrate", False, "def f():\n    from airflow_txn import __version__\n",
     "airflow_txn.__version__"),
    ("airflow_txn.catalog", True, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from airflow_txn.oracle.base import CsnOracle\n", "airflow_txn.oracle.base.CsnOracle"),
]


@pytest.mark.parametrize(("module", "is_package", "source", "target"), FORBIDDEN)
def test_a_forbidden_import_is_reported(module: str, is_package: bool, source: str, target: str) -> None:
    [report] = violations(source, module, is_package)
    assert f"{module} ({layer_of(module).name}) imports {target}:" in report


ALLOWED = [
    ("airflow_txn.airflow.operators.spark", "from airflow_txn.spark import write\nimport pyspark.sql\n"),
    ("airflow_txn.airflow.plugins.web.app",
     "from fastapi import FastAPI\nfrom airflow_txn.core.warehouse import Warehouse\n"),
    ("airflow_txn.spark.reader", "from airflow_txn.core.warehouse import Warehouse\nfrom . import engine\n"),
    ("airflow_txn.cli.doctor", "def f():\n    from airflow_txn.oracle.zookeeper import ZooKeeperOracle\n"),
    ("airflow_txn.oracle.zookeeper", "from kazoo.client import KazooClient\nfrom .base import CsnOracle\n"),
    ("airflow_txn.oracle", "def make():\n    from airflow_txn.oracle.zookeeper import ZooKeeperOracle\n"),
    ("airflow_txn.operators", "from airflow_txn.airflow.operators import VacuumOperator\n"),
    ("airflow_txn.core.commit", "import sqlalchemy\nimport pyarrow\nfrom airflow_txn import airflowish\n"),
    ("airflow_txn.spark.writer", "from airflow_txn.core.adapter import Statement, open_statement\n"
     "from airflow_txn import Warehouse, __version__, errors\nfrom airflow_txn.model.partitioning import WHOLE_TABLE\n"
     "from airflow_txn.telemetry import logs\nfrom airflow_txn.core.transaction import Transaction\n"),
    ("airflow_txn.airflow.provider", "from airflow_txn.core.config import DEFAULT_LEASE_SECONDS\n"
     "from airflow_txn.core import adapter\nimport airflow_txn.core.warehouse\nimport airflow_txn\n"),
    ("airflow_txn.cli.doctor", "from airflow_txn.catalog.txn_records import ACTIVE\n"),  # the cli is no adapter
    ("airflow_txn.cli.in_airflow", "def f():\n    from airflow_txn.airflow.hooks.txn import connection_config\n"
     "    from airflow.cli.cli_config import GroupCommand\n    g = lambda: __import__('airflow.cli.cli_config')\n"),
    ("airflow_txn.catalog.part_records", "import sqlalchemy\nfrom airflow_txn.model.visibility import is_visible\n"
     "from airflow_txn.errors import SerializationError\nfrom airflow_txn.telemetry import logs\n"
     "from . import schema, table_versions\n"),
    ("airflow_txn.core.apply", "from airflow_txn.catalog import commit_log\n"),  # the core over the catalog
    ("airflow_txn.cli.doctor", "from airflow_txn.catalog import schema\n"),
]


@pytest.mark.parametrize(("module", "source"), ALLOWED)
def test_an_allowed_import_is_not_reported(module: str, source: str) -> None:
    assert violations(source, module) == []


def test_modules_belong_to_the_layer_their_path_says() -> None:
    expected = {
        "airflow_txn": "core", "airflow_txn.core.warehouse": "core", "airflow_txn.catalog.database": "catalog",
        "airflow_txn.catalog": "catalog", "airflow_txn.model.visibility": "foundation",
        "airflow_txn.oracle": "core", "airflow_txn.oracle.sql": "core",
        "airflow_txn.oracle.zookeeper": "zookeeper adapter", "airflow_txn.oracle.zookeeper.spec": "zookeeper adapter",
        "airflow_txn.spark": "spark", "airflow_txn.spark.writer": "spark",
        "airflow_txn.airflow.plugins.web.app": "airflow",
        "airflow_txn.operators": "shims", "airflow_txn.sensors": "shims", "airflow_txn.cli.__main__": "cli",
        "airflow_txn.demo": "demo", "airflow_txn.model.tid": "foundation",
        "airflow_txn.errors": "foundation", "airflow_txn.telemetry.logs": "foundation",
        "airflow_txn.sparkish": "core", "airflow_txn.checks.runner": "checks",
    }
    assert {m: layer_of(m).name for m in expected} == expected


# -- no import cycles (issue 35, item 2) ---------------------------------------------------------------------------
ALLOWED_CYCLES: dict[frozenset[str], str] = {
    frozenset({"airflow_txn.core.transaction", "airflow_txn.core.warehouse"}):
        "Warehouse.begin() returns a Transaction and Transaction.warehouse is its Warehouse: both are public types "
        "(the spark and airflow layers hand `txn.warehouse` to what takes a Warehouse), so the transaction "
        "module names the Warehouse under TYPE_CHECKING only; a protocol there would change the public type",
}
"""The strongly connected components of the module graph the package may have, with why (every other
cycle fails test_the_package_has_no_other_import_cycle)."""


def module_graph(sources: Iterator[tuple[str, bool, str]] | list[tuple[str, bool, str]]) -> dict[str, set[str]]:
    """{module: the modules of the package it imports} from (module, is it a package, source) of every
    module: every import `imports_in` finds (deferred, TYPE_CHECKING, import_module calls) names the module
    it reads, the longest prefix of the imported name that is a module given (`from airflow_txn.catalog
    import Catalog`: the catalog package's __init__; `from airflow_txn import errors`: errors.py). The
    parents a submodule's import also runs are not edges: a package's __init__ importing what it holds is
    no cycle of its modules."""
    given = list(sources)
    modules = {module for module, _pkg, _source in given}
    graph: dict[str, set[str]] = {}
    for module, is_package, source in given:
        edges = graph.setdefault(module, set())
        for target, _line, _deferred in imports_in(source, module, is_package):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.add(target)
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of `graph` with more than one module: each the modules that reach
    a module and that it reaches (the graph is a few hundred modules: a walk from each is quick)."""
    reach = {node: reachable(graph, node) for node in graph}
    found: list[frozenset[str]] = []
    for node in sorted(graph):
        component = frozenset({node} | {other for other in reach[node] if node in reach.get(other, ())})
        if len(component) > 1 and component not in found:
            found.append(component)
    return found


def package_graph() -> dict[str, set[str]]:
    return module_graph([(module, is_package, path.read_text(encoding="utf-8"))
                         for path, module, is_package in package_modules()])


def describe(cycle: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = ", ".join(f"{a} -> {b}" for a in sorted(cycle) for b in sorted(graph[a] & cycle))
    return f"import cycle of {sorted(cycle)}: {edges}"


def test_the_package_has_no_other_import_cycle() -> None:
    graph = package_graph()
    found = [describe(cycle, graph) for cycle in cycles(graph) if cycle not in ALLOWED_CYCLES]
    assert found == [], "\n".join(found)


def test_every_allowed_cycle_still_exists() -> None:
    """An allowed cycle that is gone is deleted from ALLOWED_CYCLES, so that it cannot come back unnoticed."""
    assert set(ALLOWED_CYCLES) - set(cycles(package_graph())) == set()


def test_the_graph_has_the_deferred_and_type_checking_edges() -> None:
    graph = package_graph()
    assert "airflow_txn.core.warehouse" in graph["airflow_txn.core.transaction"]  # under TYPE_CHECKING
    assert "airflow_txn.spark.evolve" in graph["airflow_txn.spark.datasource"]  # inside a function only
    assert "airflow_txn.catalog" in graph["airflow_txn.catalog.txn_records"]  # a package's __init__
    assert "airflow_txn.errors" in graph["airflow_txn"]  # `from airflow_txn import errors`: the submodule
    # the cycles issue 35 removed stay removed (the modules still exist, so the edges could come back)
    assert "airflow_txn.core.commit_external" not in graph["airflow_txn.core.commit"]
    assert "airflow_txn.airflow.task_group" not in graph["airflow_txn.airflow.operators.base"]
    assert "airflow_txn.airflow.assets.lineage" not in graph["airflow_txn.airflow.assets.openlineage"]
    assert "airflow_txn.storage.local_root" not in graph["airflow_txn.storage.root"]



def test_the_zookeeper_recipes_never_import_the_oracle_back() -> None:
    """issue 35, item 3: oracle.py wires the recipes of airflow_txn/oracle/zookeeper/ together; none of them
    reaches it, the registry entry (kind.py, which opens it) or the package's __init__ (which loads it on first
    use) through its imports, deferred and TYPE_CHECKING ones included: a recipe calls back through a callable."""
    graph = package_graph()
    top = {"airflow_txn.oracle.zookeeper", "airflow_txn.oracle.zookeeper.kind", "airflow_txn.oracle.zookeeper.oracle"}
    recipes = {module for module in graph if module.startswith("airflow_txn.oracle.zookeeper.")} - top
    assert len(recipes) >= 8, recipes  # spec, session, layout, segments, records, decisions, compaction, group
    assert {recipe: sorted(reachable(graph, recipe) & top) for recipe in sorted(recipes)
            if reachable(graph, recipe) & top} == {}

FED_CYCLES = [
    # (the modules' (name, is it a package, source), the cycle that must be reported)
    ([("airflow_txn.core.commit", False,
       "def f():\n    from airflow_txn.core.commit_external import commit_external\n"),
      ("airflow_txn.core.commit_external", False, "from airflow_txn.core import commit\n")],
     {"airflow_txn.core.commit", "airflow_txn.core.commit_external"}),
    ([("airflow_txn.catalog.commit_log", False, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
       "    from airflow_txn.oracle import CsnOracle\n"),
      ("airflow_txn.oracle", True, "from .sql import SqlOracle\n"),
      ("airflow_txn.oracle.sql", False, "from ..catalog import commit_log\n")],
     {"airflow_txn.catalog.commit_log", "airflow_txn.oracle", "airflow_txn.oracle.sql"}),
    ([("airflow_txn.airflow.operators.base", False, "import importlib\n"
       "def f():\n    importlib.import_module('airflow_txn.airflow.task_group')\n"),
      ("airflow_txn.airflow.task_group", False, "from airflow_txn.airflow.operators.base import is_template\n")],
     {"airflow_txn.airflow.operators.base", "airflow_txn.airflow.task_group"}),
]


@pytest.mark.parametrize(("sources", "cycle"), FED_CYCLES)
def test_a_fed_cycle_is_reported(sources: list[tuple[str, bool, str]], cycle: set[str]) -> None:
    graph = module_graph(sources)
    assert cycles(graph) == [frozenset(cycle)]
    assert frozenset(cycle) not in ALLOWED_CYCLES
    # and the package's check would fail on it: the same cycle added to the package's own graph
    merged = {module: set(edges) for module, edges in package_graph().items()}
    for module, edges in graph.items():
        merged.setdefault(module, set()).update(edges)
    assert any(found >= cycle and found not in ALLOWED_CYCLES for found in cycles(merged))


def test_no_cycle_without_a_loop() -> None:
    """A diamond, a package's __init__ importing its modules, and a module importing itself are no cycle."""
    graph = module_graph([
        ("airflow_txn.catalog", True, "from .database import Catalog\n"),
        ("airflow_txn.catalog.database", False, "from airflow_txn.catalog import schema\nfrom . import database\n"),
        ("airflow_txn.catalog.schema", False, "import sqlalchemy\n"),
        ("airflow_txn.core.apply", False, "from airflow_txn.catalog import database, schema\n"),
    ])
    assert cycles(graph) == []
    assert graph["airflow_txn.catalog.database"] == {"airflow_txn.catalog.schema"}


# -- the layers above the core use only public attributes of what it hands them ----------------------------------
ADAPTER_LAYERS = frozenset(name for name, layer in BY_NAME.items() if layer.core_face is not None)


def private_attributes(source: str) -> list[str]:
    """Every `x._name` (not a dunder) in `source` where `x` is not `self`, `cls` or `super()`: the
    layers above the core touch what they get from it (`txn`, `wh`, a view) through public members
    only. A syntax tree cannot tell the types, so the rule covers every object, ours included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and is_private(node.attr) and not _own(node.value):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _own(value: ast.expr) -> bool:
    if isinstance(value, ast.Name):
        return value.id in {"self", "cls"}
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super"


def test_the_adapter_layers_touch_no_private_attribute() -> None:
    assert sorted(ADAPTER_LAYERS) == ["airflow", "checks", "spark"]
    found = [f"{path.relative_to(REPO)}:{hit}" for path, module, _pkg in package_modules()
             if layer_of(module).name in ADAPTER_LAYERS for hit in private_attributes(path.read_text(encoding="utf-8"))]
    assert found == [], "\n".join(found)


PRIVATE_ACCESS = """
def write(txn, wh, self, df):
    stmt = txn._statement(None)
    txn._run("spark write", lambda: None)
    snapshot = wh._snapshot_for(None, ["a.b"])
    self.warehouse._snapshot_for(1)
    txn.warehouse.runtime.storage._table_dirs.clear()
    self._extra, cls._registry, super()._wire(), df.__class__, txn.tid
"""


def test_a_private_attribute_access_is_reported() -> None:
    assert private_attributes(PRIVATE_ACCESS) == [
        "3: txn._statement", "4: txn._run", "5: wh._snapshot_for", "6: self.warehouse._snapshot_for",
        "7: txn.warehouse.runtime.storage._table_dirs",
    ]
