"""The adapter interface (airflow_txn/core/adapter.py) driven by a stand-in engine: pyarrow writing the files
itself, as Spark does, with nothing but the adapter and the handles. What a future adapter (object
storage, a Spark data source) builds on: a statement whose files an engine wrote, reads at a snapshot,
conflicts and merges."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_txn import Warehouse
from airflow_txn.core import adapter
from airflow_txn.errors import (
    InvalidArgumentError,
    MergedAwayError,
    SchemaMismatchError,
    SerializationError,
    StorageError,
    TransactionClosedError,
    TxnError,
)
from airflow_txn.model.partitioning import normalize_partitions
from tests.helpers import events, ids, make_tables, storage_files

EVENTS = "sales.events"


def engine_write(plan: adapter.WritePlan, rows: pa.Table) -> int:
    """What an engine does: its own files in a new write dir, one part per partition, then commit the plan."""
    table = plan.view
    write_dir = plan.new_write_dir(writer="test-engine")
    written = []
    for day in sorted(set(rows["day"].to_pylist())):
        [partition] = normalize_partitions([{"day": day}], table.schema, table.partition_by)
        leaf = write_dir.location / f"day={day}"
        leaf.mkdir()
        data = rows.filter(pc.equal(rows["day"], day)).drop_columns(list(table.partition_by))
        pq.write_table(data, leaf / "part-0.parquet")
        written.append((partition, adapter.WrittenPart(f"{write_dir.relative}/day={day}", ("part-0.parquet",),
                                                       data.num_rows, (leaf / "part-0.parquet").stat().st_size)))
    try:
        return plan.commit(written)
    except BaseException:
        plan.discard(write_dir)
        raise


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_an_engines_files_become_the_statements_parts(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as t:
        plan = adapter.open_write(t, EVENTS, what="engine append")
        assert plan.view.name.qualified == EVENTS and plan.view.partition_by == ("day",)
        assert engine_write(plan, events([1, 2], day="2024-01-01")) == 2
        own = adapter.plan_read(wh, EVENTS, txn=t)
        assert own.tid == t.tid and [p.row_count for p in own.parts] == [2]
        assert adapter.plan_read(wh, EVENTS).parts == ()  # not committed yet
    assert ids(wh.read(EVENTS)) == [1, 2]
    plan = adapter.plan_read(wh, EVENTS, partitions=[{"day": "2024-01-01"}])
    [part] = plan.parts
    assert part.partition == {"day": "2024-01-01"} and part.locked_by is None
    assert (plan.table.location / part.path / part.files[0]).is_file()


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_a_keyed_statement_replaces_what_its_key_staged_before(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as t:
        engine_write(adapter.open_write(t, EVENTS, key="task-a"), events([1, 2]))
        again = adapter.open_write(t, EVENTS, adapter.REWRITE, key="task-a")
        assert again.visible == ()  # the key's earlier attempt is withdrawn for it
        engine_write(adapter.open_write(t, EVENTS, key="task-a"), events([3]))
    assert ids(wh.read(EVENTS)) == [3]


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_a_part_another_transaction_replaces_is_a_conflict_that_fails_the_transaction(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as seed:
        seed.append(EVENTS, events([1]))
    first, second = wh.begin(), wh.begin()
    first.overwrite(EVENTS, events([2]))
    rewrite = adapter.open_write(second, EVENTS, adapter.REWRITE)
    assert [p.locked_by for p in rewrite.visible] == [first.tid]
    with pytest.raises(SerializationError, match="conflicts"):
        rewrite.replacing([p.id for p in rewrite.visible])
    with pytest.raises(TransactionClosedError):
        second.append(EVENTS, events([3]))
    second.rollback()
    first.commit()
    assert ids(wh.read(EVENTS)) == [2]


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_an_overwrite_through_the_adapter_records_what_it_scanned(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as seed:
        seed.append(EVENTS, events([1]))
    t = wh.begin(isolation="serializable")
    plan = adapter.open_write(t, EVENTS, adapter.OVERWRITE, partitions=[{"day": "2024-01-01"}])
    assert len(plan.removals) == 1 and plan.allowed == ('{"day":"2024-01-01"}',)
    engine_write(plan, events([5]))
    with wh.begin() as other:  # commits a write to what `t` scanned
        other.append(EVENTS, events([6]))
    with pytest.raises(SerializationError):
        t.commit()


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_plan_read_takes_a_csn_or_a_transaction(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append(EVENTS, events([1]))
    csn = wh.readable_csn()
    assert adapter.plan_read(wh, EVENTS, csn=csn).snapshot == csn
    with pytest.raises(TxnError, match="not several"):
        adapter.plan_read(wh, EVENTS, csn=csn, txn=wh.begin())
    with pytest.raises(TxnError, match="not readable yet"):
        adapter.plan_read(wh, EVENTS, csn=csn + 100)


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_a_merge_writer_writes_each_merge_for_compact(wh: Warehouse) -> None:
    make_tables(wh)
    for i in range(3):
        with wh.begin() as t:
            t.append(EVENTS, events([i]))
    seen: list[adapter.MergePlan] = []

    def write(task: adapter.MergePlan) -> adapter.WrittenPart:
        seen.append(task)
        rows = pa.concat_tables(pq.read_table(task.view.location / s.path / name)
                                for s in task.sources for name in s.files)
        write_dir = task.new_write_dir(engine="test-engine")
        pq.write_table(rows, write_dir.location / "merged.parquet")
        return adapter.WrittenPart(write_dir.relative, ("merged.parquet",), rows.num_rows,
                                   (write_dir.location / "merged.parquet").stat().st_size)

    plan = adapter.open_compaction(wh, EVENTS)
    assert plan.merges == 1 and plan.table.name == EVENTS
    result = plan.run(write)
    assert result["merged"] == 1 and len(seen[0].sources) == 3 and seen[0].partition == {"day": "2024-01-01"}
    assert seen[0].replaces == tuple(s.id for s in seen[0].sources)
    assert ids(wh.read(EVENTS)) == [0, 1, 2]
    assert len(adapter.plan_read(wh, EVENTS).parts) == 1



@pytest.mark.s3
def test_an_engine_writing_by_path_is_refused_on_an_object_store_root(s3_root: str, tmp_path: Path) -> None:
    """An engine's write dirs are local paths: on an s3:// root a statement's and a read plan's `table` (the
    local directory), and a merge plan's (MergePlan.view, which a merge writing by path asks for), refuse with a
    StorageError naming the way there (the Spark data source, which writes through `stored`), before anything
    is staged (the merge rolls back); the transaction stays usable through the core API."""
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'catalog.db'}", root=s3_root) as wh:
        make_tables(wh)
        for i in range(2):
            with wh.begin() as seed:
                seed.append(EVENTS, events([i]))
        files = storage_files(s3_root)
        t = wh.begin()
        plan = adapter.open_write(t, EVENTS, key="task-a")
        assert plan.table.root == s3_root and plan.table.name == EVENTS  # the way through pyarrow.fs
        with pytest.raises(StorageError, match="object store") as refused:
            _ = plan.view
        assert 'format("airflow_txn")' in str(refused.value) and 'via="datasource"' in str(refused.value)
        assert wh.transaction_info(t.tid)["parts"] == [] and storage_files(s3_root) == files  # nothing staged
        read = adapter.plan_read(wh, EVENTS)
        assert len(read.parts) == 2 and read.stored.root == s3_root
        with pytest.raises(StorageError, match="object store"):
            _ = read.table

        def write(task: adapter.MergePlan) -> adapter.WrittenPart:  # an engine that writes by path asks for it
            _ = task.view
            raise AssertionError("a merge plan gave a local directory on an object-store root")

        with pytest.raises(StorageError, match="object store"):
            adapter.open_compaction(wh, EVENTS).run(write)
        assert storage_files(s3_root) == files
        assert t.state == "active"  # the refusal did not fail the transaction
        t.append(EVENTS, events([2]), key="task-a")
        t.commit()
        assert ids(wh.read(EVENTS)) == [0, 1, 2]


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_a_write_plan_travels_and_commits_elsewhere(wh: Warehouse) -> None:
    """A write plan pickles and goes through JSON without its handle (nor the root's settings); committed from
    there with the warehouse, it registers exactly as the handle's plan would, and a stray partition of an
    overwrite of listed partitions is refused with the core's one message before anything registers."""
    make_tables(wh)
    with wh.begin() as seed:
        seed.append(EVENTS, events([1], day="2024-01-01"))
    t = wh.begin()
    plan = adapter.open_write(t, EVENTS, adapter.OVERWRITE, partitions=[{"day": "2024-01-01"}])
    again = pickle.loads(pickle.dumps(plan))
    assert again == plan and again == adapter.WritePlan.from_json(plan.to_json(), {})
    assert "storage_options" not in plan.to_json()
    with pytest.raises(SchemaMismatchError, match=r"lists partitions \[\{'day': '2024-01-01'\}\] but the data also "
                                                  r"holds rows of \{'day': '2024-01-02'\}; nothing was staged"):
        again.check_written(['{"day":"2024-01-02"}'])
    with pytest.raises(TxnError, match="pass the warehouse"):
        again.commit([])
    assert again.commit([], wh) == 0  # replaces the partition with nothing
    t.commit()
    assert ids(wh.read(EVENTS)) == []


def test_a_read_plan_travels_as_json(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append(EVENTS, events([1, 2]))
    plan = adapter.plan_read(wh, EVENTS)
    again = adapter.ReadPlan.from_json(plan.to_json(), wh.config.storage_options)
    assert again == plan and pickle.loads(pickle.dumps(plan)) == plan
    assert pa.concat_tables(again.stored.read_part(p) for p in again.parts).num_rows == 2
    with pytest.raises(MergedAwayError, match="not visible in this read"):
        adapter.plan_read(wh, EVENTS, parts=[plan.parts[0].id + 1000])


def counted_round_trips(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The catalog transactions (read or write) opened from now on, in order."""
    catalog = wh.runtime.catalog
    opened: list[str] = []
    for kind in ("read", "write"):
        original = getattr(catalog, kind)

        def counting(original: Any = original, kind: str = kind) -> Any:
            opened.append(kind)
            return original()

        monkeypatch.setattr(catalog, kind, counting)
    return opened


@pytest.mark.parametrize("at", ["watermark", "csn", "tag", "txn", "keyed serializable txn"])
def test_a_read_is_planned_in_at_most_two_catalog_round_trips(wh: Warehouse, monkeypatch: pytest.MonkeyPatch,
                                                              at: str) -> None:
    """Issue 31, item 2: the one read planner checks, resolves and records a read in at most 2 catalog round trips
    (a read at a CSN took 4), whichever way it is asked: a CSN, a tag, or a transaction's own view (recorded in
    the read set its isolation keeps and, under a key, for retries)."""
    make_tables(wh)
    with wh.begin() as t:
        t.append(EVENTS, events([1, 2]))
    csn = wh.readable_csn()
    wh.tag("kept", tables=[EVENTS])
    txn = wh.begin(isolation="serializable" if "serializable" in at else "snapshot")
    if "keyed" in at:
        txn.use_key("reader", 1)
    kwargs: dict[str, Any] = {"csn": {"csn": csn}, "tag": {"tag": "kept"}}.get(at, {})
    if "txn" in at:
        kwargs = {"txn": txn}
    opened = counted_round_trips(wh, monkeypatch)
    plan = adapter.plan_read(wh, EVENTS, **kwargs)
    assert sum(p.row_count for p in plan.parts) == 2
    assert len(opened) <= 2, opened
    assert ("write" in opened) == ("keyed" in at)  # the recording shares its catalog transaction with the listing


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_a_statement_registers_and_records_its_read_set_in_one_catalog_transaction(
        wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31, item 1: an overwrite's registration and the read set its isolation level keeps are one catalog
    transaction, through the core and through a write plan alike (before: a second one after the registration);
    the read set is kept: a commit to the overwritten partition meanwhile fails the commit."""
    make_tables(wh)
    for how in ("core", "plan"):
        t = wh.begin(isolation="serializable")
        opened = counted_round_trips(wh, monkeypatch)
        if how == "core":
            t.overwrite(EVENTS, events([5]), partitions=[{"day": "2024-01-01"}])
        else:
            engine_write(adapter.open_write(t, EVENTS, adapter.OVERWRITE, partitions=[{"day": "2024-01-01"}]),
                         events([5]))
        monkeypatch.undo()
        assert opened.count("write") == 1, (how, opened)
        with wh.begin() as other:
            other.append(EVENTS, events([6]))
        with pytest.raises(SerializationError):
            t.commit()


def test_stray_rows_are_refused_before_the_conflict_check(wh: Warehouse) -> None:
    """Bad input is refused before anything else (invariant 9): an overwrite of listed partitions whose rows stray
    is a SchemaMismatchError leaving the transaction usable, even while another transaction holds a part it would
    replace (a conflict would fail the transaction)."""
    make_tables(wh)
    with wh.begin() as seed:
        seed.append(EVENTS, events([1], day="2024-01-01"))
    holder, t = wh.begin(), wh.begin()
    holder.delete(EVENTS, pc.field("id") == 1)
    with pytest.raises(SchemaMismatchError, match="also holds rows of"):
        t.overwrite(EVENTS, events([2], day="2024-01-02"), partitions=[{"day": "2024-01-01"}])
    assert t.state == "active"
    t.append(EVENTS, events([3], day="2024-01-02"))
    holder.rollback()
    t.commit()


def test_a_write_plan_naming_another_tables_part_is_refused_not_locked(tmp_path: Path) -> None:
    """A write plan travels as JSON (the data source's `write_plan` option): one edited to name a part of another
    table among its removals must not take that part's removal lock (found by the plans helper)."""
    import json

    from tests.helpers import accounts

    wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=str(tmp_path / "root"))
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.accounts", accounts({1: 1}))
    [other] = [p.id for p in adapter.plan_read(wh, "sales.accounts").parts]
    t = wh.begin()
    plan = adapter.open_write(t, "sales.events", adapter.APPEND)
    forged = adapter.WritePlan.from_json(json.dumps({**json.loads(plan.to_json()), "removals": [other]}), {})
    with pytest.raises(InvalidArgumentError, match=f"part {other} is not a part of the table"):
        forged.commit([], wh)
    later = wh.begin()
    later.delete("sales.accounts", pc.field("id") == 1)  # the part is free: nobody took its lock
    later.commit()
    assert wh.read("sales.accounts").num_rows == 0
    wh.close()


@pytest.mark.local_root  # the engine writes by local path (write dirs are local-only)
def test_a_merges_scope_is_the_cores_and_an_insert_is_validated_whatever_the_level(wh: Warehouse) -> None:
    """WritePlan.merge_scope narrows the candidates by the core's rule (the source's partitions when the key covers
    the partition columns, asked of the engine only then; else the whole table); replacing(..., inserts=True)
    keeps that scope and validates it at commit on a snapshot transaction (in the plan's JSON too): a commit into
    a scanned partition after its snapshot fails it, one into another partition does not."""
    make_tables(wh)
    with wh.begin() as seed:
        seed.append(EVENTS, events([1], day="2024-01-01"))
        seed.append(EVENTS, events([2], day="2024-01-02"))
    asked: list[bool] = []

    def partitions() -> pa.Table:
        asked.append(True)
        return pa.table({"day": ["2024-01-02"]})

    for isolation, other_day, fails in (("snapshot", "2024-01-02", True), ("snapshot", "2024-01-01", False)):
        asked.clear()
        t = wh.begin(isolation=isolation)
        every = adapter.open_write(t, EVENTS, adapter.REWRITE)
        whole = every.merge_scope(["id"], False, partitions)
        assert whole.visible == every.visible and not asked  # the key does not cover `day`: every part, not asked
        plan = adapter.open_write(t, EVENTS, adapter.REWRITE).merge_scope(["id", "day"], False, partitions)
        assert {p.partition["day"] for p in plan.visible} == {"2024-01-02"} and asked
        chosen = plan.replacing([], inserts=True)
        assert chosen.validated and adapter.WritePlan.from_json(chosen.to_json(), {}).validated
        assert not plan.replacing([]).validated  # nothing inserted, nothing deleted by source: not validated
        assert engine_write(chosen, events([3], day="2024-01-02")) == 1
        with wh.begin() as other:
            other.append(EVENTS, events([4], day=other_day))
        if fails:
            with pytest.raises(SerializationError, match=r"sales\.events"):
                t.commit()
        else:
            t.commit()
    assert ids(wh.read(EVENTS)) == [1, 2, 3, 4, 4]
