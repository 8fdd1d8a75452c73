"""Operator extra links (registered in provider info's `extra-links`): the buttons a task instance shows
in the Airflow UI.

- "Transaction" (BeginTransactionOperator, SparkTransactionOperator, TransactionPythonOperator,
  CommitTransactionOperator): the
  transaction on the plugin's Transactions page, `<[api] base_url>/airflow-txn/transactions/<tid>`.
  The page shows the warehouse of the API server's `[airflow_txn] conn_id`, so a task working through
  another connection gets no link (an empty one, which the UI leaves disabled).
- "Spark UI" (SparkTransactionOperator): the web UI of the task's own Spark driver, while it runs.
  Through Spark Connect there is none to give (the server's UI is the server's business): no link.

Airflow 3 computes a task's links in its worker when the task ends (the task runner calls `get_link`
with the live operator and pushes each URL to XCom under the link's `xcom_key`); the API server reads
them back from XCom. The operators record what the links need (`linked_tid`, `spark_ui_url`) while they
run; the Spark UI link is also pushed as soon as Spark starts, so it can be followed during the run.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, config_option
from airflow_txn.airflow.version_compat import BaseOperatorLink, airflow_conf

PAGE_PREFIX = "/airflow-txn"
"""Where the plugin mounts the Transactions page in the API server (plugin.py's URL_PREFIX)."""


def page_conn_id() -> str:
    """The connection whose warehouse the Transactions page shows (`[airflow_txn] conn_id`)."""
    return config_option("conn_id") or DEFAULT_CONN_ID


def _base_url() -> str:
    """`[api] base_url` without its trailing slash ("" when unset: URLs are then paths on the API server)."""
    return str(airflow_conf().get("api", "base_url", fallback="") or "").rstrip("/")


def transaction_url(tid: str) -> str:
    """The Transactions page of `tid`: under `[api] base_url` when it is set (an absolute URL), else a
    path on the API server the UI was loaded from."""
    return f"{_base_url()}{PAGE_PREFIX}/transactions/{quote(tid, safe='')}"


def run_url(dag_id: str, run_id: str) -> str:
    """The DAG run in the Airflow UI (`<[api] base_url>/dags/<dag_id>/runs/<run_id>`, as Airflow's own
    task log URLs are built)."""
    return f"{_base_url()}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


class TransactionLink(BaseOperatorLink):
    """The task's transaction on the Transactions page."""

    name = "Transaction"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        tid = getattr(operator, "linked_tid", None)
        if not tid or getattr(operator, "conn_id", DEFAULT_CONN_ID) != page_conn_id():
            return ""
        return transaction_url(str(tid))


class SparkUILink(BaseOperatorLink):
    """The web UI of the Spark driver the task started (none through Spark Connect, or with the UI off)."""

    name = "Spark UI"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return str(getattr(operator, "spark_ui_url", None) or "")


EXTRA_LINKS = (TransactionLink, SparkUILink)
"""Every link class of the layer (provider info's `extra-links`)."""
