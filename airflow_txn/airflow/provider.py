"""Provider metadata (entry point `apache_airflow_provider`): the `airflow_txn` connection type and
its form, where the hooks, operators, sensors and triggers live (derived from public.py), the Asset
URI scheme and its OpenLineage converter, the `[airflow_txn]` configuration section, the task decorators,
the plugin, the operators' extra links, where the documentation is, and the `airflow txn` command group
(the airflow-txn commands, cli/in_airflow.py). Validated against Airflow's provider_info.schema.json by
tests/airflow/test_provider.py. Imports nothing heavy (Airflow reads it in every component)."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from airflow_txn.airflow.public import Kind, class_path, modules
from airflow_txn.core.config import DEFAULT_CONNECT_TIMEOUT, DEFAULT_LEASE_SECONDS

INTEGRATION = "airflow_txn"
PACKAGE = "airflow-txn"
DISPLAY_NAME = "Airflow Txn"
"""The provider's name as Airflow's Providers page shows it (as "Amazon" or "Postgres": the package name is
`package-name`)."""
DESCRIPTION = "Make a DAG of Spark tasks writing several tables behave as ONE database transaction."
VERSION_ADDED = "0.1.0"
CLI_FUNCTION = "airflow_txn.cli.in_airflow.get_cli_commands"
"""Returns the `airflow txn` group: airflow-txn's commands, under the `airflow` command."""

# pyproject.toml's [project.urls] Documentation: the documentation site (mkdocs.yml's site_url; a page of docs/
# is at <site>/<NAME>/), a placeholder address until the project is published. Airflow 3.3 replaces
# "documentation-url" with the installed distribution's Documentation URL: the same one.
DOCUMENTATION_URL = "https://airflow-txn.github.io/airflow-txn/"
INTEGRATION_DOC_URL = f"{DOCUMENTATION_URL}AIRFLOW/"
HOW_TO_GUIDES = ["/docs/AIRFLOW.md", "/docs/OPERATORS.md", "/docs/DEPLOYMENT.md"]
"""The integration's guides, as paths in the repository (provider.yaml's rule: they start with /docs/)."""

EXTRA_LINKS = ["airflow_txn.airflow.plugins.links.TransactionLink", "airflow_txn.airflow.plugins.links.SparkUILink"]
"""The operators' extra link classes (plugins/links.py; provider.py imports nothing heavy, so they are spelled here)."""

OPENLINEAGE_CONVERTER = "airflow_txn.airflow.assets.lineage.to_openlineage_dataset"
"""A table Asset as the OpenLineage dataset the operators report for the table (assets/lineage.py)."""

PLUGIN_NAME = "airflow_txn"
LISTENER_TIMEOUT_SECONDS = 60.0
"""`[airflow_txn] listener_timeout`'s default: how long a host process waits for a listener's work (D21)."""
PLUGIN_CLASS = "airflow_txn.airflow.plugins.plugin.AirflowTxnPlugin"
"""Airflow loads a provider's plugins only with `[core] lazy_discover_providers = False`; otherwise (the
default) the `airflow.plugins` entry point registers it, never both (airflow_txn/airflow/plugins/plugin.py)."""


def _version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # imported from a source tree that is not installed
        return VERSION_ADDED


def _option(description: str, kind: str, default: str | None, example: str | None) -> dict[str, Any]:
    return {"description": description, "version_added": VERSION_ADDED, "type": kind, "example": example,
            "default": default}


CONFIG: dict[str, Any] = {
    INTEGRATION: {
        "description": "Defaults of the airflow_txn warehouse for every component (scheduler, API server, "
                       "workers, triggerer). A connection's extra field wins over these; an option left "
                       "empty falls back to the AIRFLOW_TXN_* environment variable, then to the embedded "
                       "default under ~/.airflow_txn.",
        "options": {
            "conn_id": _option("The airflow_txn connection the Transactions page of the API server opens "
                               "(operators and sensors take their own conn_id argument).",
                               "string", "airflow_txn_default", "airflow_txn_prod"),
            "catalog": _option("SQLAlchemy URL of the catalog database, used when the connection's extra "
                               "sets no `catalog` (empty: AIRFLOW_TXN_CATALOG, else a SQLite file).",
                               "string", "", "postgresql+psycopg://airflow:airflow@postgres/airflow_txn"),
            "root": _option("Storage root of the Parquet files: a directory (on a cluster a shared filesystem "
                            "mounted at the same path everywhere) or an object store, s3://bucket/prefix "
                            "(empty: AIRFLOW_TXN_ROOT, else ~/.airflow_txn/warehouse).", "string", "",
                            "s3://my-bucket/warehouse"),
            "storage_options": {**_option(
                "S3 settings of an s3:// root as a JSON object: endpoint_url, region, access_key_id, "
                "secret_access_key, session_token, force_virtual_addressing (empty: "
                "AIRFLOW_TXN_STORAGE_OPTIONS, else the standard AWS_* variables and ~/.aws files).",
                "string", "", '{"endpoint_url": "http://seaweedfs:8333", "region": "us-east-1"}'),
                "sensitive": True},
            "publish": _option("Formats every commit is published to after it commits, for other engines to read "
                               "(docs/INTEROP.md): 'iceberg', 'delta', 'iceberg,delta' or 'off' (empty: "
                               "AIRFLOW_TXN_PUBLISH, else off); a connection's publish wins.", "string", "",
                               "iceberg"),
            "iceberg_catalog": {**_option(
                "pyiceberg catalog properties replacing the default (a SQL catalog in the airflow_txn catalog's "
                "database) as a JSON object (empty: AIRFLOW_TXN_ICEBERG_CATALOG).", "string", "",
                '{"type": "rest", "uri": "http://iceberg-rest:8181"}'), "sensitive": True},
            "oracle": _option("CSN oracle: 'sql' (the catalog's own counter) or "
                              "'zookeeper://host:port[,host:port]/chroot' (empty: AIRFLOW_TXN_ORACLE, "
                              "else sql).", "string", "", "zookeeper://zk1:2181,zk2:2181,zk3:2181/airflow_txn"),
            "lease_seconds": _option("Lease of transactions begun by BeginTransactionOperator or "
                                     "transaction_group without an explicit lease_seconds: how long a "
                                     "transaction lives without a heartbeat before recovery rolls it back.",
                                     "float", str(DEFAULT_LEASE_SECONDS), "7200"),
            "connect_timeout": _option("Seconds a catalog server, object store or Spark Connect server that does "
                                       "not answer is waited for before the call fails with a typed error naming "
                                       "it (empty: AIRFLOW_TXN_CONNECT_TIMEOUT, else "
                                       f"{DEFAULT_CONNECT_TIMEOUT:g}); a connection's connect_timeout wins.",
                                       "float", "", "10"),
            "listener_timeout": _option("Seconds the scheduler or the API server waits for the listener's "
                                        "rollback of a failed run (done on a thread of its own, never on the "
                                        "host's session); past it the rollback goes on in the background and "
                                        "the transaction's lease ends whatever it does not finish.",
                                        "float", str(LISTENER_TIMEOUT_SECONDS), "30"),
            "metrics": _option("Send the engine's metrics (airflow_txn.commit.latency_ms, "
                               "airflow_txn.rollbacks, airflow_txn.conflicts, airflow_txn.watermark_lag) "
                               "to Airflow's stats ([metrics] decides where they go).",
                               "boolean", "True", "False"),
        },
    },
}


def _modules(kind: Kind) -> list[dict[str, Any]]:
    return [{"integration-name": INTEGRATION, "python-modules": modules(kind)}]


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": PACKAGE,
        "name": DISPLAY_NAME,
        "description": DESCRIPTION,
        "versions": [_version()],
        "documentation-url": DOCUMENTATION_URL,
        "integrations": [{"integration-name": INTEGRATION, "external-doc-url": INTEGRATION_DOC_URL,
                          "how-to-guide": HOW_TO_GUIDES, "tags": ["software"]}],
        "hooks": _modules(Kind.HOOK),
        "operators": _modules(Kind.OPERATOR),
        "task-decorators": [{"name": "txn_spark", "class-name": "airflow_txn.airflow.decorators.txn_spark_task"},
                            {"name": "txn", "class-name": "airflow_txn.airflow.decorators.txn_task"},
                            {"name": "txn_read", "class-name": "airflow_txn.airflow.decorators.txn_read_task"},
                            {"name": "txn_check", "class-name": "airflow_txn.airflow.decorators.txn_check_task"}],
        "sensors": _modules(Kind.SENSOR),
        "triggers": _modules(Kind.TRIGGER),
        # a URI naming no warehouse table is refused as the DAG is parsed; the OpenLineage provider converts
        # a table's Asset to the dataset the operators report
        "asset-uris": [{"schemes": ["airflow-txn"], "handler": "airflow_txn.airflow.assets.uris.normalize",
                        "to_openlineage_converter": OPENLINEAGE_CONVERTER}],
        "config": CONFIG,
        "cli": [CLI_FUNCTION],
        "plugins": [{"name": PLUGIN_NAME, "plugin-class": PLUGIN_CLASS}],
        "extra-links": EXTRA_LINKS,
        "connection-types": [{
            "connection-type": "airflow_txn",
            "hook-class-name": class_path("TxnHook"),
            "hook-name": "airflow_txn warehouse",
            "conn-fields": {
                "catalog": {"label": "Catalog URL", "description":
                            "SQLAlchemy URL of the catalog, e.g. postgresql+psycopg://user@host/db, its password "
                            "in the Catalog password field "
                            "(empty: Catalog connection, [airflow_txn] catalog, AIRFLOW_TXN_CATALOG or the "
                            "embedded SQLite file)",
                            "schema": {"type": ["string", "null"]}},
                "catalog_conn_id": {"label": "Catalog connection", "description":
                                    "Instead of the Catalog URL: the id of a postgres or sqlite connection whose "
                                    "host, port, schema (database), login and password reach the catalog (leave "
                                    "the Catalog URL and Catalog password empty)",
                                    "schema": {"type": ["string", "null"]}},
                "root": {"label": "Storage root", "description":
                         "Directory of the Parquet files, or s3://bucket/prefix (empty: [airflow_txn] root, "
                         "AIRFLOW_TXN_ROOT or ~/.airflow_txn/warehouse)",
                         "schema": {"type": ["string", "null"]}},
                "oracle": {"label": "CSN oracle", "description":
                           "'sql' (default) or 'zookeeper://host:port[,host:port]/chroot'",
                           "schema": {"type": ["string", "null"], "default": "sql"}},
                "storage_options": {"label": "Storage options", "description":
                                    "For an s3:// root: a JSON object of endpoint_url, region, access_key_id, "
                                    "secret_access_key, ... (empty: [airflow_txn] storage_options, "
                                    "AIRFLOW_TXN_STORAGE_OPTIONS or the AWS_* environment)",
                                    "schema": {"type": ["string", "null"]}},
                "aws_conn_id": {"label": "AWS connection", "description":
                                "For an s3:// root: the id of an Amazon (aws) connection whose credentials, "
                                "endpoint_url and region reach it; its credentials are refreshed before they "
                                "expire (needs airflow-txn[amazon]; keep credentials out of Storage options)",
                                "schema": {"type": ["string", "null"]}},
                "connect_timeout": {"label": "Connect timeout", "description":
                                    "Seconds a catalog server, object store or Spark Connect server that does not "
                                    "answer is waited for before the task fails naming it (empty: [airflow_txn] "
                                    "connect_timeout, AIRFLOW_TXN_CONNECT_TIMEOUT or 20)",
                                    "schema": {"type": ["number", "null"]}},
                "publish": {"label": "Publish to", "description":
                            "Formats every commit is published to for other engines: 'iceberg', 'delta', "
                            "'iceberg,delta' or 'off' (empty: [airflow_txn] publish, AIRFLOW_TXN_PUBLISH or off); "
                            "Asset events then carry each table's Iceberg snapshot id / Delta version",
                            "schema": {"type": ["string", "null"]}},
                "iceberg_catalog": {"label": "Iceberg catalog", "description":
                                    "pyiceberg catalog properties as a JSON object, replacing the default SQL "
                                    "catalog in the airflow_txn catalog's database (empty: [airflow_txn] "
                                    "iceberg_catalog or AIRFLOW_TXN_ICEBERG_CATALOG)",
                                    "schema": {"type": ["string", "null"]}},
                "spark_conf": {"label": "Spark conf", "description":
                               "A JSON object of Spark settings for the Spark tasks of this warehouse "
                               "(SparkTransactionOperator, @task.txn_spark, @task.txn_read); a task's own "
                               "spark_conf wins over it",
                               "schema": {"type": ["string", "null"]}},
            },
            "ui-field-behaviour": {
                "hidden-fields": ["host", "schema", "login", "port"],
                "relabeling": {"password": "Catalog password"},
                "placeholders": {"catalog": "sqlite:////var/lib/airflow_txn/catalog.db", "root": "/data/warehouse",
                                 "oracle": "sql", "catalog_conn_id": "airflow_txn_catalog",
                                 "aws_conn_id": "aws_default"},
            },
        }],
    }
