"""Tables by name in Spark SQL: `register_tables` makes `spark.table("shop.orders")` and `spark.sql("... FROM
shop.orders")` read ONE consistent snapshot of the warehouse's tables (docs/DESIGN.md D30, "Spark SQL names").

    airflow_txn.spark.register_tables(spark, wh)                  # the readable watermark, one CSN for all
    airflow_txn.spark.register_tables(spark, wh, csn=42)          # or tag="month-end", tables=["shop.orders"]
    spark.sql("SELECT c.name, sum(o.amount) FROM shop.orders o JOIN shop.customers c USING (customer_id) ...")

Each table is a view of Spark's session catalog, `ns.table`, over a table of the "airflow_txn" data source
(datasource.py) in namespace `airflow_txn_registered`, passing it the read the core planned here (`read_plan`) and
where the warehouse is as the options of the view's table reference (`SELECT * FROM ... WITH (...)`): a local
SparkSession and Spark Connect alike, on any root. Every read is planned before anything is
registered, so an unknown table, a CSN below a table's retention horizon or a missing tag raises its typed error
here and leaves the earlier registration as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession

from airflow_txn.core.adapter import ReadPlan, plan_read
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import InvalidArgumentError, InvalidNameError
from airflow_txn.spark import datasource
from airflow_txn.spark.via import ours_raised


def register_tables(spark: SparkSession, wh: Warehouse, csn: int | None = None, tag: str | None = None,
                    tables: Sequence[str] | None = None) -> dict[str, int]:
    """Make `spark.table("ns.table")` and Spark SQL's `ns.table` read one consistent snapshot of `wh`: CSN `csn`,
    tag `tag` (a named snapshot: Warehouse.tag), else the readable watermark, chosen once for all the tables.
    `tables`: these (None: every table of the warehouse; with a tag, every table the tag holds).

    Returns {table: the CSN it reads}: one CSN for all. Registering again replaces the registration of the tables
    it names (a newer CSN: call it again after a commit); a table or view of the same name that register_tables
    did not make is never replaced (InvalidNameError). The names live in the session catalog of the Spark
    application (a Spark Connect server: every client of it; another session reads them after
    airflow_txn.spark.register(spark), as Spark keeps a Python data source per session), their view text holds the
    warehouse's settings, and each query reads the planned parts' files: keep the snapshot readable (inside the
    retention window, or tagged) while they are queried. Spark's CREATE DATABASE makes a directory under
    `spark.sql.warehouse.dir` (default: `spark-warehouse/` in the working directory): set it where it may go.

    Errors, raised before anything is registered: InvalidArgumentError for both `csn` and `tag`;
    TableNotFoundError; SnapshotTooOldError below a table's retention horizon; TagNotFoundError, TableNotInTagError.
    """
    if csn is not None and tag is not None:
        raise InvalidArgumentError(f"register the tables at csn {csn} or at tag {tag!r}, not both")
    if tables is not None and (isinstance(tables, str) or not all(isinstance(t, str) for t in tables)):
        raise InvalidArgumentError(f"tables must be a list of table names, got {tables!r}")
    if tag is not None:
        held = wh.tag_info(tag)
        names = list(tables) if tables is not None else list(held["tables"])
    else:
        names = list(tables) if tables is not None else wh.tables()
        if csn is None:
            csn = wh.readable_csn()  # one snapshot for every table, chosen once
    plans = [plan_read(wh, name, csn=csn, tag=tag) for name in names]
    for plan in plans:
        _check_replaceable(spark, plan.stored.name)
    datasource.register(spark)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {SOURCES}")
    for plan in plans:
        _register(spark, wh, plan)
    return {plan.stored.name: plan.snapshot for plan in plans}


SOURCES = "airflow_txn_registered"
"""The namespace of the data-source tables the views `ns.table` select from (one per table: its columns)."""


def _source(table: str) -> str:
    """The data-source table behind the view of `table` (Spark's names: letters, digits and _ only)."""
    return f"{SOURCES}.t_{table.encode().hex()}"


def _check_replaceable(spark: SparkSession, table: str) -> None:
    """InvalidNameError if Spark's `table` exists and is not a view register_tables made."""
    if not spark.catalog.tableExists(table):
        return
    text = [str(r[1]) for r in spark.sql(f"DESCRIBE TABLE EXTENDED {_name(table)}").collect() if r[0] == "View Text"]
    if not text or f"FROM {_source(table)} WITH" not in text[0]:
        raise InvalidNameError(f"Spark's table {table} is not one register_tables made: drop or rename it to "
                               "register the airflow_txn table")


def _register(spark: SparkSession, wh: Warehouse, plan: ReadPlan) -> None:
    """The view `plan.stored.name` over a data-source table of its columns, reading exactly `plan`: Spark passes a
    catalog table's OPTIONS to the data source's schema() only, so the view carries the read's options to each
    query as a table reference's options (`WITH (...)`)."""
    name, source = plan.stored.name, _source(plan.stored.name)
    planned = {"read_plan": plan.to_json(), "table": name}
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {_identifier(name.partition('.')[0])}")
    with ours_raised():
        spark.sql(f"DROP TABLE IF EXISTS {source}")
        spark.sql(f"CREATE TABLE {source} USING {datasource.NAME} OPTIONS ({_options(planned, ' ')})")
        options = _options({**datasource.warehouse_options(wh), **planned}, " = ")
        # quoted identifiers and escaped literals only (_identifier, _literal): Spark SQL DDL takes no parameters here
        spark.sql(f"CREATE OR REPLACE VIEW {_name(name)} AS SELECT * FROM {source} WITH ({options})")  # noqa: S608


def _name(table: str) -> str:
    namespace, _, name = table.partition(".")
    return f"{_identifier(namespace)}.{_identifier(name)}"


def _options(options: dict[str, str], between: str) -> str:
    return ", ".join(f"{_literal(k)}{between}{_literal(v)}" for k, v in options.items())


def _identifier(text: str) -> str:
    return "`" + text.replace("`", "``") + "`"


def _literal(text: str) -> str:
    """`text` as a Spark SQL string literal (backslash escapes: Spark's default parser)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
