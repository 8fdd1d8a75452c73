"""Visible-part lookups by span level (docs/DESIGN.md, D31; catalog/visibility_sql.py, `visible_selects`): the
lookup finds exactly the parts invariant 2 makes visible, with lives of every length (each span level, its
window's edges, the top level), on SQLite and PostgreSQL; SQLite plans it on ix_txn_parts_span; a catalog
without that index (index version 2, used as it is: D23) is read by the older statement with the same answer."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_txn.catalog import Catalog, part_records, schema
from airflow_txn.catalog.visibility_sql import visible_selects
from airflow_txn.model.csn import ROLLBACK_CSN
from airflow_txn.model.visibility import VersionInfo, is_visible

ME = "5-1-00000000000000aa"
OTHER = "5-2-00000000000000bb"
TOP = 2 ** schema.SPAN_LEVELS


def _catalog(url: str) -> tuple[Catalog, int]:
    cat = Catalog(url)
    cat.initialize()
    with cat.write() as conn:
        result = conn.execute(sa.insert(schema.tables).values(
            name="ns.spans", schema_ipc=b"-", partition_by="[]", directory="ns/spans", created_at=time.time()))
        assert result.inserted_primary_key is not None
        return cat, int(result.inserted_primary_key[0])


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[tuple[Catalog, int]]:
    cat, table_id = _catalog(catalog_url)
    yield cat, table_id
    cat.dispose()


def _store(cat: Catalog, table_id: int, parts: list[VersionInfo]) -> list[int]:
    with cat.write() as conn:
        conn.execute(sa.delete(schema.parts))
        conn.execute(sa.insert(schema.parts), [
            {"id": i, "table_id": table_id, "partition_key": "{}", "path": f"p-{i:032x}", "files": "[]",
             "row_count": 1, "size_bytes": 1, "creation_tid": p.creation_tid, "creation_csn": p.creation_csn,
             "removal_tid": p.removal_tid, "removal_csn": p.removal_csn, "created_at": 0.0}
            for i, p in enumerate(parts, start=1)])
    return list(range(1, len(parts) + 1))


def _life(creation: int, span: int) -> int:
    """A removal CSN `span` after `creation`, kept inside the 64-bit columns."""
    return min(creation + span, ROLLBACK_CSN - 1)


# lives around every power of two (the edges of the span levels), short ones, and past the top level
_span = st.one_of(
    st.integers(min_value=0, max_value=schema.SPAN_LEVELS + 2).flatmap(
        lambda k: st.integers(min_value=max(1, 2 ** k - 2), max_value=2 ** k + 2)),
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=TOP, max_value=2 ** 62),
)
_creation = st.one_of(st.integers(min_value=1, max_value=64), st.integers(min_value=1, max_value=2 ** 50))


@st.composite
def _history(draw: st.DrawFn) -> tuple[list[VersionInfo], list[tuple[str | None, int]]]:
    parts: list[VersionInfo] = []
    for _ in range(draw(st.integers(min_value=1, max_value=14))):
        creation = draw(_creation)
        kind = draw(st.sampled_from(["ended", "ended", "ended", "live", "locked", "mine", "rolled back"]))
        if kind == "live":
            parts.append(VersionInfo(OTHER, creation, None, None))
        elif kind == "locked":
            parts.append(VersionInfo(OTHER, creation, draw(st.sampled_from([ME, OTHER])), None))
        elif kind == "mine":
            parts.append(VersionInfo(ME, None, draw(st.sampled_from([None, ME])), None))
        elif kind == "rolled back":
            parts.append(VersionInfo(OTHER, ROLLBACK_CSN, None, draw(st.none() | _creation)))
        else:
            parts.append(VersionInfo(OTHER, creation, draw(st.sampled_from([OTHER, ME])),
                                     _life(creation, draw(_span))))
    # snapshots at the edges of the parts' lives, and anywhere
    edges = [c for p in parts for c in (p.creation_csn, p.removal_csn) if c is not None and c != ROLLBACK_CSN]
    near = st.sampled_from(edges).flatmap(lambda c: st.integers(min_value=max(1, c - 2), max_value=c + 1)) \
        if edges else st.just(1)
    snapshots = draw(st.lists(near | st.integers(min_value=1, max_value=2 ** 51), min_size=1, max_size=5))
    readers = [(draw(st.sampled_from([None, ME, OTHER])), s) for s in snapshots]
    return parts, readers


def _check(cat: Catalog, table_id: int, parts: list[VersionInfo], readers: list[tuple[str | None, int]]) -> None:
    ids = _store(cat, table_id, parts)
    with cat.read() as conn:
        assert part_records.span_index(conn)
        for tid, snapshot in readers:
            expected = [i for i, p in zip(ids, parts, strict=True) if is_visible(p, tid, snapshot)]
            found = part_records.visible_parts(conn, table_id, tid, snapshot)
            assert [p.id for p in found] == expected, (tid, snapshot)
            # the driver's cursor (D34) gives the very rows, values and types of SQLAlchemy's execution
            theirs = _through_sqlalchemy(conn, table_id, tid, snapshot)
            assert found == theirs and _types(found) == _types(theirs), (tid, snapshot)
            assert part_records.visible_parts(conn, table_id, tid, snapshot, ["{}"]) == found, (tid, snapshot)
            assert part_records.visible_for_statement(conn, table_id, ME, snapshot, {}) == [
                p for p in part_records.visible_parts(conn, table_id, ME, snapshot)]
            totals = part_records.visible_totals(conn, table_id, snapshot)
            assert totals[0] == sum(1 for p in parts if is_visible(p, None, snapshot))


def _through_sqlalchemy(conn: sa.Connection, table_id: int, tid: str | None,
                        snapshot: int) -> list[part_records.PartRow]:
    """visible_parts' statement run by SQLAlchemy's own execution (what it ran before D34)."""
    stmt = part_records._visible_stmt(tid is not None, False, True, conn.dialect.name)
    params: dict[str, object] = {"table_id": table_id, "snapshot": snapshot, **({"reader": tid} if tid else {})}
    return part_records.part_rows(conn.execute(stmt, params))


def _types(rows: list[part_records.PartRow]) -> list[list[type]]:
    return [[type(v) for v in (*r, *r.version)] for r in rows]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=_history())
def test_the_span_lookup_finds_exactly_the_visible_parts_sqlite(
        tmp_path_factory: pytest.TempPathFactory, history: tuple[list[VersionInfo], list[tuple[str | None, int]]]
) -> None:
    cat, table_id = _SQLITE.get(tmp_path_factory)
    _check(cat, table_id, *history)


class _Shared:
    """One SQLite catalog for every example of the property test (a new one per example costs seconds)."""

    def __init__(self) -> None:
        self.made: tuple[Catalog, int] | None = None

    def get(self, factory: pytest.TempPathFactory) -> tuple[Catalog, int]:
        if self.made is None:
            self.made = _catalog(f"sqlite:///{factory.mktemp('spans') / 'catalog.db'}")
        return self.made


_SQLITE = _Shared()


@pytest.mark.parametrize("catalog_url", ["postgres"], indirect=True)
def test_the_span_lookup_finds_exactly_the_visible_parts_postgres(catalog: tuple[Catalog, int]) -> None:
    """The same property on PostgreSQL (its LATERAL form of the statement), on fixed seeds of the same histories."""
    cat, table_id = catalog
    for seed in range(25):
        _check(cat, table_id, *_seeded(seed))


def _seeded(seed: int) -> tuple[list[VersionInfo], list[tuple[str | None, int]]]:
    """A deterministic history of the strategy's kinds: lives at every span level's edges."""
    import random

    rng = random.Random(seed)
    parts: list[VersionInfo] = []
    for _ in range(rng.randint(4, 16)):
        creation = rng.choice([rng.randint(1, 64), rng.randint(1, 2 ** 50)])
        k = rng.randint(0, schema.SPAN_LEVELS + 2)
        span = max(1, 2 ** k + rng.randint(-2, 2))
        kind = rng.choice(["ended", "ended", "ended", "live", "locked", "mine"])
        if kind == "live":
            parts.append(VersionInfo(OTHER, creation, None, None))
        elif kind == "locked":
            parts.append(VersionInfo(OTHER, creation, rng.choice([ME, OTHER]), None))
        elif kind == "mine":
            parts.append(VersionInfo(ME, None, rng.choice([None, ME]), None))
        else:
            parts.append(VersionInfo(OTHER, creation, rng.choice([ME, OTHER]), _life(creation, span)))
    edges = [c for p in parts for c in (p.creation_csn, p.removal_csn) if c is not None]
    readers = [(rng.choice([None, ME, OTHER]), max(1, rng.choice(edges) + rng.randint(-2, 1))) for _ in range(8)]
    return parts, readers


def test_sqlite_plans_the_lookup_on_the_span_index(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each level is one probe of ix_txn_parts_span (table, level, creation_csn range), not the removal_csn range
    of ix_txn_parts_table_removal (every part removed after the snapshot): the plan SQLite makes, with or
    without a reader's transaction."""
    cat, table_id = _SQLITE.get(tmp_path_factory)
    p = schema.parts.c
    with cat.read() as conn:
        for tid in (None, ME):
            for stmt in visible_selects([p.id], [p.table_id == table_id], tid, 1000, "sqlite"):
                compiled = stmt.compile(conn, compile_kwargs={"literal_binds": True})
                plan = " | ".join(str(r[3]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}"))
                if "span_level" in plan:
                    assert "INDEX ix_txn_parts_span (table_id=? AND <expr>=? AND creation_csn>? AND " \
                           "creation_csn<?)" in plan, plan
                    assert "removal_csn>" not in plan, plan
                else:
                    assert "removal_csn>" not in plan, plan


def test_a_catalog_without_the_span_index_is_read_as_before(catalog_url: str) -> None:
    """Index version 2 (a catalog `upgrade` has not reached: D23 uses it as it is): the lookup names no span level
    and answers the same."""
    cat, table_id = _catalog(catalog_url)
    parts = [VersionInfo(OTHER, 3, OTHER, 9), VersionInfo(OTHER, 5, None, None), VersionInfo(OTHER, 2, ME, 2 ** 45),
             VersionInfo(ME, None, None, None), VersionInfo(OTHER, 4, OTHER, 5)]
    ids = _store(cat, table_id, parts)
    readers = [(None, 4), (ME, 4), (None, 9), (OTHER, 2 ** 44), (None, 2 ** 46)]
    with cat.read() as conn:
        new = [[p.id for p in part_records.visible_parts(conn, table_id, tid, s)] for tid, s in readers]
    with cat.write() as conn:
        conn.execute(sa.text("DROP INDEX ix_txn_parts_span"))
        conn.execute(sa.update(schema.meta).where(schema.meta.c.key == "index_version").values(value="2"))
    cat.dispose()
    older = Catalog(catalog_url)
    try:
        with older.read() as conn:
            assert not part_records.span_index(conn)
            old = [[p.id for p in part_records.visible_parts(conn, table_id, tid, s)] for tid, s in readers]
    finally:
        older.dispose()
    expected = [[i for i, p in zip(ids, parts, strict=True) if is_visible(p, tid, s)] for tid, s in readers]
    assert new == old == expected


def test_the_postgres_lookup_is_short_enough_for_psycopg_to_cache_its_conversion() -> None:
    """psycopg converts a statement's placeholders anew at every execution when its text is longer than 4,096
    characters (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH): the lookup of a reader outside a transaction, the
    one every read plans with, stays under it (the span levels are generated, not listed; created_at not read)."""
    from sqlalchemy.dialects import postgresql

    stmt = part_records._visible_stmt(False, False, True, "postgresql")
    assert len(str(stmt.compile(dialect=postgresql.dialect()))) <= 4096
