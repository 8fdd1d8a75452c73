"""The catalog owns every SQL statement (issue 17, item 1): outside airflow_txn/catalog/ no module runs a
statement or builds one; protocols call the functions of the catalog's row modules.

Checked statically on each module's syntax tree (imports inside functions and under TYPE_CHECKING too),
outside airflow_txn/catalog/:
1. no call of `.execute(...)`, `.executemany(...)` or `.exec_driver_sql(...)`, except `super().execute(...)`
   (an Airflow operator handing on to its parent class: no SQL);
2. of sqlalchemy only `Connection` (the handle passed to catalog functions), `sqlalchemy.exc` (errors to
   catch) and `sqlalchemy.engine.make_url` / `URL` (parsing a catalog URL): no statement constructor
   (select, insert, update, delete, text, func, ...), no engine, no `import sqlalchemy`;
3. no use of the catalog's tables: `schema.<table>` or `schema.metadata` of airflow_txn.catalog.schema
   (its constants, e.g. SCHEMA_VERSION, are fine).
"""

from __future__ import annotations

import ast
import importlib.util

import pytest
from sqlalchemy import Table

from airflow_txn.catalog import schema
from tests.architecture.test_import_graph import REPO, imports_in, package_modules

CATALOG = "airflow_txn.catalog"
SCHEMA = "airflow_txn.catalog.schema"
EXECUTING = frozenset({"execute", "executemany", "exec_driver_sql"})
ALLOWED_SQLALCHEMY = frozenset({"sqlalchemy.Connection", "sqlalchemy.engine.Connection", "sqlalchemy.engine.make_url",
                                "sqlalchemy.engine.URL", "sqlalchemy.exc"})
TABLES = frozenset({name for name, value in vars(schema).items() if isinstance(value, Table)} | {"metadata"})

EXCEPTIONS = {
    "airflow_txn.checks.duckdb_engine": "runs the write-audit-publish checks' SQL in an in-process DuckDB over the "
                                        "transaction's Parquet files: no catalog table is ever read or written",
    "airflow_txn.core.datasets": "makes the DuckDB views of Warehouse.duckdb (CREATE SCHEMA / CREATE VIEW in the "
                                 "user's own DuckDB connection) over a snapshot's Parquet files: no catalog table",
}
"""Modules outside the catalog allowed to break the rules, each with the reason."""


def _sqlalchemy_allowed(target: str) -> bool:
    return target in ALLOWED_SQLALCHEMY or target.startswith("sqlalchemy.exc.")


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` of an attribute chain of names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _schema_aliases(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The names the module binds to airflow_txn.catalog.schema (`from airflow_txn.catalog import schema
    as s`, `import airflow_txn.catalog.schema as s`; a bare `import airflow_txn.catalog.schema` binds
    the dotted path itself)."""
    package = module if is_package else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            names |= {a.asname or a.name for a in node.names if f"{base}.{a.name}" == SCHEMA}
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name == SCHEMA}
    return names


def violations(source: str, module: str, is_package: bool = False, where: str = "") -> list[str]:
    """One line per statement run or built, or catalog table used, in `source` (the code of `module`)."""
    where = where or module
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXECUTING:
            receiver = node.func.value
            if not (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name)
                    and receiver.func.id == "super"):
                found.append(f"{where}:{node.lineno}: runs SQL (.{node.func.attr}): call a catalog function")
    for target, line, _deferred in imports_in(source, module, is_package):
        if target.split(".")[0] == "sqlalchemy" and not _sqlalchemy_allowed(target):
            found.append(f"{where}:{line}: imports {target}: statements are built in airflow_txn/catalog/")
        if target.startswith(f"{SCHEMA}.") and target.rpartition(".")[2] in TABLES:
            found.append(f"{where}:{line}: imports the catalog table {target}")
    aliases = _schema_aliases(tree, module, is_package)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in TABLES and _dotted(node.value) in aliases:
            found.append(f"{where}:{node.lineno}: uses the catalog table {_dotted(node)}")
    return found


def outside_the_catalog() -> list[tuple[str, str, bool, str]]:
    """(module, source, is it a package, path) of every module of the package outside airflow_txn/catalog/."""
    return [(module, path.read_text(encoding="utf-8"), is_package, str(path.relative_to(REPO)))
            for path, module, is_package in package_modules()
            if module != CATALOG and not module.startswith(f"{CATALOG}.")]


# -- the package keeps the rules ---------------------------------------------------------------------------------
def test_no_module_outside_the_catalog_runs_or_builds_sql() -> None:
    found = [v for module, source, is_package, path in outside_the_catalog() if module not in EXCEPTIONS
             for v in violations(source, module, is_package, path)]
    assert found == [], "\n".join(found)


def test_every_exception_is_still_needed() -> None:
    """An exception for a module that keeps the rules (or no longer exists) would hide a future break."""
    by_module = {module: violations(source, module, is_package) for module, source, is_package, _ in
                 outside_the_catalog()}
    for module in EXCEPTIONS:
        assert by_module.get(module), f"{module} keeps the rules now: remove it from EXCEPTIONS"


def test_the_catalog_itself_runs_sql() -> None:
    """The rules would be vacuous if the checker saw nothing: the catalog's own modules break all three."""
    path = REPO / "airflow_txn" / "catalog" / "counters.py"
    found = violations(path.read_text(encoding="utf-8"), "airflow_txn.core.counters")
    assert any(".execute" in v for v in found)
    assert any("sqlalchemy.select" in v for v in found)
    assert any("schema.counters" in v for v in found)


# -- the checker reports forbidden code --------------------------------------------------------------------------
FORBIDDEN = [
    # (module the source pretends to be, its source, what the report must name)
    ("airflow_txn.core.vacuum", "def f(conn, stmt):\n    return conn.execute(stmt).scalar()\n", ".execute"),
    ("airflow_txn.core.vacuum", "def f(conn):\n    conn.exec_driver_sql('DELETE FROM txn_parts')\n",
     ".exec_driver_sql"),
    ("airflow_txn.core.overview", "from sqlalchemy import func, select\n", "sqlalchemy.select"),
    ("airflow_txn.cli.doctor", "def f():\n    from sqlalchemy import text\n", "sqlalchemy.text"),
    ("airflow_txn.oracle.sql", "from sqlalchemy import update\n", "sqlalchemy.update"),
    ("airflow_txn.core.retention", "import sqlalchemy as sa\n", "imports sqlalchemy"),
    ("airflow_txn.core.retention", "from sqlalchemy.sql import delete\n", "sqlalchemy.sql.delete"),
    ("airflow_txn.cli.doctor", "from sqlalchemy import create_engine\n", "sqlalchemy.create_engine"),
    ("airflow_txn.core.apply", "from airflow_txn.catalog import schema\n_tc = schema.table_commits.c\n",
     "schema.table_commits"),
    ("airflow_txn.core.apply", "from ..catalog import schema as s\nx = s.parts.c.id\n", "s.parts"),
    ("airflow_txn.core.apply", "import airflow_txn.catalog.schema\nairflow_txn.catalog.schema.metadata.tables\n",
     "airflow_txn.catalog.schema.metadata"),
    ("airflow_txn.core.apply", "from airflow_txn.catalog.schema import counters\n",
     "airflow_txn.catalog.schema.counters"),
    ("airflow_txn.airflow.sensors.csn", "def poke(self, hook):\n    hook.get_conn().execute('SELECT 1')\n",
     ".execute"),
]


@pytest.mark.parametrize(("module", "source", "named"), FORBIDDEN)
def test_forbidden_code_is_reported(module: str, source: str, named: str) -> None:
    found = violations(source, module)
    assert len(found) >= 1 and any(named in v for v in found), found


ALLOWED = [
    "from sqlalchemy import Connection\ndef f(conn: Connection) -> None:\n    pass\n",
    "from sqlalchemy.exc import IntegrityError, SQLAlchemyError\n",
    "from sqlalchemy.engine import make_url\nmake_url('sqlite://')\n",
    "from airflow_txn.catalog import schema\nschema.SCHEMA_VERSION\n",
    "class Sensor(Base):\n    def execute(self, context):\n        return super().execute(context)\n",
    "from airflow_txn.catalog import counters\ndef f(conn):\n    return counters.last_csn(conn)\n",
]


@pytest.mark.parametrize("source", ALLOWED)
def test_allowed_code_is_not_reported(source: str) -> None:
    assert violations(source, "airflow_txn.core.warehouse") == []
