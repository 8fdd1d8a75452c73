"""Delta publishing (airflow_txn/publish/delta.py, docs/DESIGN.md D29): deltalake's own reader
(`DeltaTable(location, version=v).to_pyarrow_table()`) reads every committed CSN of every table exactly as
`wh.read(table, csn=...)` does, after appends, partition overwrites, copy-on-write deletes and updates, rollbacks,
multi-table commits, compaction, vacuum and tags; beside Iceberg behind the same interface; on SQLite and
PostgreSQL catalogs."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import InvalidArgumentError, PublishError, SnapshotTooOldError
from airflow_txn.publish.delta import APP_ID, LOG_DIR
from airflow_txn.publish.formats import CSN_KEY, KIND_KEY
from tests.helpers import accounts, events, make_tables
from tests.publish.tables import (
    D3,
    commit_every_kind_of_change,
    commit_every_kind_of_schema_change,
    committed_csns,
    open_create_and_rename,
    rows,
)

deltalake = pytest.importorskip("deltalake")

def delta_table(wh: Warehouse, table: str, version: int | None = None) -> Any:
    location = wh.published(tables=[table])[table]["delta_table"]
    return deltalake.DeltaTable(location, version=version)


def delta_rows(wh: Warehouse, table: str, location: str, version: int, csn: int | None = None) -> list[dict[str, Any]]:
    """The rows deltalake reads at the version; its columns are the table's at `csn` (None: now)."""
    read = deltalake.DeltaTable(location, version=version).to_pyarrow_table()
    names = wh.schema(table, csn=csn).names
    assert sorted(read.column_names) == sorted(names), (table, csn, read.column_names)  # partition columns last
    return rows(read.select(names))


def check_every_csn(wh: Warehouse, csns: Sequence[int] | None = None) -> int:
    """Publish, then read every committed CSN of every table through deltalake at the version `published` names
    and compare all rows with wh.read; returns how many (CSN, table) pairs were compared."""
    if csns is None:
        wh.publish()
    compared = 0
    for csn in committed_csns(wh) if csns is None else csns:
        published = wh.published(csn)
        for table in wh.tables():
            expected = rows(wh.read(table, csn=csn))
            last = wh.last_commit_csn(table, at=csn)
            if last is None:
                assert table not in published and expected == []
                continue
            found = published[table]
            assert found["csn"] == last, (table, csn)
            history = {h["version"]: h for h in deltalake.DeltaTable(found["delta_table"]).history()}
            assert history[found["delta_version"]][CSN_KEY] == str(last)
            assert delta_rows(wh, table, found["delta_table"], found["delta_version"], csn) == expected, (table, csn)
            compared += 1
    return compared


def commits_of(wh: Warehouse, table: str) -> list[dict[str, Any]]:
    """The commit infos airflow_txn wrote into the table's Delta log, oldest first."""
    history = delta_table(wh, table).history()
    return sorted((h for h in history if CSN_KEY in h), key=lambda h: h["version"])


@pytest.fixture
def dpub(open_pub: Callable[..., Warehouse]) -> Warehouse:
    return open_pub(publish="delta")


def test_every_committed_csn_reads_the_same_through_deltalake(dpub: Warehouse) -> None:
    commit_every_kind_of_change(dpub)
    assert check_every_csn(dpub) == 18  # 6 commits x 3 written tables
    assert [c[KIND_KEY] for c in commits_of(dpub, "shop.orders")] == ["commit"] * 4  # the rollback published nothing
    found = dpub.published()["shop.orders"]
    loaded = deltalake.DeltaTable(found["delta_table"])
    assert loaded.metadata().partition_columns == ["day", "shop"]
    assert loaded.version() == found["delta_version"] and loaded.transaction_version(APP_ID) == dpub.readable_csn()
    # the log lives in the table's own directory and its add actions name the part files where they are
    assert found["delta_table"] == f"file://{Path(dpub.config.root) / 'shop' / 'orders'}"
    pruned = loaded.to_pyarrow_table(filters=[("day", "=", D3)])
    assert sorted(pruned.column("id").to_pylist()) == [4, 5]


def test_an_added_column_publishes_and_every_csn_reads_the_same_through_deltalake(dpub: Warehouse) -> None:
    """An added nullable column is a Delta metaData version (deltalake's add_columns) before the CSN's own: older
    versions read without it, newer ones read it null in older files."""
    make_tables(dpub)
    dpub.create_table("shop.t", pa.schema([("a", pa.int32()), ("day", pa.string())]), partition_by=["day"])
    with dpub.begin() as t:
        t.append("shop.t", pa.table({"a": pa.array([1], pa.int32()), "day": ["d1"]}))
        t.append("sales.events", events([1]))
    dpub.publish()
    with dpub.begin() as t:  # a change and rows carrying it
        t.add_column("shop.t", pa.field("b", pa.string()))
        t.append("shop.t", pa.table({"a": pa.array([2], pa.int32()), "day": ["d2"], "b": ["x"]}))
    with dpub.begin() as t:  # a change alone
        t.add_column("shop.t", pa.field("c", pa.float64()))
    with dpub.begin() as t:
        t.append("shop.t", pa.table({"a": pa.array([3], pa.int32()), "day": ["d1"], "b": pa.array([None], pa.string()),
                                     "c": [1.5]}))
        t.delete("shop.t", pc.field("a") == 1)  # rewrites the part written before both columns
    assert check_every_csn(dpub) == 4 * 2  # 4 commits x 2 tables (sales.accounts never written)
    kinds = [h.get(KIND_KEY) for h in sorted(delta_table(dpub, "shop.t").history(), key=lambda h: h["version"])]
    assert kinds == [None, "commit", "schema", "commit", "schema", "commit", "commit"]


@pytest.mark.parametrize(("change", "named"), [
    (lambda t: t.rename_column("shop.t", "b", "c"), "'b' is renamed to 'c'"),
    (lambda t: t.drop_column("shop.t", "b"), "'b' is dropped"),
    (lambda t: t.alter_column("shop.t", "a", pa.int64()), "'a' changes type from int32 to int64"),
    (lambda t: t.add_column("shop.t", pa.field("d", pa.int64(), nullable=False), default=0), "'d' is added with a"),
], ids=["rename", "drop", "widen", "default"])
def test_a_change_delta_cannot_express_fails_that_table_naming_it(
        dpub: Warehouse, change: Callable[[Any], None], named: str) -> None:
    """deltalake (1.6) writes no column mapping and no type widening: a rename, a drop, a type change or a default
    for older rows fails the table's publishing, naming the column and why; the versions before it stay readable
    and the other tables are published."""
    make_tables(dpub)
    dpub.create_table("shop.t", pa.schema([("a", pa.int32()), ("b", pa.string())]))
    with dpub.begin() as t:
        t.append("shop.t", pa.table({"a": pa.array([1], pa.int32()), "b": ["x"]}))
    before = dpub.readable_csn()
    with dpub.begin() as t:
        change(t)
        t.append("sales.events", events([1]))
    refused = rf"shop\.t cannot be published to Delta at CSN \d+: column {re.escape(named)}.*column mapping"
    with pytest.raises(PublishError, match=refused) as raised:
        dpub.publish()
    assert "sales.events" not in str(raised.value)
    assert dpub.published(tables=["sales.events"])["sales.events"]["csn"] == dpub.readable_csn()
    assert check_every_csn(dpub, [before]) == 1


def test_the_shared_schema_history_publishes_to_delta_up_to_its_first_rename(dpub: Warehouse) -> None:
    commit_every_kind_of_schema_change(dpub)
    with pytest.raises(PublishError, match=r"shop\.items .*'note' is renamed to 'memo'"):
        dpub.publish()
    renamed = min(c for c in committed_csns(dpub) if c < 12 and "memo" in dpub.schema("shop.items", csn=c).names)
    assert check_every_csn(dpub, [c for c in committed_csns(dpub) if c < renamed]) == renamed - 2


def test_publishing_is_idempotent_and_safe_from_two_handles(open_pub: Callable[..., Warehouse]) -> None:
    one, two = open_pub(publish="delta"), open_pub(publish="delta")
    make_tables(one)
    for i in range(3):
        with one.begin() as t:
            t.append("sales.events", events([i]))
    assert one.publisher.wait_idle() and two.publisher.wait_idle()
    first = one.publish()
    assert first["errors"] == {} and first["csn"] == one.readable_csn()
    again, other = one.publish(), two.publish()
    assert again["tables"]["sales.events"]["snapshots"] == 0 and other["tables"]["sales.events"]["snapshots"] == 0
    assert again["tables"]["sales.events"]["delta_version"] == first["tables"]["sales.events"]["delta_version"]
    assert [c[CSN_KEY] for c in commits_of(one, "sales.events")] == [str(c) for c in committed_csns(one)]
    assert one.published() == two.published()


def test_a_publisher_that_lost_the_race_adds_nothing_twice(dpub: Warehouse) -> None:
    from deltalake.exceptions import CommitFailedError

    from airflow_txn.catalog import table_registry
    from airflow_txn.publish.delta import DeltaPublisher

    dpub.publisher.request = lambda: None  # type: ignore[method-assign]  # no background run: the race is staged
    make_tables(dpub)
    with dpub.begin() as t:
        t.append("sales.events", events([1]))
    dpub.publish()
    with dpub.begin() as t:
        t.append("sales.events", events([2]))
    with dpub.runtime.catalog.read() as conn:
        info = table_registry.get(conn, "sales.events")
    loser = DeltaPublisher(dpub.runtime, dpub.warehouse_id)
    stale = loser.table(info)  # another publisher read the table here...
    dpub.publish()  # ...and this one published the second commit first
    with pytest.raises(CommitFailedError):  # refused, never rebased onto the winner's version
        loser._catch_up(stale, info, dpub.readable_csn())
    assert loser.publish_table(info, dpub.readable_csn()).snapshots == 0  # reloaded: the work is done
    assert len(delta_table(dpub, "sales.events").file_uris()) == 2
    check_every_csn(dpub)


def test_a_commit_is_published_in_the_background(dpub: Warehouse) -> None:
    make_tables(dpub)
    with dpub.begin() as t:
        t.append("sales.events", events([1, 2]))
    csn = dpub.last_commit_csn("sales.events")
    location = Path(dpub.config.root) / "sales" / "events"
    deadline = time.monotonic() + 60
    while True:  # no call of publish: the commit woke the background publisher
        if (location / LOG_DIR).is_dir() and deltalake.DeltaTable(str(location)).transaction_version(APP_ID) == csn:
            break
        assert time.monotonic() < deadline, dpub.publisher.last_error
        time.sleep(0.05)
    assert dpub.publisher.wait_idle()
    assert [r["id"] for r in rows(deltalake.DeltaTable(str(location)).to_pyarrow_table())] == [1, 2]


def test_compaction_is_published_under_the_same_csn_and_vacuum_keeps_the_log(dpub: Warehouse) -> None:
    make_tables(dpub)
    for i in range(4):
        with dpub.begin() as t:
            t.append("sales.events", events([i]))
    assert dpub.publisher.wait_idle()  # the commits' background runs are over: the runs below count alone
    before = dpub.publish()["tables"]["sales.events"]
    assert dpub.compact("sales.events")["merged"] >= 1
    after = dpub.publish()["tables"]["sales.events"]
    assert after["snapshots"] == 1 and after["published_csn"] == before["published_csn"]
    last = commits_of(dpub, "sales.events")[-1]
    assert last[KIND_KEY] == "refresh" and last[CSN_KEY] == str(before["published_csn"])
    assert dpub.publish()["tables"]["sales.events"]["snapshots"] == 0  # compared once per change of the merges
    assert check_every_csn(dpub) == 4  # the newest version of the last CSN holds the merged part
    report = dpub.vacuum(retention_seconds=0)  # deletes the merged-away sources, never the Delta log
    assert report["orphan_dirs_removed"] == 0 and report["foreign_files_kept"] == 0
    latest = dpub.published()["sales.events"]
    assert delta_rows(dpub, "sales.events", latest["delta_table"], latest["delta_version"]) == rows(
        dpub.read("sales.events"))
    assert len(delta_table(dpub, "sales.events").file_uris()) == 1
    log = Path(dpub.config.root) / "sales" / "events" / LOG_DIR / f"{int(last['version']):020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    changes = [a.get("add", a.get("remove")) for a in actions if "add" in a or "remove" in a]
    assert len(changes) == 5 and not any(c["dataChange"] for c in changes)  # a rearrangement, in Delta's terms


def test_history_vacuum_purged_is_caught_up_in_one_version(open_pub: Callable[..., Warehouse]) -> None:
    plain = open_pub(publish="off")
    make_tables(plain)
    for i in range(3):
        with plain.begin() as t:
            t.overwrite("sales.events", events([i, i + 10]))
    with plain.begin() as t:
        t.append("sales.accounts", accounts({1: 1}))
    plain.vacuum(retention_seconds=0)  # the overwritten versions' files are gone
    dpub = open_pub(publish="delta")
    assert dpub.publisher.wait_idle()
    done = dpub.publish()
    assert done["errors"] == {} and done["tables"]["sales.events"]["snapshots"] <= 1
    assert [c[KIND_KEY] for c in commits_of(dpub, "sales.events")] == ["catch-up"]
    latest = dpub.published()["sales.events"]
    assert delta_rows(dpub, "sales.events", latest["delta_table"], latest["delta_version"]) == rows(
        dpub.read("sales.events"))
    with pytest.raises(SnapshotTooOldError, match="retention horizon"):  # as wh.read at that CSN
        dpub.published(min(committed_csns(dpub)))
    with dpub.begin() as t:  # and from there on, commit by commit
        t.append("sales.events", events([50]))
    check_every_csn(dpub, [dpub.readable_csn()])


def test_republish_rebuilds_a_table_from_its_oldest_readable_commit(dpub: Warehouse) -> None:
    make_tables(dpub)
    for i in range(3):
        with dpub.begin() as t:
            t.append("sales.events", events([i]))
    assert dpub.publisher.wait_idle()
    dpub.publish()
    done = dpub.republish("sales.events")
    assert done["tables"]["sales.events"]["snapshots"] == 3
    assert [c[KIND_KEY] for c in commits_of(dpub, "sales.events")] == ["commit"] * 3  # a new log, from version 0
    check_every_csn(dpub)


def test_a_tag_names_the_delta_version_of_its_csn(dpub: Warehouse) -> None:
    """Delta has no tags: published(tag=) names the version holding the tag's CSN."""
    make_tables(dpub)
    with dpub.begin() as t:
        t.append("sales.events", events([1]))
        t.append("sales.accounts", accounts({1: 1}))
    dpub.tag("month-end", tables=["sales.events"])
    with dpub.begin() as t:
        t.append("sales.events", events([2]))
    found = dpub.published(tag="month-end")
    assert list(found) == ["sales.events"]
    tagged = found["sales.events"]
    assert delta_rows(dpub, "sales.events", tagged["delta_table"], tagged["delta_version"]) == rows(
        dpub.read("sales.events", tag="month-end"))


def test_iceberg_and_delta_are_published_side_by_side(open_pub: Callable[..., Warehouse]) -> None:
    pytest.importorskip("pyiceberg")
    both = open_pub(publish="iceberg,delta")
    make_tables(both)
    with both.begin() as t:
        t.append("sales.events", pa.concat_tables([events([1, 2]), events([3], day="2024-01-02")]))
    with both.begin() as t:
        t.delete("sales.events", pc.field("id") == 2)
    assert both.publisher.wait_idle()
    report = both.publish()
    assert report["formats"] == ["iceberg", "delta"] and report["errors"] == {}
    entry = report["tables"]["sales.events"]
    assert {"published_csn", "snapshots", "iceberg_snapshot_id", "delta_version", "tags"} <= set(entry)
    found = both.published()["sales.events"]
    assert found["csn"] == both.readable_csn() == found["published_csn"]
    iceberg_read = both.iceberg_catalog().load_table("sales.events").scan(
        snapshot_id=found["iceberg_snapshot_id"]).to_arrow()
    expected = rows(both.read("sales.events"))
    assert rows(iceberg_read.select(both.schema("sales.events").names)) == expected
    assert delta_rows(both, "sales.events", found["delta_table"], found["delta_version"]) == expected
    check_every_csn(both)


@pytest.mark.parametrize(("arrow_type", "value", "named"), [
    (pa.uint64(), 2**64 - 1, "uint64"), (pa.uint8(), 255, "uint8"), (pa.timestamp("ns"), 1000, "timestamp[ns]")])
def test_a_type_delta_lacks_is_refused_naming_it_and_the_others_are_published(
        dpub: Warehouse, arrow_type: pa.DataType, value: Any, named: str) -> None:
    """Delta's integers are signed and its timestamps microseconds: deltalake maps a uint64 to a long and a uint8 to
    a byte, which cannot hold their upper halves."""
    make_tables(dpub)
    dpub.create_table("odd.col", pa.schema([("n", arrow_type)]))
    with dpub.begin() as t:
        t.append("sales.events", events([1]))
        t.append("odd.col", pa.table({"n": pa.array([value], arrow_type)}))
    assert dpub.publisher.wait_idle()
    with pytest.raises(PublishError, match=rf"odd\.col .*n is {re.escape(named)},") as raised:
        dpub.publish()
    assert "sales.events" not in str(raised.value)
    assert not (Path(dpub.config.root) / "odd" / "col" / LOG_DIR).exists()  # nothing half made
    assert dpub.published(tables=["sales.events"])["sales.events"]["csn"] == dpub.readable_csn()


def test_partition_values_delta_serializes_its_own_way_read_back(dpub: Warehouse) -> None:
    """A timestamp partition value is `YYYY-MM-DD HH:MM:SS.ffffff` in Delta (UTC for a zoned column); a string
    value whose directory name is percent-encoded is named by its path as it is on disk."""
    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("us", tz="Europe/Paris")), ("k", pa.string()),
                        ("flag", pa.bool_()), ("local", pa.timestamp("us")), ("when", pa.timestamp("ms"))])
    dpub.create_table("odd.parts", schema, partition_by=["at", "k", "flag", "local"])
    at = dt.datetime(2024, 3, 1, 12, 30, 45, 500000, tzinfo=dt.UTC)
    local = dt.datetime(2024, 3, 1, 23, 59, 59)
    data = pa.table({"id": [1, 2, 3], "at": [at, at, None], "k": ["a b/c%=", "x", None], "flag": [True, False, None],
                     "local": [local, None, local], "when": [local, local, None]}, schema=schema)
    with dpub.begin() as t:
        t.append("odd.parts", data)
    with dpub.begin() as t:
        t.delete("odd.parts", pc.field("id") == 2)
    assert check_every_csn(dpub) == 2


def test_the_command_line_and_doctor_publish_to_delta(dpub: Warehouse, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.cli import main

    make_tables(dpub)
    with dpub.begin() as t:
        t.append("sales.events", events([1]))
    first = dpub.readable_csn()
    with dpub.begin() as t:
        t.append("sales.events", events([2]))
    where = ["--catalog", dpub.config.catalog_url, "--root", dpub.config.root, "--json"]
    assert dpub.publisher.wait_idle()  # this handle's background runs never interleave with the CLI's below
    capsys.readouterr()
    assert main(["publish", "--format", "delta", *where]) == 0
    assert json.loads(capsys.readouterr().out)["formats"] == ["delta"]
    assert main(["published", "--format", "delta", "--csn", str(first), *where]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == [{"table": "sales.events", **dpub.published(first)["sales.events"]}]
    assert main(["publish", "--format", "delta", "--republish", "--table", "sales.events", *where]) == 0
    assert json.loads(capsys.readouterr().out)["sales.events"]["sales.events"]["snapshots"] == 2
    assert main(["publish", "--format", "hudi", *where]) == 2  # bad usage
    capsys.readouterr()
    monkeypatch.setenv("AIRFLOW_TXN_PUBLISH", "delta")
    main([*where, "doctor"])
    check = next(c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "publishing")
    assert check["status"] == "ok" and "Delta" in check["detail"], check
    with dpub.begin() as t:
        t.append("sales.events", events([3]))
    assert dpub.publisher.wait_idle()
    check_every_csn(dpub)


def test_settings_name_delta(catalog_url: str, tmp_path: Any) -> None:
    root = str(tmp_path / "w")
    with Warehouse.open(catalog=catalog_url, root=root, publish="delta") as wh:
        assert wh.config.publish == ("delta",)
    with pytest.raises(InvalidArgumentError, match="unknown format 'hudi'"):
        Warehouse.open(catalog=catalog_url, root=root, publish="delta,hudi")


def test_without_deltalake_the_error_names_the_extra(tmp_path: Any) -> None:
    from tests.helpers import import_error_without

    setup = (f"from airflow_txn import Warehouse\n"
             f"wh = Warehouse.open(catalog='sqlite:///{tmp_path}/c.db', root='{tmp_path}/w', publish='delta')\n"
             f"wh.init()")
    said = import_error_without("deltalake", setup, "wh.publish()")
    assert "pip install 'airflow-txn[delta]'" in said


@pytest.mark.s3
@pytest.mark.parametrize("settings", ["environment", "storage_options"])
def test_an_s3_root_is_published_and_read_through_deltalake(s3_root: str, tmp_path: Any, settings: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The root on a real S3-compatible server, its settings in the AWS_* environment or in storage_options
    alone: the Delta log goes into the table's prefix, its add actions name the part objects themselves."""
    import os

    options: dict[str, str] | None = None
    if settings == "storage_options":
        options = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"], "region": os.environ["AWS_REGION"],
                   "access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
                   "secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"]}
        for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                     "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(name)
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=s3_root, publish="delta",
                        storage_options=options) as wh:
        make_tables(wh)
        with wh.begin() as t:
            t.append("sales.events", pa.concat_tables([events([1, 2]), events([3], day="2024-01-02")]))
        with wh.begin() as t:
            t.delete("sales.events", pc.field("id") == 2)
        wh.compact("sales.events")
        assert wh.publisher.wait_idle()
        wh.publish()
        reader_options = wh.publisher._delta_options()
        for csn in committed_csns(wh):
            found = wh.published(csn)["sales.events"]
            assert found["delta_table"] == f"{s3_root}/sales/events"
            read = deltalake.DeltaTable(found["delta_table"], version=found["delta_version"],
                                        storage_options=reader_options or None).to_pyarrow_table()
            assert rows(read.select(wh.schema("sales.events").names)) == rows(wh.read("sales.events", csn=csn))


def test_an_engines_write_dir_parts_are_published_file_by_file(dpub: Warehouse) -> None:
    """Spark's native writer leaves a write dir whose partition leaves are parts of several files each (D8): each
    file is an add action of its own, its row count read from its footer."""
    import pyarrow.parquet as pq

    from airflow_txn.core import adapter
    from airflow_txn.model.partitioning import normalize_partitions

    make_tables(dpub)
    with dpub.begin() as t:
        t.append("sales.events", events([1]))
    with dpub.begin() as t:
        plan = adapter.open_write(t, "sales.events", adapter.APPEND, what="engine append")
        write_dir = plan.new_write_dir(writer="test-engine")
        written = []
        for day, batches in (("2024-01-01", [[10, 11], [12]]), ("2024-01-02", [[20], [21]])):
            [partition] = normalize_partitions([{"day": day}], plan.table.schema, plan.table.partition_by)
            leaf = write_dir.location / f"day={day}"
            leaf.mkdir()
            names = []
            for i, batch in enumerate(batches):
                pq.write_table(events(batch, day=day).drop_columns(["day"]), leaf / f"part-{i}.parquet")
                names.append(f"part-{i}.parquet")
            size = sum((leaf / name).stat().st_size for name in names)
            written.append((partition, adapter.WrittenPart(f"{write_dir.relative}/day={day}", tuple(names),
                                                           sum(len(b) for b in batches), size)))
        plan.commit(written, dpub)
    with dpub.begin() as t:  # copy-on-write over a part of two files
        t.delete("sales.events", pc.field("id") == 11)
    assert check_every_csn(dpub) == 3
    adds = pa.table(delta_table(dpub, "sales.events").get_add_actions(flatten=True))
    counts = {p: n for p, n in zip(adds.column("path").to_pylist(), adds.column("num_records").to_pylist(),
                                   strict=True) if p.startswith("w-")}
    assert sorted(counts.values()) == [1, 1]  # 2024-01-02's two files, one row each


def test_a_delta_table_another_writer_made_is_never_written(dpub: Warehouse) -> None:
    make_tables(dpub)
    deltalake.write_deltalake(str(Path(dpub.config.root) / "sales" / "events"), events([9]).drop_columns(["day"]))
    with dpub.begin() as t:
        t.append("sales.events", events([1]))
        t.append("sales.accounts", accounts({1: 1}))
    assert dpub.publisher.wait_idle()
    with pytest.raises(PublishError, match=r"sales\.events .*not published by this warehouse"):
        dpub.publish()
    assert dpub.published(tables=["sales.accounts"])["sales.accounts"]["csn"] == dpub.readable_csn()


CRASH_AFTER_COMMIT = """
import os, sys
import pyarrow as pa
from airflow_txn import Warehouse
wh = Warehouse.open(catalog=sys.argv[1], root=sys.argv[2], publish="delta")
wh.publisher.request = lambda: None  # the background run never starts: as if the process died at once
t = wh.begin()
t.append("sales.events", pa.table({"id": [7], "day": ["2024-01-01"], "value": [1.0]},
                                  schema=wh.schema("sales.events")))
print(t.commit(), flush=True)
os._exit(0)  # dies right after its commit stands, before anything was published
"""


def test_a_process_that_dies_after_its_commit_is_caught_up_by_the_next_publisher(dpub: Warehouse) -> None:
    import os
    import subprocess
    import sys

    make_tables(dpub)
    with dpub.begin() as t:
        t.append("sales.events", events([1]))
    assert dpub.publisher.wait_idle()
    dpub.publish()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", CRASH_AFTER_COMMIT, dpub.config.catalog_url, dpub.config.root],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    csn = int(done.stdout.strip())
    location = str(Path(dpub.config.root) / "sales" / "events")
    assert deltalake.DeltaTable(location).transaction_version(APP_ID) != csn  # the crash left publishing behind
    assert dpub.published(csn)["sales.events"]["csn"] == csn  # whoever finds it behind catches it up
    check_every_csn(dpub)


def test_publishing_every_table_leaves_out_what_an_open_transaction_created_or_renamed(dpub: Warehouse,
                                                                                      tmp_path: Path) -> None:
    """As for Iceberg: `wh.publish()` of every table goes through the tables readers list, by their committed names;
    a table an open transaction creates gets no Delta log, a staged rename's new name no entry."""
    open_txn = open_create_and_rename(dpub)
    assert set(dpub.publish()["tables"]) == {"sales.events"}
    assert len(list((tmp_path / "warehouse").rglob(LOG_DIR))) == 1
    open_txn.rollback()
    assert set(dpub.publish()["tables"]) == {"sales.events"}
