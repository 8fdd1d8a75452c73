"""Structured logs (airflow_txn.telemetry.logs) and metrics (airflow_txn.telemetry.metrics) of the engine: every line
about a transaction carries its tid and CSN; commit, rollback, conflicts and the watermark lag are
reported to the installed sink (a real RecordingSink, the sink users install themselves)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.core import commit
from airflow_txn.errors import SerializationError, TransactionClosedError
from airflow_txn.telemetry import logs, metrics

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])


@pytest.fixture
def sink() -> Iterator[metrics.RecordingSink]:
    recording = metrics.RecordingSink()
    previous = metrics.set_sink(recording)
    yield recording
    metrics.set_sink(previous)


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="airflow_txn")
    return caplog


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "day": ["2024-01-01"] * len(ids)}, schema=SCHEMA)


def engine_records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


def test_commit_lines_carry_tid_and_csn(wh: Warehouse, records: pytest.LogCaptureFixture,
                                        sink: metrics.RecordingSink) -> None:
    wh.create_table("shop.orders", SCHEMA)
    t = wh.begin()
    t.append("shop.orders", rows(1, 2))
    csn = t.commit()

    [line] = [r for r in engine_records(records, "airflow_txn.core.commit") if r.levelno == logging.INFO]
    assert (line.tid, line.csn) == (t.tid, csn)  # type: ignore[attr-defined]
    assert line.getMessage().startswith(f"tid={t.tid} csn={csn} committed in ")
    # the SQL oracle applies inside the commit's catalog transaction; an external log applies afterwards
    applier = "airflow_txn.core.commit" if wh.runtime.oracle.external_log is None else "airflow_txn.core.apply"
    applied = [r for r in engine_records(records, applier)
               if r.csn == csn and "applied" in r.getMessage()]  # type: ignore[attr-defined]
    assert [r.tid for r in applied] == [t.tid]  # type: ignore[attr-defined]
    began = engine_records(records, "airflow_txn.core.warehouse")
    assert [(r.tid, r.csn) for r in began] == [(t.tid, t.snapshot_csn)]  # type: ignore[attr-defined]

    [latency] = sink.of(metrics.COMMIT_LATENCY)
    oracle = "sql" if wh.runtime.oracle.external_log is None else "zookeeper"
    assert latency.kind == "timing" and latency.value > 0 and latency.tags == {"oracle": oracle}
    assert [s.value for s in sink.of(metrics.WATERMARK_LAG)][-1] == 0
    assert sink.total(metrics.ROLLBACKS) == sink.total(metrics.CONFLICTS) == 0


def test_read_only_commit_reports_no_latency(wh: Warehouse, sink: metrics.RecordingSink) -> None:
    wh.create_table("shop.orders", SCHEMA)
    t = wh.begin()
    t.read("shop.orders")
    assert t.commit() == t.snapshot_csn
    assert sink.of(metrics.COMMIT_LATENCY) == []


def test_rollback_is_logged_and_counted_once(wh: Warehouse, records: pytest.LogCaptureFixture,
                                             sink: metrics.RecordingSink) -> None:
    wh.create_table("shop.orders", SCHEMA)
    t = wh.begin()
    t.append("shop.orders", rows(1))
    t.rollback(reason="changed my mind")
    t.rollback()  # already rolled back: nothing more to count

    lines = engine_records(records, "airflow_txn.core.rollback")
    assert lines and all(r.tid == t.tid for r in lines)  # type: ignore[attr-defined]
    assert [r.getMessage() for r in lines if r.levelno == logging.INFO] == [
        f"tid={t.tid} rolled back: changed my mind"]
    assert sink.total(metrics.ROLLBACKS) == 1
    assert sink.of(metrics.COMMIT_LATENCY) == []


def test_write_conflict_is_counted_and_rolled_back(wh: Warehouse, records: pytest.LogCaptureFixture,
                                                   sink: metrics.RecordingSink) -> None:
    wh.create_table("shop.orders", SCHEMA)
    with wh.begin() as seed:
        seed.append("shop.orders", rows(1))
    first, second = wh.begin(), wh.begin()
    first.overwrite("shop.orders", rows(2))
    with pytest.raises(SerializationError):
        second.overwrite("shop.orders", rows(3))
    assert sink.total(metrics.CONFLICTS) == 1
    with pytest.raises(TransactionClosedError):
        second.commit()  # a failed statement: only rollback is allowed, and that is no new conflict
    second.rollback()
    first.commit()
    assert sink.total(metrics.CONFLICTS) == 1
    assert sink.total(metrics.ROLLBACKS) == 1
    rolled = [r for r in engine_records(records, "airflow_txn.core.rollback") if r.levelno == logging.INFO]
    assert [r.tid for r in rolled] == [second.tid]  # type: ignore[attr-defined]
    assert "conflicts" in rolled[0].getMessage()


def test_serializable_validation_failure_is_a_conflict(wh: Warehouse, records: pytest.LogCaptureFixture,
                                                       sink: metrics.RecordingSink) -> None:
    wh.create_table("shop.orders", SCHEMA)
    reader = wh.begin(isolation="serializable")
    reader.read("shop.orders")
    reader.append("shop.orders", rows(1))
    with wh.begin() as writer:
        writer.append("shop.orders", rows(2))
    with pytest.raises(SerializationError):
        reader.commit()
    assert sink.total(metrics.CONFLICTS) == 1
    assert sink.total(metrics.ROLLBACKS) == 1
    [warning] = [r for r in engine_records(records, "airflow_txn.core.commit") if r.levelno == logging.WARNING]
    assert warning.tid == reader.tid  # type: ignore[attr-defined]
    assert warning.getMessage().startswith(f"tid={reader.tid} commit failed: ")
    assert wh.transaction_info(reader.tid)["state"] == "rolled_back"


def test_vacuum_line_carries_the_horizon(wh: Warehouse, records: pytest.LogCaptureFixture) -> None:
    wh.create_table("shop.orders", SCHEMA)
    t = wh.begin()
    t.append("shop.orders", rows(1))
    t.rollback()
    report = wh.vacuum(retention_seconds=0)
    [line] = engine_records(records, "airflow_txn.core.vacuum")
    assert line.csn == report["horizon"] and line.tid is None  # type: ignore[attr-defined]
    assert line.getMessage().startswith(f"csn={report['horizon']} vacuum: {report['parts_removed']} part(s)")
    assert report["parts_removed"] == 1


def test_watermark_lag_counts_records_not_yet_applied(tmp_path: Path, sink: metrics.RecordingSink) -> None:
    """A committer that stops after its record (simulated by running only the record step) leaves a
    gap: the next commit's apply sees a lag of two CSNs, which its catch-up closes."""
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=str(tmp_path / "wh")) as wh:
        wh.create_table("shop.orders", SCHEMA)
        stalled = wh.begin()
        stalled.append("shop.orders", rows(1))
        stalled_csn, wrote = commit._record(wh.runtime, stalled.tid)  # the commit point, no apply
        assert wrote and wh.readable_csn() == stalled_csn - 1
        with wh.begin() as t:
            t.append("shop.orders", rows(2))
        assert [s.value for s in sink.of(metrics.WATERMARK_LAG)] == [2, 0]
        assert wh.readable_csn() == stalled_csn + 1


def test_a_failing_sink_never_fails_the_engine(wh: Warehouse) -> None:
    class Broken:
        def incr(self, name: str, count: int = 1, tags: metrics.Tags | None = None) -> None:
            raise RuntimeError("statsd down")

        timing = gauge = incr  # type: ignore[assignment]

    previous = metrics.set_sink(Broken())
    try:
        wh.create_table("shop.orders", SCHEMA)
        with wh.begin() as t:
            t.append("shop.orders", rows(1))
        t2 = wh.begin()
        t2.rollback()
    finally:
        metrics.set_sink(previous)
    assert wh.read("shop.orders").num_rows == 1


def test_json_and_text_formatters(tmp_path: Path) -> None:
    stream = io.StringIO()
    logger = logging.getLogger("airflow_txn")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    try:
        handler = logs.configure("json", stream=stream)
        with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=str(tmp_path / "wh")) as wh:
            wh.create_table("shop.orders", SCHEMA)
            with wh.begin() as t:
                t.append("shop.orders", rows(1))
            csn = wh.readable_csn()
        lines = [json.loads(x) for x in stream.getvalue().splitlines()]
        assert [x["message"] for x in lines if x["logger"] == "airflow_txn.core.ownership"] == [
            f"storage root {tmp_path / 'wh'} claimed by warehouse {wh.warehouse_id}"]  # the first write, once
        [line] = [x for x in lines if x["logger"] != "airflow_txn.core.ownership"]
        expected = ("airflow_txn.core.commit", "INFO", t.tid, csn)
        assert (line["logger"], line["level"], line["tid"], line["csn"]) == expected
        assert line["message"].startswith("committed in ")  # the fields are fields, not a prefix

        stream.truncate(0), stream.seek(0)
        assert logs.configure("text", stream=stream) is not handler
        assert len([h for h in logger.handlers if getattr(h, "_airflow_txn", False)]) == 1  # replaced
        logs.get_logger("airflow_txn.test").info("hello %s", "world", extra=logs.fields("1-2-00000000000000ab", 7))
        text = stream.getvalue().strip()
        assert text.endswith(" INFO airflow_txn.test tid=1-2-00000000000000ab csn=7 hello world"), text
    finally:
        logger.handlers[:] = saved[2]
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def test_bind_fills_fields_the_call_does_not_name(records: pytest.LogCaptureFixture) -> None:
    log = logs.get_logger("airflow_txn.test")
    with logs.bind(tid="5-1-00000000000000ff"):
        with logs.bind(csn=9):
            log.info("inner")
        log.info("outer", extra=logs.fields(csn=3))
    log.info("none")
    got = [(r.getMessage(), r.tid, r.csn) for r in engine_records(records, "airflow_txn.test")]  # type: ignore[attr-defined]
    assert got == [("tid=5-1-00000000000000ff csn=9 inner", "5-1-00000000000000ff", 9),
                   ("tid=5-1-00000000000000ff csn=3 outer", "5-1-00000000000000ff", 3),
                   ("none", None, None)]


def test_context_filter_and_bad_format() -> None:
    record = logging.LogRecord("other", logging.INFO, __file__, 1, "plain %s", ("line",), None)
    with logs.bind(tid="1-1-0000000000000001"):
        assert logs.TxnContextFilter().filter(record)
    assert (record.tid, record.csn) == ("1-1-0000000000000001", None)  # type: ignore[attr-defined]
    assert logs.event_message(record) == "plain line"
    with pytest.raises(ValueError, match="AIRFLOW_TXN_LOG_FORMAT must be one of"):
        logs.formatter("xml")


def test_metric_names_are_the_published_ones() -> None:
    """Dashboards and alerts key on these names (docs/OBSERVABILITY.md): moving a module must not rename
    a metric (the layout move once turned airflow_txn.commit.latency_ms into airflow_txn.core.commit...)."""
    published = {"airflow_txn.commit.latency_ms", "airflow_txn.rollbacks", "airflow_txn.conflicts",
                 "airflow_txn.watermark_lag"}
    assert {metrics.COMMIT_LATENCY, metrics.ROLLBACKS, metrics.CONFLICTS, metrics.WATERMARK_LAG} == published
    docs = (Path(__file__).resolve().parents[2] / "docs" / "OBSERVABILITY.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in docs for name in published)
