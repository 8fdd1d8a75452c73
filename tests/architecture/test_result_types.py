"""Public signatures name their shapes (issue 17, item 3): what the Warehouse, a Transaction, the Spark
functions, the CLI's renderers, the doctor and the page's data functions take and return is typed
(airflow_txn/model/results.py), never an Any-valued dict that mypy cannot check.

The checker walks each annotation as `typing.get_type_hints` resolves it, into unions, containers,
callables and the fields of every TypedDict it meets, and reports `dict[str, Any]`, `Mapping[str, Any]`
(any Any-valued mapping) and a bare `dict` / `Mapping`. A test feeds it such annotations and checks each
is reported. tests/airflow/test_result_types.py applies it to the operators and the page's app.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any, NotRequired

import pytest
from typing_extensions import TypedDict, is_typeddict

import airflow_txn
from airflow_txn import Transaction, Warehouse
from airflow_txn.airflow.plugins.web import data
from airflow_txn.cli import doctor, render
from airflow_txn.model import results

_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}


def loose_dicts(annotation: object, seen: set[object] | None = None) -> list[str]:
    """The Any-valued or bare dict/Mapping types inside `annotation`, TypedDict fields included."""
    seen = set() if seen is None else seen
    if isinstance(annotation, list | tuple):  # the parameter list of a Callable
        return [found for item in annotation for found in loose_dicts(item, seen)]
    origin = typing.get_origin(annotation) or annotation
    args = typing.get_args(annotation)
    if origin in _MAPPINGS and (not args or args[-1] is Any):
        return [str(annotation)]
    if is_typeddict(annotation):
        if annotation in seen:
            return []
        seen.add(annotation)
        hints = typing.get_type_hints(annotation)
        return [f"{annotation.__name__}.{name}: {found}"  # type: ignore[attr-defined]
                for name, hint in hints.items() for found in loose_dicts(hint, seen)]
    return [found for arg in args for found in loose_dicts(arg, seen)]


def loose_in(fn: Callable[..., object], localns: Mapping[str, object] | None = None) -> list[str]:
    """Every loose dict in the parameters and return of `fn`, each as `name: parameter: type`."""
    hints = typing.get_type_hints(fn, localns=dict(localns or {}))
    return [f"{fn.__qualname__}: {param}: {found}" for param, hint in hints.items() for found in loose_dicts(hint)]


def public_methods(cls: type) -> Iterable[Callable[..., object]]:
    """The public methods of `cls` and the getters of its properties."""
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property) and member.fget is not None:
            yield member.fget
        elif isinstance(member, classmethod | staticmethod):
            yield member.__func__
        elif isinstance(member, types.FunctionType):
            yield member


def public_functions(module: types.ModuleType) -> list[Callable[..., object]]:
    """The public functions `module` defines (not those it imports)."""
    return [f for name, f in vars(module).items()
            if not name.startswith("_") and isinstance(f, types.FunctionType) and f.__module__ == module.__name__]


def loose_signatures(functions: Iterable[Callable[..., object]], localns: Mapping[str, object] | None = None
                     ) -> list[str]:
    return [found for fn in functions for found in loose_in(fn, localns)]


HANDLES = {"Warehouse": Warehouse, "Transaction": Transaction}
"""Names the core modules import only under TYPE_CHECKING."""


# -- the package keeps the rule ------------------------------------------------------------------------------
def test_warehouse_and_transaction_signatures_are_typed() -> None:
    iceberg = pytest.importorskip("pyiceberg.catalog")  # Warehouse.iceberg_catalog's return (the iceberg extra)
    functions = [*public_methods(Warehouse), *public_methods(Transaction)]
    assert len(functions) > 30
    import pyarrow.dataset

    from airflow_txn.core.datasets import DuckDBConnection

    lazy = {"IcebergCatalog": iceberg.Catalog, "pads": pyarrow.dataset, "DuckDBConnection": DuckDBConnection}
    assert loose_signatures(functions, {**HANDLES, **lazy}) == []  # names imported only under TYPE_CHECKING


def test_the_cli_renderers_and_the_doctor_are_typed() -> None:
    functions = [*public_functions(render), doctor.run, doctor.Check.as_dict]
    assert render.transaction in functions and render.doctor in functions
    assert loose_signatures(functions, vars(results)) == []  # render imports the result types for annotations only


def test_the_page_data_functions_are_typed() -> None:
    functions = public_functions(data)
    assert data.detail in functions and data.watermark in functions
    assert loose_signatures(functions) == []


def test_the_spark_functions_are_typed() -> None:
    pytest.importorskip("pyspark")
    import airflow_txn.spark as txn_spark

    functions = [getattr(txn_spark, name) for name in txn_spark.__all__]
    assert loose_signatures(functions, HANDLES) == []


def test_every_result_type_is_closed() -> None:
    """No result type holds an Any-valued dict anywhere in its fields."""
    shapes = [v for v in vars(results).values() if is_typeddict(v)]
    assert len(shapes) > 20
    assert [found for shape in shapes for found in loose_dicts(shape)] == []
    assert {results.TransactionInfo, results.VacuumReport} <= set(shapes)
    assert airflow_txn.TransactionInfo is results.TransactionInfo


# -- the checker fails on a loose dict -----------------------------------------------------------------------
class _Loose(TypedDict):
    name: str
    extra: NotRequired[dict[str, Any]]


class _Nested(TypedDict):
    inner: list[_Loose]


def _returns_any_dict() -> dict[str, Any]:
    raise NotImplementedError


def _takes_any_mapping(value: Mapping[str, Any]) -> int:
    raise NotImplementedError


def _bare(value: dict, other: MutableMapping) -> None:  # type: ignore[type-arg]
    raise NotImplementedError


def _nested(rows: Sequence[list[dict[str, Any]] | None], callback: Callable[[str, dict[str, Any]], None]) -> None:
    raise NotImplementedError


def _through_a_typed_dict(report: _Nested) -> _Loose:
    raise NotImplementedError


def _typed(info: results.TransactionInfo, rows: Sequence[Mapping[str, object]], counts: dict[str, int],
           anything: Any) -> results.VacuumReport:
    raise NotImplementedError


@pytest.mark.parametrize(("fn", "expected"), [
    (_returns_any_dict, ["return: dict[str, typing.Any]"]),
    (_takes_any_mapping, ["value: collections.abc.Mapping[str, typing.Any]"]),
    (_bare, ["value: <class 'dict'>", "other: <class 'collections.abc.MutableMapping'>"]),
    (_nested, ["rows: dict[str, typing.Any]", "callback: dict[str, typing.Any]"]),
    (_through_a_typed_dict, ["report: _Nested.inner: _Loose.extra: dict[str, typing.Any]",
                             "return: _Loose.extra: dict[str, typing.Any]"]),
])
def test_the_checker_reports_a_loose_dict(fn: Callable[..., object], expected: list[str]) -> None:
    assert loose_in(fn) == [f"{fn.__qualname__}: {e}" for e in expected]
    assert loose_signatures([_typed, fn]) == loose_in(fn)


def test_the_checker_passes_typed_signatures() -> None:
    """Typed dicts, Mapping[str, object] and a plain Any (no dict) are fine."""
    assert loose_in(_typed) == []
