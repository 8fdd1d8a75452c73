"""The previous release's own code against this one's, on one catalog (docs/DESIGN.md, D23): the airflow_txn of
the last commit whose schema head was version 5 (the parent of the commit that added schema_v6), taken from git
history with `git archive` and run in a subprocess with it first on PYTHONPATH.

- This package uses that code's catalog as it is (no silent upgrade): it reads, loads, and refuses only to
  record a check report (CatalogUpgradeRequiredError), so the older code keeps loading and reading, and sees
  the newer client's commit; `airflow-txn upgrade` then moves the catalog, saying from and to.
- That code refuses a catalog this package made or upgraded (it predates min_client_version and refuses any
  newer schema version: the one boundary D23 cannot move), with its own message, and changes nothing.

Needs the repository's history: skipped, saying so, in a shallow clone or an unpacked sdist (CI has a full clone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_txn import Warehouse
from airflow_txn.catalog import migrate, schema
from airflow_txn.cli import exit_codes, main
from airflow_txn.errors import CatalogUpgradeRequiredError
from tests.helpers import events, ids

REPO = Path(__file__).resolve().parents[2]
V6_REVISION = "airflow_txn/catalog/migrations/versions/schema_v6_check_reports.py"
TABLE = "sales.events"

# Run by the older code: load `rows` (if any) into TABLE, then print what it reads, or the error it raised.
OLD_CLIENT = """
import json, sys
import pyarrow as pa
import airflow_txn
from airflow_txn import Warehouse
from airflow_txn.catalog import schema
url, root, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {"file": airflow_txn.__file__, "schema_version": schema.SCHEMA_VERSION}
try:
    with Warehouse.open(catalog=url, root=root) as wh:
        if rows:
            data = pa.table({"id": rows, "day": ["2024-01-01"] * len(rows), "value": [1.0] * len(rows)},
                            schema=pa.schema([("id", pa.int64()), ("day", pa.string()), ("value", pa.float64())]))
            wh.create_table("sales.events", data.schema, ["day"], exist_ok=True)
            t = wh.begin()
            t.append("sales.events", data)
            t.commit()
        out["ids"] = sorted(wh.read("sales.events").column("id").to_pylist())
except Exception as exc:
    out["error"] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(out))
"""


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The airflow_txn package of the last commit at schema version 5, unpacked in a directory of its own."""
    try:
        shallow = _git("rev-parse", "--is-shallow-repository") == "true"
        added = _git("log", "--diff-filter=A", "--format=%H", "--", V6_REVISION).splitlines()
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"no git repository here ({exc}): the schema-5 code cannot be taken from its history")
    why = "a shallow clone: `git fetch --unshallow` to run it" if shallow else "history rewritten?"
    try:
        parent = _git("rev-parse", "--verify", "--quiet", f"{added[-1]}^") if added else ""
    except subprocess.SubprocessError:
        parent = ""
    if not parent:
        pytest.skip(f"the commit before the one that added {V6_REVISION} is not in this repository ({why})")
    target = tmp_path_factory.mktemp("airflow_txn_v5")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", parent, "airflow_txn"], capture_output=True,
                             check=True, timeout=60).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True, timeout=60)
    return target


def run_old(old_code: Path, url: str, root: Path, rows: list[int] | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_TXN_")}
    env["PYTHONPATH"] = str(old_code)
    done = subprocess.run([sys.executable, "-c", OLD_CLIENT, url, str(root), json.dumps(rows or [])],
                          capture_output=True, text=True, cwd=old_code, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["file"].startswith(str(old_code)) and out["schema_version"] == 5, out  # really the older code
    return out


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        yield request.getfixturevalue("pg_schema_url")
    else:
        yield f"sqlite:///{tmp_path / 'catalog.db'}"


def revision(url: str) -> str | None:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = migrate.recorded_revision(conn)
    engine.dispose()
    return found


def test_the_older_release_and_this_one_meet_safely(old_code: Path, url: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    assert run_old(old_code, url, root, [1, 2])["ids"] == [1, 2]  # the older release makes the warehouse
    assert revision(url) == "schema_v5"

    with Warehouse.open(catalog=url, root=str(root)) as wh:  # a newer laptop or image opens it ...
        assert ids(wh.read(TABLE)) == [1, 2]
        t = wh.begin()
        t.append(TABLE, events([3]))
        with pytest.raises(CatalogUpgradeRequiredError, match="airflow-txn upgrade"):
            t.record_check("audit", {"passed": True})  # the one thing schema version 6 brought
        t.commit()
    assert revision(url) == "schema_v5"  # ... and leaves it alone
    assert run_old(old_code, url, root, [4])["ids"] == [1, 2, 3, 4]  # the older workers go on

    opts = ["--catalog", url, "--root", str(root), "--json"]
    assert main([*opts, "upgrade"]) == exit_codes.OK  # the deliberate step
    done = json.loads(capsys.readouterr().out)
    assert (done["from_schema_version"], done["to_schema_version"]) == (5, schema.SCHEMA_VERSION)
    with Warehouse.open(catalog=url, root=str(root)) as wh:
        assert ids(wh.read(TABLE)) == [1, 2, 3, 4]
        t = wh.begin()
        t.append(TABLE, events([5]))
        t.record_check("audit", {"passed": True})  # txn_check_reports, the table schema_v6 added
        t.commit()

    refused = run_old(old_code, url, root)  # the older release predates min_client_version: refused, unchanged
    assert "newer than this airflow_txn understands" in refused["error"], refused
    assert revision(url) == migrate.HEAD


def test_the_older_release_refuses_a_catalog_this_one_made(old_code: Path, url: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    with Warehouse.open(catalog=url, root=str(root)) as wh:
        wh.create_table(TABLE, events([]).schema, ["day"])
    refused = run_old(old_code, url, root, [1])
    assert f"schema version {schema.SCHEMA_VERSION} is newer" in refused["error"], refused
    assert revision(url) == migrate.HEAD
    with Warehouse.open(catalog=url, root=str(root)) as wh:
        assert wh.read(TABLE).num_rows == 0  # it wrote nothing
