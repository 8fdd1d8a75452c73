"""One module reads the environment (issue 35, item 4): outside airflow_txn/environment.py no module of the package
reads a variable; it calls that module's getters, which refuse a variable the module does not name.

Checked statically on each module's syntax tree (functions included): any use of `os.environ` (`os.environ.get`,
`os.environ[...]`, `"X" in os.environ`, handing `os.environ` on), `os.getenv`, or of `environ` / `getenv` imported
from os, whatever `os` is bound to, is a read unless it is a write: an item assigned or deleted
(`os.environ[X] = v`, `del os.environ[X]`), `os.environ.pop / update / setdefault / clear / popitem`, `os.putenv`,
`os.unsetenv`. A write is allowed only in the modules of WRITES, each with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from airflow_txn import environment
from tests.architecture.test_import_graph import REPO, package_modules

OWNER = "airflow_txn.environment"

WRITES = {
    "airflow_txn.airflow.operators.spark": "sets SPARK_CONNECT_MODE_ENABLED before attaching to a Spark Connect "
                                           "server, as pyspark's own builder does for a remote session: pyspark "
                                           "reads it (its functions then build Connect columns), we never do",
    "airflow_txn.cli.airflow_connections": "sets Airflow's process context around one connection lookup (and "
                                           "removes it after) so that Airflow's secrets backends include the "
                                           "metadata database; Airflow reads it, and our read of it (is it set "
                                           "already?) goes through the environment module",
}
"""Modules allowed to WRITE a variable (never to read one), each with the reason."""

ENVIRON = frozenset({"environ", "environb"})
READ_CALLS = frozenset({"getenv", "getenvb"})
WRITE_CALLS = frozenset({"putenv", "unsetenv"})
WRITING_METHODS = frozenset({"pop", "update", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"})


def _os_bindings(tree: ast.AST) -> tuple[set[str], dict[str, str]]:
    """(names bound to the os module, {name bound by `from os import x [as name]`: x}) in the module."""
    modules: set[str] = set()
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "os"}
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and node.level == 0:
            imported |= {alias.asname or alias.name: alias.name for alias in node.names}
    return modules, imported


def uses(source: str) -> Iterator[tuple[int, str, bool]]:
    """(line, what, is it a write) for every touch of the process environment in `source`."""
    tree = ast.parse(source)
    parent = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    modules, imported = _os_bindings(tree)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr in ENVIRON | READ_CALLS | WRITE_CALLS):
            name = node.attr
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in imported:
            name = imported[node.id]
            if name not in ENVIRON | READ_CALLS | WRITE_CALLS:
                continue
        else:
            continue
        what = f"os.{name}"
        if name in WRITE_CALLS:
            yield node.lineno, what, True
            continue
        if name in READ_CALLS:
            yield node.lineno, what, False
            continue
        above = parent.get(id(node))
        if isinstance(above, ast.Subscript) and isinstance(above.ctx, ast.Store | ast.Del):
            yield node.lineno, f"{what}[...] {'=' if isinstance(above.ctx, ast.Store) else 'del'}", True
        elif (isinstance(above, ast.Attribute) and above.attr in WRITING_METHODS
              and isinstance(parent.get(id(above)), ast.Call)):
            yield node.lineno, f"{what}.{above.attr}()", True
        elif isinstance(above, ast.AugAssign) and above.target is node:
            yield node.lineno, f"{what} |=", True
        else:
            yield node.lineno, what, False


def violations(source: str, module: str, where: str = "") -> list[str]:
    """One line per read of the environment outside the owner, and per write outside WRITES."""
    if module == OWNER:
        return []
    return [f"{where or module}:{line}: {module} {'writes' if write else 'reads'} the environment ({what}): "
            + ("not in WRITES (add it with the reason)" if write else
               f"read it through {OWNER} (name the variable there, then call its getter)")
            for line, what, write in uses(source) if not (write and module in WRITES)]


# -- the package keeps the rule ----------------------------------------------------------------------------------
def test_only_the_environment_module_reads_the_environment() -> None:
    found = [v for path, module, _pkg in package_modules()
             for v in violations(path.read_text(encoding="utf-8"), module, str(path.relative_to(REPO)))]
    assert found == [], "\n".join(found)


def test_every_allowed_writer_writes_and_the_owner_reads() -> None:
    """A stale allow-list entry protects nothing; and the scan is not vacuous (it sees the owner's reads)."""
    touched = {module: list(uses(path.read_text(encoding="utf-8"))) for path, module, _pkg in package_modules()}
    for module in WRITES:
        assert any(write for _line, _what, write in touched[module]), f"{module} writes nothing: drop it from WRITES"
    assert any(not write for _line, _what, write in touched[OWNER])


def test_every_variable_is_named_and_documented() -> None:
    """Each constant of the environment module is in NAMES and says in a docstring what it means; the getters
    refuse a name it does not list."""
    tree = ast.parse((REPO / "airflow_txn" / "environment.py").read_text(encoding="utf-8"))
    constants: dict[str, bool] = {}
    for node, after in zip(tree.body, [*tree.body[1:], None], strict=True):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            constants[node.target.id] = (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                                         and isinstance(after.value.value, str))
    assert constants, "the environment module names no variable"
    assert [name for name, documented in constants.items() if not documented] == []
    assert {getattr(environment, name) for name in constants} == environment.NAMES
    with pytest.raises(ValueError, match="AIRFLOW_TXN_NOT_A_SETTING"):
        environment.text("AIRFLOW_TXN_NOT_A_SETTING")


def test_the_aws_getters_keep_the_aws_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (environment.AWS_ENDPOINT_URL_S3, environment.AWS_ENDPOINT_URL, environment.AWS_REGION,
                 environment.AWS_DEFAULT_REGION):
        monkeypatch.delenv(name, raising=False)
    assert (environment.aws_endpoint(), environment.aws_region()) == (None, None)
    monkeypatch.setenv(environment.AWS_ENDPOINT_URL, "http://all:1")
    monkeypatch.setenv(environment.AWS_DEFAULT_REGION, "eu-west-1")
    assert (environment.aws_endpoint(), environment.aws_region()) == ("http://all:1", "eu-west-1")
    monkeypatch.setenv(environment.AWS_ENDPOINT_URL_S3, "http://s3:2")
    monkeypatch.setenv(environment.AWS_REGION, "us-east-2")
    assert (environment.aws_endpoint(), environment.aws_region()) == ("http://s3:2", "us-east-2")
    monkeypatch.setenv(environment.AWS_ENDPOINT_URL_S3, "")  # empty: not given
    assert environment.aws_endpoint() == "http://all:1"


# -- the checker fails on a read ---------------------------------------------------------------------------------
FORBIDDEN = [
    # (source, what must be reported)
    ("import os\nx = os.environ.get('AIRFLOW_TXN_ROOT')\n", "reads the environment (os.environ)"),
    ("import os\nx = os.getenv('AWS_REGION')\n", "reads the environment (os.getenv)"),
    ("import os\ndef f():\n    return 'COLUMNS' in os.environ\n", "reads the environment (os.environ)"),
    ("import os\nenv = os.environ\n", "reads the environment (os.environ)"),
    ("import os as o\nx = o.environ['HOME']\n", "reads the environment (os.environ)"),
    ("from os import environ\nx = environ.copy()\n", "reads the environment (os.environ)"),
    ("from os import getenv as g\nx = g('X')\n", "reads the environment (os.getenv)"),
    ("import os\nos.environ['X'] = '1'\n", "writes the environment (os.environ[...] =): not in WRITES"),
    ("import os\nos.environ.pop('X', None)\n", "writes the environment (os.environ.pop()): not in WRITES"),
    ("import os\nos.putenv('X', '1')\n", "writes the environment (os.putenv): not in WRITES"),
]


@pytest.mark.parametrize(("source", "reported"), FORBIDDEN)
def test_the_checker_reports_a_read_or_an_unlisted_write(source: str, reported: str) -> None:
    found = violations(source, "airflow_txn.core.commit")
    assert len(found) == 1 and reported in found[0], found


def test_the_checker_allows_listed_writes_but_not_their_reads() -> None:
    module = "airflow_txn.cli.airflow_connections"
    assert violations("import os\nos.environ['X'] = '1'\ndel os.environ['X']\nos.environ.setdefault('X', '')\n",
                      module) == []
    assert len(violations("import os\nif os.environ.get('X') is None:\n    os.environ['X'] = '1'\n", module)) == 1
    assert violations("import os\nx = os.environ.get('X')\n", OWNER) == []
    assert violations("import os\nx = os.path.join('a', 'b')\nenviron = {}\ny = environ.get('k')\n",
                      "airflow_txn.core.commit") == []
