"""The quick-start demo on real Airflow: the example DAGs, run with `dag.test()` on the embedded default.

    python -m demo.airflow_demo [--home DIR] [--dags DIR]      (scripts/demo.sh runs it)

1. multi_table_backfill over 2024-01-01..03; the first try of load_orders[0] fails after staging
   its rows and is retried: one commit, one CSN, no duplicate.
2. multi_table_backfill over 2024-01-03..05 with load_order_items failing on every try: the
   transaction rolls back, the run ends `failed`, every table is unchanged.
3. write-audit-publish: multi_table_backfill of 2024-01-03 with an item whose order does not exist:
   every load succeeds, the group's check task finds the item, rolls the transaction back and fails
   the run; every table is unchanged.
4. multi_table_reader at the first run's CSN: CommitCSNSensor (deferred), then a Spark read of the
   three tables at exactly that snapshot and a referential-integrity check.
5. A summary of runs, transactions, CSNs and row counts.

Everything lives under --home (default $AIRFLOW_TXN_HOME or ./.airflow_txn_demo): Airflow's home
with its SQLite metadata database, the catalog, the warehouse files and airflow.log, where the
Airflow and Spark logs of the runs go. The core-only demo is `python -m airflow_txn.demo`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TABLES = ["shop.customers", "shop.orders", "shop.order_items"]
SPARK_CONF = {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
              "spark.default.parallelism": "2", "spark.driver.host": "127.0.0.1",
              "spark.driver.bindAddress": "127.0.0.1"}
RUN_1 = {"start": "2024-01-01", "days": 3, "fail_task": "load_orders", "fail_tries": 1}
RUN_2 = {"start": "2024-01-03", "days": 3, "fail_task": "load_order_items", "fail_tries": 99}
RUN_3 = {"start": "2024-01-03", "days": 1, "bad_row": "item_without_order"}


def configure(home: Path, dags: Path) -> None:
    """Airflow and airflow_txn settings for the demo; must run before Airflow is imported."""
    os.environ.update({
        "AIRFLOW_HOME": str(home / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW_TXN_HOME": str(home),
        "AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT": json.dumps({"conn_type": "airflow_txn", "extra": {
            "catalog": f"sqlite:///{home / 'catalog.db'}", "root": str(home / "warehouse"),
            "oracle": "sql", "spark_conf": SPARK_CONF}}),
    })
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@contextmanager
def into(log_path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (Airflow's, Spark's JVM's) to `log_path` meanwhile."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def run_dag(bag: Any, dag_id: str, conf: dict[str, Any], log_path: Path) -> Any:
    dag = bag.get_dag(dag_id)
    with into(log_path):  # every param explicitly: in-process runs reuse task objects and their params
        return dag.test(run_conf={**{k: dag.params[k] for k in dag.params}, **conf})


def task_summary(dag_run: Any) -> dict[str, str]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {(ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"):
                f"{ti.state}" + (f" (try {ti.try_number})" if ti.try_number > 1 else "")
                for ti in dag_run.get_task_instances(session=session)}


def xcom(dag_run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id,
                                                 key="return_value")).first()
        return None if row is None else XComModel.deserialize_value(row)


def asset_events(dag_run: Any) -> list[tuple[str, dict[str, Any]]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(AssetModel.uri, AssetEvent.extra)
                               .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                               .where(AssetEvent.source_run_id == dag_run.run_id))
        return sorted((str(uri), dict(extra)) for uri, extra in rows)


def reader_queued() -> bool:
    from airflow.models.asset import AssetDagRunQueue
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(AssetDagRunQueue.target_dag_id).where(AssetDagRunQueue.target_dag_id == "multi_table_reader")
        return session.scalars(query).first() is not None


def stop_spark() -> None:
    """Stop the SparkSession the tasks started (quietly: py4j logs while the interpreter exits)."""
    import logging

    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()
    logging.getLogger("py4j").setLevel(logging.WARNING)


def counts(wh: Any, csn: int | None = None) -> dict[str, int]:
    return {t: wh.read(t, csn=csn).num_rows for t in TABLES}


def show_counts(title: str, values: dict[str, int]) -> None:
    print(f"   {title:<30} " + "  ".join(f"{t.split('.')[1]}={n}" for t, n in values.items()))


def show_tasks(dag_run: Any, keep: tuple[str, ...]) -> None:
    for task, state in task_summary(dag_run).items():
        if any(k in task for k in keep):
            print(f"     {task:<34} {state}")


def transaction_of(wh: Any, dag_run: Any) -> dict[str, Any]:
    label = f"{dag_run.dag_id}/{dag_run.run_id}"
    return next(t for t in wh.transactions(limit=1000) if t["label"] == label)


def run(home: Path, dags: Path) -> int:
    from airflow.utils import db

    from airflow_txn.airflow import TxnHook
    from airflow_txn.airflow.version_compat import dagbag_module

    log_path = home / "airflow.log"
    print(f"demo home {home} (Airflow and Spark logs: {log_path})")
    with into(log_path):
        db.initdb()
        with TxnHook().warehouse() as wh:  # as `airflow-txn init` does in a deployment: DAG files naming table
            wh.init()  # Assets read the warehouse's id when parsed, and parsing never creates a warehouse
        bag = dagbag_module().DagBag(dag_folder=str(dags))
    if bag.import_errors:
        print(f"DAG import errors: {bag.import_errors}")
        return 1
    print(f"Airflow metadata DB ready; DAGs: {', '.join(sorted(bag.dag_ids))}")

    print("\n1. multi_table_backfill 2024-01-01..03 (load_orders[0] fails once after staging, then retries)")
    first = run_dag(bag, "multi_table_backfill", RUN_1, log_path)
    print(f"   run {first.run_id}: {first.state}")
    show_tasks(first, ("load_orders[0]", "commit", "rollback", "outcome"))
    csn = xcom(first, "backfill.commit")
    with TxnHook().warehouse() as wh:
        print(f"   transaction {transaction_of(wh, first)['tid']} committed at CSN {csn}")
        show_counts(f"readers at CSN {csn}:", counts(wh, csn))
        show_counts(f"readers at CSN {csn - 1} (before):", counts(wh, csn - 1))
        after_first = counts(wh)
        watermark = wh.readable_csn()
    for uri, extra in asset_events(first):
        print(f"   Asset event {uri}  extra={extra}")
    print(f"   multi_table_reader queued by those Asset events: {reader_queued()}")

    print("\n2. multi_table_backfill 2024-01-03..05 with load_order_items failing on every try")
    second = run_dag(bag, "multi_table_backfill", RUN_2, log_path)
    print(f"   run {second.run_id}: {second.state}")
    show_tasks(second, ("load_order_items[0]", "commit", "rollback", "outcome"))
    with TxnHook().warehouse() as wh:
        failed = transaction_of(wh, second)
        staged = [p for p in wh.transaction_info(failed["tid"])["parts"] if p["role"] == "created"]
        print(f"   transaction {failed['tid']} {failed['state']}: {failed['failed_reason']}")
        print(f"   its {len(staged)} staged parts were compensated; watermark still {wh.readable_csn()}")
        after_second = counts(wh)
        show_counts("readers now:", after_second)
        unchanged = after_second == after_first and wh.readable_csn() == watermark
        print(f"   tables unchanged: {unchanged}")

    print("\n3. write-audit-publish: multi_table_backfill 2024-01-03 with an item whose order does not exist")
    third = run_dag(bag, "multi_table_backfill", RUN_3, log_path)
    print(f"   run {third.run_id}: {third.state}")
    show_tasks(third, ("load_order_items[0]", "check", "commit", "rollback", "outcome"))
    with TxnHook().warehouse() as wh:
        audited = transaction_of(wh, third)
        report = audited["metadata"].get("checks", {}).get("backfill.check", {})
        for result in report.get("checks", []):
            print(f"   check {result['name']!r}: {result['value']} (bounds ..{result['max']}) "
                  f"{'passed' if result['passed'] else 'FAILED'}")
        print(f"   transaction {audited['tid']} {audited['state']}: {audited['failed_reason']}")
        audit_unchanged = counts(wh) == after_first and wh.readable_csn() == watermark
        print(f"   tables unchanged: {audit_unchanged}")

    print(f"\n4. multi_table_reader at CSN {csn} (deferrable CommitCSNSensor, then Spark reads that snapshot)")
    reader = run_dag(bag, "multi_table_reader", {"csn": csn}, log_path)
    checked = xcom(reader, "check_integrity") or {}
    print(f"   run {reader.run_id}: {reader.state}")
    print(f"   sensor handed over CSN {xcom(reader, 'wait_for_commit')}; integrity check: {checked}")

    with TxnHook().warehouse() as wh:
        print("\nSummary")
        print(f"   {'run':<28} {'state':<8} {'transaction':<12} {'CSN':>4}  rows (customers/orders/order_items)")
        for number, dag_run in enumerate((first, second, third), start=1):
            txn = transaction_of(wh, dag_run)
            rows = "/".join(str(v) for v in counts(wh, txn["commit_csn"]).values()) if txn["commit_csn"] else "-"
            print(f"   {dag_run.dag_id + ' #' + str(number):<28} {dag_run.state!s:<8} "
                  f"{txn['state']:<12} {txn['commit_csn'] or '-':>4}  {rows}")
        print(f"   {'multi_table_reader':<28} {reader.state!s:<8} {'(reads)':<12} {csn:>4}  "
              f"{checked.get('customers')}/{checked.get('orders')}/{checked.get('order_items')}")
        print(f"   readable watermark: CSN {wh.readable_csn()}")

    ok = (str(first.state) == "success" and str(second.state) == "failed" and unchanged
          and str(third.state) == "failed" and audit_unchanged and report.get("passed") is False
          and str(reader.state) == "success" and after_first == {"shop.customers": 15, "shop.orders": 30,
                                                                  "shop.order_items": 60}
          and checked.get("orphan_orders") == 0 and checked.get("orphan_items") == 0)
    print("\nAIRFLOW DEMO OK" if ok else "\nAIRFLOW DEMO FAILED")
    with into(log_path):
        stop_spark()
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("AIRFLOW_TXN_HOME") or ".airflow_txn_demo"),
                        help="where the demo keeps everything (created; should be empty)")
    parser.add_argument("--dags", type=Path, default=Path(__file__).resolve().parents[2] / "dags",
                        help="the example DAG folder (default: the clone's dags/)")
    args = parser.parse_args(argv)
    home = args.home.absolute()
    home.mkdir(parents=True, exist_ok=True)
    if "airflow" in sys.modules and os.environ.get("AIRFLOW_HOME") != str(home / "airflow"):
        print("error: Airflow was imported before the demo configured it; run this module in a fresh process",
              file=sys.stderr)
        return 2
    configure(home, args.dags.absolute())
    return run(home, args.dags.absolute())


if __name__ == "__main__":
    sys.exit(main())
