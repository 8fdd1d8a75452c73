"""The Airflow layer's results are typed too (issue 17, item 3): the maintenance operators' execute
(their XCom) and the page's routes and HTML functions name their shapes, no Any-valued dict; the
checker is tests/architecture/test_result_types.py's."""

from __future__ import annotations

import typing

import pytest

from tests.architecture.test_result_types import loose_dicts, loose_signatures, public_functions

pytestmark = pytest.mark.airflow


def test_the_operators_results_are_typed() -> None:
    """What execute returns (its XCom); its parameter is Airflow's Context."""
    from airflow_txn.airflow.operators.maintenance import CompactOperator, VacuumOperator

    returns = [typing.get_type_hints(op.execute)["return"] for op in (CompactOperator, VacuumOperator)]
    assert [loose_dicts(r) for r in returns] == [[], []]
    assert [r.__name__ for r in returns] == ["CompactionSummary", "VacuumReport"]


def test_the_page_routes_and_html_are_typed() -> None:
    from airflow_txn.airflow.plugins.web import app, page

    functions = [*public_functions(app), *public_functions(page)]
    assert app.get_transaction in functions and page.index_page in functions
    assert loose_signatures(functions) == []
