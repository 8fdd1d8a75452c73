"""Bad-input fuzzing (issue 6, invariants 9 and 10): clear errors, nothing changed, no path escapes, no SQL text."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from airflow_txn import Warehouse
from airflow_txn.core import adapter
from airflow_txn.core.config import WarehouseConfig
from airflow_txn.core.isolation import Isolation
from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    InvalidOptionError,
    SchemaMismatchError,
    TableNotFoundError,
    TransactionNotFoundError,
    TxnError,
)
from airflow_txn.model.options import Manifests, Option, WriteMode
from tests import evidence
from tests.core.test_errors import bind, state

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # the documented name rule, restated independently
BASE = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
                  pa.field("value", pa.float64())])
PARTED = pa.schema([("id", pa.int64()), ("p", pa.string())])
PACKAGE = Path(__file__).resolve().parents[2] / "airflow_txn"


_STATISTICS = re.compile(r"(\d+) passing, (\d+) failing, and (\d+) invalid")  # Hypothesis' statistics text


@pytest.fixture(autouse=True)
def _evidence(request: pytest.FixtureRequest) -> Iterator[None]:
    """One evidence record per test (tests/evidence.py, suite `fuzz`), with the Hypothesis examples it ran."""
    failed_before = request.session.testsfailed
    yield
    counts = [tuple(map(int, m)) for m in _STATISTICS.findall(getattr(request.node, "hypothesis_statistics", ""))]
    details = {"examples": sum(c[0] for c in counts), "failing_examples": sum(c[1] for c in counts),
               "invalid_examples": sum(c[2] for c in counts)} if counts else {}
    evidence.record("fuzz", request.node.name, request.session.testsfailed == failed_before, **details)


def well_formed(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 2 and all(IDENT.fullmatch(p) for p in parts)


def base_rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "value": [float(i) for i in ids]}, schema=BASE)


def expect_rejected(wh: Warehouse, root: Path, errors: tuple[type[TxnError], ...],
                    call: Callable[[], object]) -> TxnError:
    """`call` raises one of `errors` with a non-empty message and leaves catalog and storage as they were."""
    before = state(wh, root)
    with pytest.raises(errors) as info:
        call()
    assert str(info.value).strip(), f"{type(info.value).__name__} with an empty message"
    assert state(wh, root) == before, f"a rejected call ({type(info.value).__name__}) changed the warehouse"
    return info.value


def files_below(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.fixture
def seeded(wh: Warehouse) -> Warehouse:
    """sales.base (a non-nullable column, unpartitioned) and sales.parted (partitioned by a string)."""
    wh.create_table("sales.base", BASE)
    wh.create_table("sales.parted", PARTED, partition_by=["p"])
    with wh.begin() as t:
        t.append("sales.base", base_rows([1, 2]))
        t.append("sales.parted", pa.table({"id": [1], "p": ["x"]}, schema=PARTED))
    return wh


# -- 1. table and namespace names ---------------------------------------------------------------------

names = st.one_of(
    st.text(max_size=80),
    st.builds(lambda a, b: f"{a}.{b}", st.text(max_size=70), st.text(max_size=70)),
    st.sampled_from(["../etc.passwd", "sales./x", "sales.x/../../y", "sales.base;drop table parts", "Sales.Base",
                     "sales.base\x00", "a" * 64 + ".b", "sales.1x", ".", "sales.", ".base", "sales.base.x",
                     "sales.b'--", "sales.\u00e9t\u00e9", "sales.base ", " sales.base", "sales.base\n"]),
)


@FUZZ
@example(name="../etc.passwd")
@example(name="sales.x'; DROP TABLE parts; --")
@example(name="sales.nope")
@given(name=names)
def test_fuzz_table_names(seeded: Warehouse, root: Path, name: str) -> None:
    wh = seeded
    unknown = well_formed(name) and name not in {"sales.base", "sales.parted"}
    if unknown:
        expected: tuple[type[TxnError], ...] = (TableNotFoundError,)
    elif well_formed(name):
        return  # an existing table: not bad input
    else:
        expected = (InvalidNameError,)
        expect_rejected(wh, root, expected, lambda: wh.create_table(name, BASE))
    t = wh.begin()
    calls: list[Callable[[], object]] = [
        lambda: t.append(name, base_rows([7])),
        lambda: t.read(name),
        lambda: wh.read(name),
        lambda: wh.schema(name),
        lambda: wh.attach(name),
    ]
    for i, call in enumerate(calls):
        errors = (InvalidNameError,) if i == len(calls) - 1 else expected  # attach takes a tid
        expect_rejected(wh, root, errors, call)
    assert t.state == "active"
    t.rollback()
    assert sorted(wh.tables()) == ["sales.base", "sales.parted"]


# -- 2. partition values: round trip exactly, or rejected; never outside the table directory --------

partition_values = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(["/", ".", "=", "%", "\\", "\x00", "a", "\u00e9", "\U0001f600", " "]),
            max_size=30),
    st.sampled_from(["", "..", ".", "/", "../..", "../../etc", "a/../../b", "=", "a=b", "\x00", "x" * 5000,
                     "__null__", "__empty__", "h-0123", "%2F", "C:\\x", "\u202e", "\ufeff"]),
)


@pytest.mark.local_root  # resolves paths and follows links below a local table directory (keys on S3: test_names)
@FUZZ
@example(values=["/", "..", ".", "=", "a=b", "\x00", "", "x" * 5000, "a/../../b", "\u00e9\U0001f600", None])
@example(values=["%2F", "/"])  # an encoded form and the value it encodes must stay distinct
@example(values=["x" * 5000, "x" * 5001])  # long values hashed into the path must stay distinct
@given(values=st.lists(st.one_of(st.none(), partition_values), min_size=1, max_size=6))
def test_fuzz_partition_values(seeded: Warehouse, root: Path, values: list[str | None]) -> None:
    wh = seeded
    data = pa.table({"id": list(range(100, 100 + len(values))), "p": values}, schema=PARTED)
    table_dir = (root / "sales" / "parted").resolve()
    before_rows = wh.read("sales.parted").to_pylist()
    t = wh.begin()
    before = state(wh, root)
    try:
        t.append("sales.parted", data)
    except TxnError as exc:
        event(f"rejected: {type(exc).__name__}")
        assert str(exc).strip()
        assert state(wh, root) == before, "a rejected partition value changed the warehouse"
        t.rollback()
        assert wh.read("sales.parted").to_pylist() == before_rows
        return
    event("accepted")
    t.commit()
    got = wh.read("sales.parted").to_pylist()
    expected = before_rows + data.to_pylist()
    key = lambda r: (r["id"], r["p"] is None, r["p"] or "")  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)
    for path in files_below(root):
        resolved = path.resolve()
        assert resolved.is_relative_to(root.resolve())
        if "parted" in path.relative_to(root).parts[:2]:
            assert resolved.is_relative_to(table_dir), f"{resolved} is outside {table_dir}"


@pytest.mark.local_root  # checks the files below a local table directory, resolved
@settings(FUZZ, max_examples=30)
@example(a="/", b="%2F")
@example(a="..", b=".")
@example(a="x" * 5000, b="x" * 5001)
@given(a=st.one_of(st.none(), partition_values), b=st.one_of(st.none(), partition_values))
def test_fuzz_overwrite_partition_values(seeded: Warehouse, root: Path, a: str | None, b: str | None) -> None:
    """Overwriting partition `a` replaces exactly its rows and leaves partition `b` alone."""
    wh = seeded
    with wh.begin() as t:
        t.overwrite("sales.parted", pa.table({"id": [1, 2], "p": [a, b]}, schema=PARTED))
    with wh.begin() as t:
        t.overwrite("sales.parted", pa.table({"id": [3], "p": [a]}, schema=PARTED), partitions=[{"p": a}])
    rows = sorted(wh.read("sales.parted").to_pylist(), key=lambda r: r["id"])
    expected = [{"id": 3, "p": a}] if a == b else [{"id": 2, "p": b}, {"id": 3, "p": a}]
    assert rows == expected
    table_dir = (root / "sales" / "parted").resolve()
    for path in files_below(root / "sales" / "parted"):
        assert path.resolve().is_relative_to(table_dir)


@FUZZ
@given(spec=st.one_of(
    st.dictionaries(st.text(max_size=10), st.one_of(st.none(), st.text(max_size=10), st.integers()), max_size=3),
    st.text(max_size=10), st.integers(), st.just({"p": "x", "id": 1})))
def test_fuzz_malformed_partition_specs(seeded: Warehouse, root: Path, spec: object) -> None:
    wh = seeded
    if isinstance(spec, dict) and sorted(spec) == ["p"]:
        return  # names exactly the partition column: a value is cast to its type (5 -> '5'), not bad input
    t = wh.begin()
    data = pa.table({"id": [5], "p": ["x"]}, schema=PARTED)
    expect_rejected(wh, root, (InvalidNameError, SchemaMismatchError),
                    lambda: t.overwrite("sales.parted", data, partitions=[spec]))  # type: ignore[list-item]
    expect_rejected(wh, root, (InvalidNameError, SchemaMismatchError),
                    lambda: t.overwrite("sales.parted", data, partitions=spec))  # type: ignore[arg-type]
    assert t.state == "active"
    t.rollback()


# -- 3. forged and malformed tids ------------------------------------------------------------------

forged = st.builds(lambda a, b, h: f"{a}-{b}-{h}", st.integers(0, 10**19 - 1), st.integers(0, 10**19 - 1),
                   st.text(alphabet="0123456789abcdef", min_size=16, max_size=16))
tids = st.one_of(
    forged,
    st.text(max_size=60),
    st.builds(lambda a, b, h: f"{a}-{b}-{h}", st.text(max_size=20), st.text(max_size=20), st.text(max_size=20)),
    st.sampled_from(["", "-", "--", "1-1-", "1-1-0123456789ABCDEF", "-1-1-0123456789abcdef",
                     "1-1-0123456789abcdef0", "1-1-0123456789abcde", "1-1-0123456789abcdef;drop",
                     "1-1-0123456789abcdef\x00", "' or 1=1 --", "99999999999999999999-1-0123456789abcdef"]),
)


@FUZZ
@example(tid="1-1-0123456789abcdef' OR '1'='1")
@example(tid="99999999999999999999-1-0123456789abcdef")
@example(tid="\u0665-1-0123456789abcdef")  # a non-ASCII digit
@given(tid=tids)
def test_fuzz_tids(seeded: Warehouse, root: Path, tid: str) -> None:
    wh = seeded
    for call in (lambda: wh.attach(tid), lambda: wh.transaction_info(tid)):
        expect_rejected(wh, root, (InvalidNameError, TransactionNotFoundError), call)


@FUZZ
@given(tid=forged)
def test_fuzz_forged_tids_not_found(seeded: Warehouse, root: Path, tid: str) -> None:
    expect_rejected(seeded, root, (TransactionNotFoundError,), lambda: seeded.attach(tid))


# -- 4. schema mismatches --------------------------------------------------------------------------

OTHER_TYPES = [pa.int32(), pa.string(), pa.float32(), pa.large_string(), pa.bool_(), pa.int64(), pa.float64()]


def mutated(kind: str, pick: int, extra_name: str, draw_type: pa.DataType) -> pa.Table | None:
    good = base_rows([10, 11])
    col = BASE.names[pick % len(BASE.names)]
    if kind == "type":
        if draw_type == BASE.field(col).type:
            return None
        values = {"id": [1, 2], "name": ["a", "b"], "value": [1.5, 2.5]}[col]
        try:
            arr = pa.array(values).cast(draw_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            arr = pa.nulls(2, draw_type)
        return good.set_column(good.column_names.index(col), pa.field(col, draw_type), arr)
    if kind == "nulls":
        return pa.table({"id": pa.array([1, None], pa.int64()), "name": ["a", "b"], "value": [1.0, 2.0]})
    if kind == "order":
        order = [BASE.names[(i + pick) % 3] for i in range(3)]
        order = order if order != BASE.names else list(reversed(order))
        return good.select(order)
    if kind == "missing":
        return good.drop_columns([col])
    if kind == "extra":
        if extra_name in BASE.names:
            return None
        return good.append_column(pa.field(extra_name, pa.int64()), pa.array([1, 2], pa.int64()))
    if kind == "duplicate":
        return good.append_column(pa.field(col, good.schema.field(col).type), good[col])
    return pa.table({"id": [1]}).to_pylist()  # type: ignore[return-value]  # not a table at all


@FUZZ
@given(kind=st.sampled_from(["type", "nulls", "order", "missing", "extra", "duplicate", "not-a-table"]),
       pick=st.integers(0, 2), extra_name=st.text(min_size=1, max_size=20), draw_type=st.sampled_from(OTHER_TYPES))
def test_fuzz_schema_mismatch(seeded: Warehouse, root: Path, kind: str, pick: int, extra_name: str,
                              draw_type: pa.DataType) -> None:
    wh = seeded
    bad = mutated(kind, pick, extra_name, draw_type)
    if bad is None:
        return
    t = wh.begin()
    err = expect_rejected(wh, root, (SchemaMismatchError,), lambda: t.append("sales.base", bad))
    assert "sales.base" in str(err)
    assert t.state == "active"
    t.append("sales.base", base_rows([50]))
    t.commit()
    assert wh.read("sales.base").column("id").to_pylist().count(50) == 1
    with wh.begin() as cleanup:  # keep the table the same size for the next example
        cleanup.delete("sales.base", pc.field("id") == 50)


# -- 5. empty and large batches ----------------------------------------------------------------------


def test_empty_batches_create_no_parts(seeded: Warehouse, root: Path) -> None:
    wh = seeded
    before_files = state(wh, root)["files"]
    before = {n: wh.read(n).to_pylist() for n in ("sales.base", "sales.parted")}
    with wh.begin() as t:
        t.append("sales.base", BASE.empty_table())
        t.append("sales.parted", PARTED.empty_table())
        assert wh.transaction_info(t.tid)["parts"] == []
    assert state(wh, root)["files"] == before_files
    assert {n: wh.read(n).to_pylist() for n in ("sales.base", "sales.parted")} == before


def test_large_batch_round_trips(seeded: Warehouse) -> None:
    n = 200_000
    big = pa.table({"id": pa.array(range(1000, 1000 + n), pa.int64()),
                    "name": pa.array([None if i % 7 == 0 else f"row-{i}" for i in range(n)], pa.string()),
                    "value": pa.array([i * 0.5 for i in range(n)], pa.float64())}, schema=BASE)
    with seeded.begin() as t:
        t.append("sales.base", big)
    got = seeded.read("sales.base").sort_by("id")
    assert got.num_rows == n + 2
    assert got.slice(2).equals(big)


# -- 6. numbers: exact or refused, and integers bound for a 64-bit catalog column (issue 16) ----------

INT64_MAX = 2**63 - 1
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([INT64_MAX, 2**63, -(2**63), -(2**63) - 1, 2**64, 0, -1, 1.7, -0.5, 2.0, 1e300,
                     Decimal("2.9"), Decimal("3"), True, "5", None]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-(10**20), max_value=10**20),
)


@FUZZ
@example(value=2**64)
@example(value=1.7)
@example(value=Decimal("2.9"))
@given(value=numbers)
def test_fuzz_update_integer_column(seeded: Warehouse, root: Path, value: object) -> None:
    """issue 16, cases 9-10: update(set={int64 column: value}) stores exactly `value` or is refused with a
    SchemaMismatchError that changes nothing and leaves the transaction usable; never truncated, never raw."""
    wh = seeded
    t = wh.begin()
    exact = (not isinstance(value, bool) and isinstance(value, int | float | Decimal) and math.isfinite(value)
             and value == int(value) and -(2**63) <= int(value) <= INT64_MAX)
    if not exact:
        event("rejected")
        expect_rejected(wh, root, (SchemaMismatchError,), lambda: t.update("sales.base", pc.field("id") == 1,
                                                                           {"id": value}))
        assert t.state == "active"
        t.append("sales.base", base_rows([60]))  # a later valid write works
    else:
        event("exact")
        t.update("sales.base", pc.field("id") == 1, {"id": value})
        assert int(value) in t.read("sales.base").column("id").to_pylist()
    t.rollback()


@FUZZ
@example(value=2**63)
@example(value="5")
@given(value=numbers)
def test_fuzz_catalog_integers(seeded: Warehouse, root: Path, value: object) -> None:
    """issue 16, case 11: a CSN, limit or attempt out of a 64-bit catalog column's range, or not an int, is
    an InvalidArgumentError that changes nothing; an int in range never is (other errors may follow:
    a CSN not readable yet, a wait that times out)."""
    wh = seeded
    t = wh.begin()
    calls: dict[str, tuple[int, bool, Callable[[], object]]] = {  # minimum, whether None is a value
        "read csn": (1, True, bind(wh.read, "sales.base", csn=value)),  # None: the watermark
        "wait_for_csn": (0, False, bind(wh.wait_for_csn, value, timeout=0)),
        "transactions limit": (0, False, bind(wh.transactions, limit=value)),
        "commit_log limit": (0, False, bind(wh.commit_log, limit=value)),
        "attempt": (0, True, bind(t.use_key, "k", attempt=value)),  # None: no attempt numbers
    }
    for what, (minimum, none_ok, call) in calls.items():
        if (value is None and none_ok) or (
                isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= INT64_MAX):
            try:
                call()
            except TxnError as exc:
                assert not isinstance(exc, InvalidArgumentError), (what, value, exc)
        else:
            expect_rejected(wh, root, (InvalidArgumentError,), call)
    assert t.state == "active"
    t.rollback()
    if value is None:  # versions=None: no versions rule
        return
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= INT64_MAX:
        assert wh.set_retention("sales.base", versions=value)["versions"] == value
        wh.set_retention("sales.base")
    else:
        expect_rejected(wh, root, (InvalidArgumentError,), bind(wh.set_retention, "sales.base", versions=value))


# -- 6b. options: a value of the option's enum, or refused naming the allowed ones (issue 31, item 7) ----------

option_values = st.one_of(
    st.sampled_from([*(m.value for m in (*Isolation, *WriteMode, *Manifests)), "Snapshot", "APPEND", " off", ""]),
    st.text(max_size=12), st.none(), st.integers(), st.binary(max_size=4),
)


@FUZZ
@example(value="upsert")
@example(value="append")
@given(value=option_values)
def test_fuzz_option_values(seeded: Warehouse, root: Path, value: object) -> None:
    """The core's options (the isolation level at begin, the write mode of the engines' open_write, manifests at
    open): a value of the enum is taken; anything else is an InvalidOptionError naming the parameter, the value
    and the values allowed, and changes nothing (the transaction stays usable)."""
    wh = seeded
    t = wh.begin()
    calls: dict[str, tuple[type[Option], Callable[[], object]]] = {
        "isolation": (Isolation, lambda: wh.begin(isolation=value).rollback()),  # type: ignore[arg-type]
        "mode": (WriteMode, bind(adapter.open_write, t, "sales.base", value)),
        "manifests": (Manifests, bind(WarehouseConfig.resolve, catalog="sqlite:///unused.db", manifests=value)),
    }
    for name, (enum, call) in calls.items():
        taken = isinstance(value, str) and value in {m.value for m in enum}
        unset = name == "manifests" and value in (None, "")  # no argument: $AIRFLOW_TXN_MANIFESTS, else off
        if taken or unset:
            call()
        else:
            refused = expect_rejected(wh, root, (InvalidOptionError,), call)
            allowed = ", ".join(repr(m.value) for m in enum)
            assert str(refused) == f"{name} must be one of {allowed}, got {value!r}"
    assert t.state == "active"
    t.rollback()


# -- 7. no SQL built by string formatting --------------------------------------------------------------

# (relative path, source of the first argument) -> why formatting is harmless there
ALLOWED: dict[tuple[str, str], str] = {
    ("core/datasets.py", "f'CREATE SCHEMA IF NOT EXISTS {_quote(namespace)}'"):
        "DuckDB DDL in the user's own connection (Warehouse.duckdb): an identifier cannot be a bound parameter; "
        "it is a checked table name's namespace, quoted",
    ("core/datasets.py", "f'CREATE OR REPLACE VIEW {view} AS SELECT * FROM {_quote(hidden)}'"):
        "DuckDB DDL in the user's own connection (Warehouse.duckdb): identifiers of a checked table name, quoted",
    ("catalog/schema.py", "SPAN_LEVEL_SQL"):
        "the span level's expression (D31), an index's SQL: made once from the module's integers, no input",
    ("catalog/migrations/versions/indexes_v3_span_levels.py", "SPAN_LEVEL_SQL"):
        "the same expression of schema.py, the index the revision creates",
    ("catalog/visibility_sql.py", "schema.SPAN_LEVEL_SQL"):
        "the same expression in a lookup: its very text is what makes the database match it to the index",
    ("catalog/visibility_sql.py", "rows_sql"):
        "the constant list of span levels (integers of the module), as text so the statement's compiled form is cached",
}
SQL_CALLS = {"text", "exec_driver_sql", "execute", "executemany", "literal_column"}


def _defines_own_text(tree: ast.AST) -> bool:
    """A module whose `text` is its own function (e.g. an HTML escaper), not sqlalchemy's."""
    imports_sql_text = any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("sqlalchemy")
                           and any(a.name == "text" for a in n.names) for n in ast.walk(tree))
    defines = any(isinstance(n, ast.FunctionDef) and n.name == "text" for n in ast.walk(tree))
    return defines and not imports_sql_text


def _is_sql_call(node: ast.Call, own_text: bool = False) -> bool:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name == "text" and isinstance(func, ast.Attribute):
        # `sqlalchemy.text(...)` / `sa.text(...)` is SQL; `page.text(...)` (an HTML helper) is not
        return isinstance(func.value, ast.Name) and func.value.id in {"sqlalchemy", "sa"}
    if name == "text" and own_text:
        return False
    return name in SQL_CALLS


def _stringy(node: ast.expr) -> bool:
    """An expression that builds text: an f-string, `%`/`+` on text, `.format()`, or str()."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return _stringy(node.left) or _stringy(node.right) or isinstance(node.left, ast.Constant)
    if isinstance(node, ast.Call):
        f = node.func
        return (isinstance(f, ast.Attribute) and f.attr in {"format", "join"}) or (
            isinstance(f, ast.Name) and f.id == "str")
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def formatted_sql(source: str, relative: str) -> list[str]:
    """Every SQL-executing call whose statement is text built at run time (not a constant)."""
    found = []
    tree = ast.parse(source)
    own_text = _defines_own_text(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_sql_call(node, own_text) and node.args):
            continue
        first = node.args[0]
        name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr  # type: ignore[attr-defined]
        constant = isinstance(first, ast.Constant) and isinstance(first.value, str)
        # text()/exec_driver_sql()/literal_column() take SQL text only; execute() also takes statements
        if constant or (name in {"execute", "executemany"} and not _stringy(first)):
            continue
        built = name in {"text", "exec_driver_sql", "literal_column"} or _stringy(first)
        if built and (relative, ast.unparse(first)) not in ALLOWED:
            found.append(f"{relative}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_sql_built_by_string_formatting() -> None:
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        source = path.read_text()
        problems += formatted_sql(source, relative)
        seen |= {key for key in ALLOWED if key[0] == relative and key[1] in _unparsed_args(source)}
    assert problems == [], "SQL built by string formatting (use bound parameters):\n" + "\n".join(problems)
    assert seen == set(ALLOWED), f"stale allow-list entries: {set(ALLOWED) - seen}"


def _unparsed_args(source: str) -> set[str]:
    return {ast.unparse(n.args[0]) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and _is_sql_call(n) and n.args}


@pytest.mark.parametrize("snippet", [
    'conn.execute(text(f"SELECT * FROM t WHERE id = {x}"))',
    'conn.execute(text("SELECT * FROM t WHERE id = %s" % x))',
    'conn.execute(text("SELECT * FROM t WHERE id = " + x))',
    'sa.text("SELECT {}".format(x))',
    'conn.exec_driver_sql(f"DROP TABLE {name}")',
    'conn.exec_driver_sql(query)',
    'cursor.execute(f"SELECT {x}")',
    'cursor.execute("SELECT " + x)',
])
def test_scanner_flags_formatted_sql(snippet: str) -> None:
    assert formatted_sql(snippet, "x.py"), snippet


@pytest.mark.parametrize("snippet", [
    'conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": 1})',
    'conn.execute(select(t).where(t.c.id == x))',
    'cursor.execute("PRAGMA foreign_keys=ON")',
])
def test_scanner_accepts_constant_sql(snippet: str) -> None:
    assert formatted_sql(snippet, "x.py") == []
