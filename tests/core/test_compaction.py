"""Compaction (issue 9): merges change no snapshot, yield to user transactions, and shrink what readers pay for."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import Connection, func, select

from airflow_txn import Warehouse
from airflow_txn.catalog import compaction_records, part_records, schema, table_registry
from airflow_txn.catalog.clock import FastForward, use_wall_clock
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.core import compaction, staging
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import SerializationError, SnapshotTooOldError, StorageError, TxnError
from airflow_txn.model.parts import WrittenPart
from airflow_txn.storage.root import part_file_paths
from tests.core.workers.procs import Spawn
from tests.helpers import (
    accounts,
    backend_pid,
    blocked_by,
    events,
    ids,
    make_tables,
    storage_files,
    stored_exists,
    stored_size,
    wait_until,
)

EVENTS_T, ACCOUNTS_T = "sales.events", "sales.accounts"
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


def _backfill(wh: Warehouse, appends: int = 4) -> None:
    """Per day `appends` small commits into sales.events, and as many into sales.accounts."""
    make_tables(wh)
    for n in range(appends):
        with wh.begin() as t:
            for d, day in enumerate(DAYS):
                t.append(EVENTS_T, events([1000 * d + 10 * n, 1000 * d + 10 * n + 1], day=day, value=float(n)))
            t.append(ACCOUNTS_T, accounts({n: 10 * n}))


def _history(wh: Warehouse) -> dict[int, dict[str, pa.Table]]:
    """Both tables at every snapshot still inside the retention horizon."""
    out = {}
    for csn in range(1, wh.readable_csn() + 1):
        try:
            out[csn] = {name: _sorted(wh.read(name, csn=csn)) for name in (EVENTS_T, ACCOUNTS_T)}
        except SnapshotTooOldError:
            continue
    return out


def _assert_same_history(wh: Warehouse, before: dict[int, dict[str, pa.Table]]) -> None:
    for csn, tables in before.items():
        for name, rows in tables.items():
            assert _sorted(wh.read(name, csn=csn)) == rows, f"{name} at CSN {csn} changed"


def _live(wh: Warehouse, table: str, partition: dict[str, str] | None = None) -> list[PartRow]:
    with wh.runtime.catalog.read() as conn:
        info = table_registry.get(conn, table)
        parts = part_records.visible_parts(conn, info.id, None, wh.readable_csn())
    return [p for p in parts if partition is None or p.partition == partition]


def _parquet_files(root: Path | str) -> set[str]:
    return {f for f in storage_files(root) if f.endswith(".parquet")}


def _bytes(root: Path | str, files: set[str]) -> int:
    return sum(stored_size(root, f) for f in files)


def _catalog_state(wh: Warehouse) -> tuple[Any, ...]:
    with wh.runtime.catalog.read() as conn:
        parts = conn.execute(select(schema.parts).order_by(schema.parts.c.id)).all()
        txns = conn.execute(select(func.count()).select_from(schema.transactions)).scalar()
        merges = conn.execute(select(func.count()).select_from(schema.compactions)).scalar()
    return tuple(tuple(r) for r in parts), txns, merges


# -- what every snapshot sees -----------------------------------------------------------------------
def test_every_snapshot_reads_the_same_after_compaction_and_vacuum(wh: Warehouse) -> None:
    _backfill(wh)
    with wh.begin() as t:  # history with removals too: rewritten parts, a deleted row
        t.update(EVENTS_T, pc.field("id") == 1, {"value": 42.0})
        t.delete(ACCOUNTS_T, pc.field("id") == 2)
    with wh.begin() as t:
        t.append(EVENTS_T, events([5000], day=DAYS[0]))
    before = _history(wh)
    watermark = wh.readable_csn()
    log_before = wh.commit_log(limit=1000)

    result = wh.compact(EVENTS_T)
    assert result["groups"] == 3 and result["merged"] == 3 and result["yielded"] == 0
    assert result["parts_before"] == 13 and result["parts_after"] == 3
    assert {len(_live(wh, EVENTS_T, {"day": day})) for day in DAYS} == {1}
    accounts_result = wh.compact(ACCOUNTS_T)
    assert accounts_result["merged"] == 1 and accounts_result["parts_after"] == 1

    assert wh.readable_csn() == watermark, "a merge must allocate no CSN"
    assert wh.commit_log(limit=1000) == log_before, "a merge must write no commit record"
    _assert_same_history(wh, before)
    wh.vacuum(retention_seconds=3600)
    _assert_same_history(wh, before)

    wh.vacuum(retention_seconds=0)
    assert _sorted(wh.read(EVENTS_T)) == before[watermark][EVENTS_T]
    assert _sorted(wh.read(ACCOUNTS_T)) == before[watermark][ACCOUNTS_T]
    with pytest.raises(SnapshotTooOldError):
        wh.read(EVENTS_T, csn=watermark - 1)
    assert wh.recover()["missing_files"] == []


def test_merged_part_takes_the_largest_source_csn_and_sources_are_removed_at_it(wh: Warehouse) -> None:
    _backfill(wh, appends=3)
    sources = _live(wh, EVENTS_T, {"day": DAYS[1]})
    result = wh.compact(EVENTS_T, partitions=[{"day": DAYS[1]}])
    (merge,) = result["merges"]
    m = max(int(p.version.creation_csn or 0) for p in sources)
    assert merge["status"] == "merged" and merge["csn"] == m and merge["sources"] == 3
    (merged,) = _live(wh, EVENTS_T, {"day": DAYS[1]})
    assert merged.version.creation_tid == merge["tid"] and merged.version.creation_csn == m
    assert merged.row_count == sum(p.row_count for p in sources)
    with wh.runtime.catalog.read() as conn:
        rows = conn.execute(select(schema.parts).where(schema.parts.c.id.in_([p.id for p in sources]))).all()
    assert {(r.removal_tid, r.removal_csn) for r in rows} == {(merge["tid"], m)}
    info = wh.transaction_info(merge["tid"])
    assert info["state"] == "committed" and info["label"].startswith("compaction of sales.events")


# -- yielding and user transactions -------------------------------------------------------------------
def test_a_user_transaction_locking_a_source_mid_merge_wins(wh: Warehouse, root: Path | str) -> None:
    _backfill(wh)
    user = wh.begin(label="user")

    def writer(rt: Runtime, job: compaction.MergeJob) -> WrittenPart:
        if job.group.partition == {"day": DAYS[0]}:  # the user deletes a row of a source while the merge writes
            assert user.delete(EVENTS_T, pc.field("id") == 10) == 1
        return compaction.write_arrow(rt, job)

    result = wh.compact(EVENTS_T, writer=writer)
    assert result["merged"] == 2 and result["yielded"] == 1
    (yielded,) = [m for m in result["merges"] if m["status"] == "yielded"]
    assert yielded["partition"] == {"day": DAYS[0]} and "locked" in yielded["reason"]
    assert wh.transaction_info(yielded["tid"])["state"] == "rolled_back"
    assert wh.recover()["orphan_dirs"] == 0, "a yielding merge deletes its own files"

    csn = user.commit()  # the user never noticed
    assert 10 not in ids(wh.read(EVENTS_T, csn=csn)) and len(wh.read(EVENTS_T)) == 23
    assert len(_live(wh, EVENTS_T, {"day": DAYS[0]})) == 4  # 3 untouched sources + the rewritten one
    again = wh.compact(EVENTS_T)  # the next compaction merges what the user left
    assert again["merged"] == 1 and len(_live(wh, EVENTS_T, {"day": DAYS[0]})) == 1
    assert len(wh.read(EVENTS_T)) == 23


@pytest.mark.parametrize("statement", ["overwrite", "delete", "update"])
def test_a_statement_that_chose_sources_before_the_swap_is_redirected(
        wh: Warehouse, monkeypatch: pytest.MonkeyPatch, statement: str) -> None:
    """The user statement lists the parts, a merge swaps them out, then the statement registers."""
    _backfill(wh)
    original = staging.register_all
    merges: list[dict[str, Any]] = []

    def interleaved(rt: Runtime, *args: Any, **kwargs: Any) -> None:
        if not merges:
            merges.append(compaction.compact(rt, EVENTS_T))
        original(rt, *args, **kwargs)

    monkeypatch.setattr(staging, "register_all", interleaved)
    day0 = {"day": DAYS[0]}
    with wh.begin() as t:
        if statement == "overwrite":
            t.overwrite(EVENTS_T, events([7, 8], day=DAYS[0]), partitions=[day0])
        elif statement == "delete":
            assert t.delete(EVENTS_T, pc.field("id") == 10) == 1
        else:
            assert t.update(EVENTS_T, pc.field("id") == 11, {"value": 99.0}) == 1
    assert merges[0]["merged"] == 3, "the merge went first and did not yield"
    rows = wh.read(EVENTS_T, filter=pc.field("day") == DAYS[0])
    expected = {"overwrite": [7, 8], "delete": [0, 1, 11, 20, 21, 30, 31],
                "update": [0, 1, 10, 11, 20, 21, 30, 31]}[statement]
    assert ids(rows) == expected
    if statement == "update":
        assert rows.filter(pc.field("value") == 99.0)["id"].to_pylist() == [11]
    assert len(wh.read(EVENTS_T, filter=pc.field("day") != DAYS[0])) == 16


def test_user_writes_after_a_merge(wh: Warehouse) -> None:
    _backfill(wh)
    early = wh.begin(label="began before the merge")
    wh.compact(EVENTS_T)
    assert early.delete(EVENTS_T, pc.field("id") == 1000) == 1
    early.commit()
    with wh.begin() as t:
        assert t.update(EVENTS_T, pc.field("id") == 2000, {"value": -1.0}) == 1
        assert t.delete(EVENTS_T, pc.field("day") == DAYS[0]) == 8
    with wh.begin() as t:
        t.overwrite(EVENTS_T, events([9], day=DAYS[1]), partitions=[{"day": DAYS[1]}])
    assert ids(wh.read(EVENTS_T)) == [9, 2000, 2001, 2010, 2011, 2020, 2021, 2030, 2031]
    assert wh.read(EVENTS_T, filter=pc.field("id") == 2000)["value"].to_pylist() == [-1.0]


def test_two_merges_of_the_same_parts_the_second_yields(wh: Warehouse) -> None:
    _backfill(wh, appends=2)
    (group, *_) = compaction.plan(wh.runtime, EVENTS_T)
    first = compaction.merge_group(wh.runtime, group)
    second = compaction.merge_group(wh.runtime, group)
    assert first["status"] == "merged" and second["status"] == "yielded"
    assert wh.recover()["orphan_dirs"] == 0
    assert len(wh.read(EVENTS_T)) == 12


def test_a_writer_that_loses_rows_is_refused_and_changes_nothing(wh: Warehouse, root: Path | str) -> None:
    _backfill(wh, appends=2)
    before, state = _history(wh), _catalog_state(wh)[0]

    def lossy(rt: Runtime, job: compaction.MergeJob) -> WrittenPart:
        written = compaction.write_arrow(rt, job)
        return WrittenPart(written.path, written.files, written.row_count - 1, written.size_bytes)

    with pytest.raises(StorageError, match="rows instead of"):
        wh.compact(EVENTS_T, writer=lossy)
    assert _catalog_state(wh)[0] == state
    _assert_same_history(wh, before)
    (merge,) = [t for t in wh.transactions() if (t["label"] or "").startswith("compaction of")]
    assert merge["state"] == "rolled_back"
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 1  # its files: a dead writer's orphan


def test_serializable_transactions_do_not_see_merges_as_writes(wh: Warehouse) -> None:
    _backfill(wh)
    reader = wh.begin(isolation="serializable")
    assert len(reader.read(EVENTS_T)) == 24
    wh.compact(EVENTS_T)
    reader.append(ACCOUNTS_T, accounts({77: 7}))
    reader.commit()  # a merge changed nothing anyone can see: no conflict
    assert 77 in ids(wh.read(ACCOUNTS_T))

    contrast = wh.begin(isolation="serializable")  # the check is live: a real write does conflict
    contrast.read(EVENTS_T)
    with wh.begin() as t:
        t.append(EVENTS_T, events([4242], day=DAYS[2]))
    contrast.append(ACCOUNTS_T, accounts({78: 8}))
    with pytest.raises(SerializationError):
        contrast.commit()


# -- vacuum and the sources ---------------------------------------------------------------------------
def _files_of(wh: Warehouse, parts: list[PartRow]) -> set[str]:
    """The files of `parts` of sales.events, relative to the root."""
    with wh.runtime.catalog.read() as conn:
        directory = table_registry.get(conn, EVENTS_T).directory
    return {f"{directory}/{f}" for p in parts for f in part_file_paths(p.path, p.files)}


def test_sources_stay_while_a_transaction_older_than_the_merge_runs(wh: Warehouse, root: Path | str,
                                                                    open_wh: Callable[[], Warehouse]) -> None:
    _backfill(wh)
    sources = _live(wh, EVENTS_T)
    other = open_wh()
    old_reader = other.begin(label="began before the merge")
    expected = _sorted(old_reader.read(EVENTS_T))
    wh.compact(EVENTS_T)
    result = wh.vacuum(retention_seconds=0)
    assert result["merge_sources_kept"] == len(sources) and result["parts_removed"] == 0
    assert all(stored_exists(root, f) for f in _files_of(wh, sources))
    assert _sorted(old_reader.read(EVENTS_T)) == expected
    old_reader.commit()
    result = wh.vacuum(retention_seconds=0)
    assert result["parts_removed"] == len(sources) and result["merge_sources_kept"] == 0
    assert not _files_of(wh, sources) & storage_files(root)
    assert _sorted(wh.read(EVENTS_T)) == expected


def test_sources_stay_for_the_retention_window_after_the_merge(wh: Warehouse, root: Path | str) -> None:
    window = 3600.0
    with use_wall_clock(FastForward()) as wall:  # the times recorded with commits and merges, and vacuum's now
        _backfill(wh, appends=2)
        sources = _live(wh, EVENTS_T)
        wall.advance(2 * window)  # the commits are older than the window, the merge will not be
        wh.compact(EVENTS_T)
        result = wh.vacuum(retention_seconds=window)
        assert result["horizon"] == wh.readable_csn(), "the sources' removal CSN is inside the horizon"
        assert result["merge_sources_kept"] == len(sources) and result["parts_removed"] == 0
        assert all(stored_exists(root, f) for f in _files_of(wh, sources))
        wall.advance(2 * window)
        result = wh.vacuum(retention_seconds=window)
    assert result["parts_removed"] == len(sources)
    assert not _files_of(wh, sources) & storage_files(root)


def test_compaction_and_vacuum_shrink_part_count_and_storage(wh: Warehouse, root: Path | str) -> None:
    _backfill(wh, appends=6)
    before = _history(wh)
    files_before = _parquet_files(root)
    bytes_before = _bytes(root, files_before)
    result = wh.compact(EVENTS_T)
    assert result["parts_before"] == 18 and result["parts_after"] == 3
    assert result["bytes_after"] < result["bytes_before"]
    wh.vacuum(retention_seconds=0)
    files_after = _parquet_files(root)
    assert len(files_after) == len(files_before) - 18 + 3
    assert _bytes(root, files_after) < bytes_before
    assert wh.recover()["orphan_dirs"] == 0
    watermark = wh.readable_csn()
    assert _sorted(wh.read(EVENTS_T)) == before[watermark][EVENTS_T]


# -- options and bad input -----------------------------------------------------------------------------
def test_only_the_listed_partitions_are_compacted(wh: Warehouse) -> None:
    _backfill(wh)
    result = wh.compact(EVENTS_T, partitions=[{"day": DAYS[2]}, {"day": DAYS[2]}])
    assert result["merged"] == 1 and result["parts_before"] == 4 and result["parts_after"] == 1
    assert [len(_live(wh, EVENTS_T, {"day": d})) for d in DAYS] == [4, 4, 1]


def test_target_size_bounds_each_merged_part(wh: Warehouse) -> None:
    _backfill(wh, appends=6)
    size = max(p.size_bytes for p in _live(wh, EVENTS_T))
    result = wh.compact(EVENTS_T, target_file_bytes=2 * size)
    assert result["merged"] == 9 and result["parts_after"] == 9  # pairs: 2 parts fit, 3 do not
    assert all(m["sources"] == 2 for m in result["merges"])
    assert wh.compact(EVENTS_T, target_file_bytes=2 * size)["groups"] == 0  # merged parts are too big now
    assert wh.compact(EVENTS_T, min_parts=4)["merged"] == 0
    assert wh.compact(EVENTS_T, min_parts=3)["merged"] == 3


def test_nothing_to_compact(wh: Warehouse) -> None:
    make_tables(wh)
    assert wh.compact(EVENTS_T)["groups"] == 0
    with wh.begin() as t:
        t.append(EVENTS_T, events([1, 2], day=DAYS[0]))
    result = wh.compact(EVENTS_T)
    assert result["groups"] == 0 and result["parts_before"] == result["parts_after"] == 1


def test_progress_is_reported(wh: Warehouse) -> None:
    _backfill(wh, appends=2)
    seen: list[tuple[str, int, int]] = []
    wh.compact(EVENTS_T, progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert seen == [("merge", 0, 3), ("merge", 1, 3), ("merge", 2, 3), ("merge", 3, 3)]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"table": "sales.nope"}, "does not exist"),
    ({"table": "Bad Name"}, "Bad Name"),
    ({"target_file_bytes": 0}, "target_file_bytes"),
    ({"target_file_bytes": -5}, "target_file_bytes"),
    ({"target_file_bytes": True}, "target_file_bytes"),
    ({"target_file_bytes": "128MB"}, "target_file_bytes"),
    ({"target_file_bytes": 1.5}, "target_file_bytes"),
    ({"min_parts": 1}, "min_parts"),
    ({"min_parts": "2"}, "min_parts"),
    ({"partitions": {"day": DAYS[0]}}, "list of dicts"),
    ({"partitions": [{"nope": "x"}]}, "partition columns"),
    ({"partitions": [{"day": "2099-12-31"}]}, "no visible parts"),
    ({"table": ACCOUNTS_T, "partitions": [{"day": DAYS[0]}]}, "not partitioned"),
])
def test_bad_input_is_refused_and_changes_nothing(wh: Warehouse, root: Path | str, kwargs: dict[str, Any],
                                                  message: str) -> None:
    _backfill(wh, appends=2)
    state, files = _catalog_state(wh), storage_files(root)
    call = {"table": EVENTS_T, **kwargs}
    with pytest.raises(TxnError, match=message):
        wh.compact(**call)
    assert _catalog_state(wh) == state
    assert storage_files(root) == files


# -- manifests on every commit ---------------------------------------------------------------------------
def _manifest_dirs(wh: Warehouse) -> dict[int, str]:
    """{CSN: its manifests' directory (prefix), relative to the root}."""
    entries = wh.runtime.storage.root_entries(".manifests")
    return {int(name[4:]): f".manifests/{name}" for name, _is_file, _mtime in entries}


def _manifest(wh: Warehouse, directory: str, name: str) -> Any:
    """A manifest file's JSON (None if there is no such file)."""
    content = wh.runtime.storage.read_root_file(f"{directory}/{name}")
    return None if content is None else json.loads(content)


def _manifest_parts(wh: Warehouse, directory: str, table: str) -> set[int]:
    return {int(p["id"]) for p in _manifest(wh, directory, f"{table}.json")["parts"]}


def _manifest_file_exists(wh: Warehouse, root: Path | str, uri: str) -> bool:
    """Whether a file a manifest names (a local path, or a URI below an object-store root) exists."""
    storage = wh.runtime.storage
    if storage.local is not None:
        return Path(uri).is_file()
    assert uri.startswith(f"{storage.uri}/"), uri
    return stored_exists(root, uri[len(storage.uri) + 1:])


def test_manifests_on_commit_are_written_kept_current_and_removed_by_vacuum(catalog_url: str, root: Path | str) -> None:
    with Warehouse.open(catalog=catalog_url, root=str(root), manifests="on-commit") as wh:
        _backfill(wh, appends=3)
        commits = sorted(r["csn"] for r in wh.commit_log(limit=100))
        dirs = _manifest_dirs(wh)
        assert sorted(dirs) == commits
        index = _manifest(wh, dirs[commits[-1]], "index.json")
        assert [e["table"] for e in index["tables"]] == [ACCOUNTS_T, EVENTS_T]
        with wh.begin() as t:  # a read-only commit has no record, so no manifest
            t.read(EVENTS_T)
        t = wh.begin()
        t.append(EVENTS_T, events([1]))
        t.rollback()
        with wh.begin() as t:
            t.append(ACCOUNTS_T, accounts({50: 5}))
        last = wh.readable_csn()
        assert sorted(_manifest_dirs(wh)) == [*commits, last]
        assert [e["table"] for e in _manifest(wh, _manifest_dirs(wh)[last], "index.json")["tables"]] == [ACCOUNTS_T]

        wh.compact(EVENTS_T)
        result = wh.vacuum(retention_seconds=3600)  # no CSN is old enough: the manifests after a merge are rewritten
        assert result["manifests_removed"] == 0 and result["manifests_refreshed"] == 1  # the last events manifest
        for csn, directory in _manifest_dirs(wh).items():
            if _manifest(wh, directory, f"{EVENTS_T}.json") is not None:
                expected = {p.id for p in _visible_at(wh, EVENTS_T, csn)}
                assert _manifest_parts(wh, directory, EVENTS_T) == expected

        result = wh.vacuum(retention_seconds=0)
        assert result["manifests_removed"] == len(commits)
        assert wh.vacuum(retention_seconds=0)["manifests_removed"] == 0  # what was removed is gone, not found again
        assert sorted(_manifest_dirs(wh)) == [last]
        body = _manifest(wh, _manifest_dirs(wh)[last], f"{ACCOUNTS_T}.json")
        assert all(_manifest_file_exists(wh, root, f["path"]) for p in body["parts"] for f in p["files"])


def _visible_at(wh: Warehouse, table: str, csn: int) -> list[PartRow]:
    with wh.runtime.catalog.read() as conn:
        return part_records.visible_parts(conn, table_registry.get(conn, table).id, None, csn)


def test_manifest_mode_from_the_environment(catalog_url: str, root: Path | str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_TXN_MANIFESTS", "on-commit")
    with Warehouse.open(catalog=catalog_url, root=str(root)) as wh:
        assert wh.config.manifests == "on-commit"
        make_tables(wh)
        with wh.begin() as t:
            t.append(ACCOUNTS_T, accounts({1: 1}))
        assert list(_manifest_dirs(wh)) == [wh.readable_csn()]
    with Warehouse.open(catalog=catalog_url, root=str(root), manifests="off") as wh:
        with wh.begin() as t:
            t.append(ACCOUNTS_T, accounts({2: 2}))
        assert len(_manifest_dirs(wh)) == 1
    monkeypatch.setenv("AIRFLOW_TXN_MANIFESTS", "always")
    with pytest.raises(TxnError, match="manifests must be one of"):
        Warehouse.open(catalog=catalog_url, root=str(root))


# -- a reader in another process -----------------------------------------------------------------------
@pytest.mark.slow
def test_a_reader_process_at_old_snapshots_sees_the_same_rows_during_compaction(
        wh: Warehouse, spawn: Spawn, tmp_path: Path) -> None:
    _backfill(wh, appends=8)
    before = _history(wh)
    csns = sorted(before)
    stop = tmp_path / "stop"
    reader = spawn("snapshot_reader", EVENTS_T, ",".join(map(str, csns)), str(stop), 120)
    assert "ready" in reader.next(timeout=60)
    for day in DAYS:  # three compactions while it reads, each group a swap of its own
        assert wh.compact(EVENTS_T, partitions=[{"day": day}], target_file_bytes=4096)["merged"] >= 1
    wh.vacuum(retention_seconds=3600)
    stop.touch()
    assert reader.wait(120) == 0, reader.stderr
    (report,) = [m for m in reader.messages() if "rounds" in m]
    assert report["rounds"] >= 2, report
    for csn in csns:
        expected = sorted(before[csn][EVENTS_T]["id"].to_pylist())
        assert report["seen"][str(csn)] == [expected], f"CSN {csn}: the reader saw {report['seen'][str(csn)]}"


# -- row locks (PostgreSQL): a merge never waits for a user, a user waits for a swap in flight ----------
@pytest.mark.postgres
def test_a_merge_yields_at_once_to_a_user_statement_holding_a_source(pg_schema_url: str, root: Path | str) -> None:
    with Warehouse.open(catalog=pg_schema_url, root=str(root)) as wh:
        _backfill(wh, appends=2)
        (group, *_) = compaction.plan(wh.runtime, EVENTS_T)
        outcome: list[dict[str, Any]] = []
        with wh.runtime.catalog.write() as conn:  # a user statement between taking its row lock and committing
            conn.execute(select(schema.parts.c.id).where(schema.parts.c.id == group.sources[0].id).with_for_update())
            merge = threading.Thread(target=lambda: outcome.append(compaction.merge_group(wh.runtime, group)))
            merge.start()
            merge.join(timeout=60)
            assert not merge.is_alive(), "the merge waited for the user's row lock"
        assert outcome[0]["status"] == "yielded"
        assert compaction.merge_group(wh.runtime, group)["status"] == "merged"


@pytest.mark.postgres
def test_a_user_statement_waits_for_a_swap_in_flight_and_is_redirected(
        pg_schema_url: str, root: Path | str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Warehouse.open(catalog=pg_schema_url, root=str(root)) as wh:
        _backfill(wh, appends=2)
        (group, *_) = compaction.plan(wh.runtime, EVENTS_T)
        user_ready, swap_holding = threading.Event(), threading.Event()
        original_register, original_swap = staging.register_all, compaction_records.swap

        def register(rt: Runtime, *args: Any, **kwargs: Any) -> None:
            user_ready.set()  # the statement chose its parts; let the merge swap them now
            assert swap_holding.wait(60)
            original_register(rt, *args, **kwargs)

        def swap(conn: Connection, *args: Any, **kwargs: Any) -> compaction_records.SwapResult:
            result = original_swap(conn, *args, **kwargs)
            swap_holding.set()  # the sources are locked and swapped, not yet committed
            merge = backend_pid(conn)
            wait_until(lambda: blocked_by(pg_schema_url, merge), what="the user statement to wait on the swap's locks")
            return result

        monkeypatch.setattr(staging, "register_all", register)
        monkeypatch.setattr(compaction_records, "swap", swap)
        user = wh.begin()
        deleted: list[int] = []
        statement = threading.Thread(target=lambda: deleted.append(user.delete(EVENTS_T, pc.field("id") == 10)))
        statement.start()
        assert user_ready.wait(60)
        assert compaction.merge_group(wh.runtime, group)["status"] == "merged"
        statement.join(timeout=60)
        assert deleted == [1]
        user.commit()
        assert ids(wh.read(EVENTS_T, filter=pc.field("day") == DAYS[0])) == [0, 1, 11]
