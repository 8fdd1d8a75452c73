"""The Airflow layer's public names have one list (airflow_txn/airflow/public.py): every re-exporting
package's `__all__` and type checkers' view, and provider info, agree with it; each name imports from
every path it is listed under and every path README.md, docs/OPERATORS.md and docs/AIRFLOW.md show;
importing the packages loads no Airflow. Issue 17, item 2: one home per concept."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

from airflow_txn.airflow import provider, public
from airflow_txn.airflow.public import BY_NAME, PACKAGES, PUBLIC, Kind
from tests.helpers import import_error_without

REPO = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "docs/OPERATORS.md", "docs/AIRFLOW.md"]
IMPORT = re.compile(r"from (airflow_txn[\w.]*) import (\([^)]*\)|[^\n]+)")
PROVIDER_KEYS = {"hooks": Kind.HOOK, "operators": Kind.OPERATOR, "sensors": Kind.SENSOR, "triggers": Kind.TRIGGER}
# Classes of the kind packages that subclass an Airflow base but are no public name (DAGs never use them).
INTERNAL = {"TxnBaseOperator", "TxnCallableOperator"}  # bases of the public operators


def paths(name: str) -> list[str]:
    """Every module `name` imports from: its home module and the packages re-exporting its kind."""
    entry = BY_NAME[name]
    return [entry.module, *(package for package, kinds in PACKAGES.items() if entry.kind in kinds)]


def documented_imports() -> list[tuple[str, str, str]]:
    """(doc, module, name) of each `from airflow_txn... import name` the user docs show."""
    found = []
    for doc in DOCS:
        for module, names in IMPORT.findall((REPO / doc).read_text()):
            for name in names.strip("()").replace("\n", " ").split(","):
                if name.strip() and name.strip() != "...":
                    found.append((doc, module, name.split(" as ")[0].strip()))
    return found


def type_checking_names(package: str) -> dict[str, str]:
    """{name: module it is imported from} of the `if TYPE_CHECKING:` block of `package`'s source."""
    tree = ast.parse(Path(inspect.getfile(importlib.import_module(package))).read_text())
    blocks = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    view: dict[str, str] = {}
    for node in (n for block in blocks for n in block.body):
        assert isinstance(node, ast.ImportFrom) and node.module, f"{package}: only imports under TYPE_CHECKING"
        for alias in node.names:
            if alias.name == "*":
                view.update(dict.fromkeys(public.names(node.module), node.module))
            else:
                assert alias.asname == alias.name, f"{package}: `import {alias.name} as {alias.name}` re-exports it"
                view[alias.name] = node.module
    return view


def test_each_name_is_listed_once_under_a_kind() -> None:
    assert len(BY_NAME) == len(PUBLIC) > 0
    assert all(isinstance(p.kind, Kind) and p.module.startswith("airflow_txn.airflow.") for p in PUBLIC)
    assert {p.kind for p in PUBLIC} == set(Kind)  # no kind without a name


def test_every_all_and_type_checkers_view_is_the_list() -> None:
    for package in PACKAGES:
        module = importlib.import_module(package)
        assert module.__all__ == public.names(package), package
        view = type_checking_names(package)
        assert sorted(view) == public.names(package), package
        for name, source in view.items():  # the type checker's class is the one imported at run time
            assert source == BY_NAME[name].module or name in public.exports(source), (package, name, source)


def test_provider_info_is_derived_from_the_list() -> None:
    info = provider.get_provider_info()
    for key, kind in PROVIDER_KEYS.items():
        assert info[key] == [{"integration-name": provider.INTEGRATION, "python-modules": public.modules(kind)}]
    listed = {m for key in PROVIDER_KEYS for m in info[key][0]["python-modules"]}
    assert listed == {p.module for p in PUBLIC if p.kind in PROVIDER_KEYS.values()}
    hooks = [connection["hook-class-name"] for connection in info["connection-types"]]
    assert hooks == [public.class_path(p.name) for p in public.of_kind(Kind.HOOK)]


def test_the_docs_import_each_public_class_from_one_of_its_paths() -> None:
    documented = documented_imports()
    assert ("README.md", "airflow_txn.sensors", "CommitCSNSensor") in documented  # the parser works
    for doc, module, name in documented:
        if name in BY_NAME:
            assert module in paths(name), f"{doc}: from {module} import {name}; the list says {paths(name)}"
        else:  # a submodule, e.g. `from airflow_txn.airflow import provider`, or no name of the Airflow layer
            assert module not in PACKAGES or importlib.util.find_spec(f"{module}.{name}"), (doc, module, name)
    shown = {name for _, _, name in documented}
    assert [p.name for p in PUBLIC if p.name not in shown and p.kind is not Kind.CONSTANT] == []


def test_importing_the_packages_loads_no_airflow_and_a_use_names_the_extra() -> None:
    setup = (
        f"import {', '.join(PACKAGES)}, airflow_txn.airflow.provider as p\n"
        "p.get_provider_info()\n"
        f"assert [sys.modules[m].__all__ for m in {list(PACKAGES)!r}]\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'airflow'], 'importing loaded Airflow'"
    )
    said = import_error_without("airflow", setup, "from airflow_txn.operators import BeginTransactionOperator")
    assert "pip install 'airflow-txn[airflow]'" in said


@pytest.mark.airflow
def test_every_public_name_imports_from_each_of_its_paths() -> None:
    for entry in PUBLIC:
        defined = getattr(importlib.import_module(entry.module), entry.name)
        for path in paths(entry.name):
            namespace: dict[str, Any] = {}
            exec(f"from {path} import {entry.name}", namespace)
            assert namespace[entry.name] is defined, (path, entry.name)
    for _doc, module, name in documented_imports():
        exec(f"from {module} import {name}", {})  # what the docs show runs as written
    for package in PACKAGES:
        namespace = {}
        exec(f"from {package} import *", namespace)
        assert sorted(set(namespace) - {"__builtins__"}) == public.names(package), package


def airflow_bases() -> dict[Kind, type]:
    from airflow_txn.airflow import version_compat as af

    return {Kind.OPERATOR: af.BaseOperator, Kind.SENSOR: af.BaseSensorOperator, Kind.TRIGGER: af.BaseTrigger,
            Kind.HOOK: af.BaseHook, Kind.TASK_GROUP: af.TaskGroup}


def kind_of(cls: type, bases: dict[Kind, type]) -> Kind | None:
    """The most specific kind whose Airflow base `cls` subclasses (a sensor is an operator too)."""
    kinds = [kind for kind, base in bases.items() if issubclass(cls, base)]
    return Kind.SENSOR if Kind.SENSOR in kinds else (kinds[0] if kinds else None)


@pytest.mark.airflow
def test_every_class_of_the_kind_packages_is_listed_under_its_kind() -> None:
    """An operator, sensor, trigger or hook class written without its line in public.py is found here."""
    bases = airflow_bases()
    roots = [importlib.import_module(f"airflow_txn.airflow.{p}") for p in ("operators", "sensors", "triggers", "hooks")]
    modules = [m.name for root in roots for m in pkgutil.walk_packages(root.__path__, f"{root.__name__}.")]
    classes = {cls for name in [*modules, "airflow_txn.airflow.task_group"]
               for _, cls in inspect.getmembers(importlib.import_module(name), inspect.isclass)
               if cls.__module__ == name and not cls.__name__.startswith("_")}
    found = {cls.__name__: kind_of(cls, bases) for cls in classes if kind_of(cls, bases) is not None}
    assert {n: k for n, k in found.items() if n not in INTERNAL} == {
        p.name: p.kind for p in PUBLIC if p.kind in bases and inspect.isclass(getattr(
            importlib.import_module(p.module), p.name))}
