"""Listing transactions by the DAG and run their label names (`<dag_id>/<run_id>`), filtered in SQL
before the limit: the plugin page lists only the DAGs a user may read this way."""

from __future__ import annotations

from airflow_txn import Warehouse
from airflow_txn.catalog.txn_records import COMMITTED, LabelFilter

LABELS = ["a/r1", "a/r2", "b/r1", None, "plain", "etl/", "/run", "x y/r1"]


def _labels(rows: list[dict[str, object]]) -> list[object]:
    return [r["label"] for r in rows]


def test_labels_name_their_dag_and_run(wh: Warehouse) -> None:
    """issue 16, case 7: the DAG of a label is what precedes its first '/', as the page reads it."""
    for label in LABELS:
        wh.begin(label=label)
    assert sorted(wh.label_dags(), key=str) == sorted(["a", "b", None, "x y"], key=str)
    assert sorted(_labels(wh.transactions(labels=LabelFilter(dags=frozenset({"a"}), no_dag=False)))) == ["a/r1", "a/r2"]
    unnamed = wh.transactions(labels=LabelFilter(dags=frozenset(), no_dag=True))
    assert sorted(_labels(unnamed), key=str) == sorted([None, "plain", "etl/", "/run"], key=str)
    of_run = wh.transactions(labels=LabelFilter(run_id="r1"))
    assert sorted(_labels(of_run)) == ["a/r1", "b/r1", "x y/r1"]
    one = wh.transactions(labels=LabelFilter(dags=frozenset({"a"}), run_id="r2"))
    assert _labels(one) == ["a/r2"]
    plain_tid = next(r["tid"] for r in unnamed if r["label"] == "plain")
    with_tid = wh.transactions(labels=LabelFilter(dags=frozenset({"b"}), no_dag=False, tids=frozenset({plain_tid})))
    assert sorted(_labels(with_tid)) == ["b/r1", "plain"]
    assert len(wh.transactions(labels=LabelFilter())) == len(LABELS) == len(wh.transactions())


def test_the_filter_applies_before_the_limit(wh: Warehouse) -> None:
    """issue 16, case 7: a DAG whose transactions are older than `limit` others still lists them."""
    older = [wh.begin(label="mine/run1"), wh.begin(label="mine/run2")]
    older[0].commit()
    for i in range(12):
        wh.begin(label=f"others/run{i}")
    mine = wh.transactions(limit=5, labels=LabelFilter(dags=frozenset({"mine"}), no_dag=False))
    assert [r["tid"] for r in mine] == [older[1].tid, older[0].tid]
    committed = wh.transactions(state=COMMITTED, limit=1, labels=LabelFilter(dags=frozenset({"mine"})))
    assert [r["tid"] for r in committed] == [older[0].tid]
    assert wh.transactions(limit=5, labels=LabelFilter(dags=frozenset(), no_dag=False)) == []
