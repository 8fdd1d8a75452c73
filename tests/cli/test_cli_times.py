"""Times on the command line (airflow_txn/cli/times.py, pendulum): printed as ISO 8601 with the zone and
spans in words; typed as seconds, numbers with a unit (7d, 12h, 30m, 45s), ISO 8601 durations, or (vacuum
--retention) a point in time. JSON output writes moments as ISO 8601 in UTC and spans as numbers."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_txn import Warehouse
from airflow_txn.cli import exit_codes, main, times
from airflow_txn.model import moments
from tests.helpers import events, make_tables

ISO_8601 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)")
UTC_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def test_a_moment_is_iso_8601_with_its_zone_to_the_second() -> None:
    epoch = 1_764_000_000.75
    shown = times.moment(epoch)
    assert ISO_8601.fullmatch(shown), shown
    assert pendulum.parse(shown).timestamp() == 1_764_000_000


def test_a_moment_in_json_is_iso_8601_in_utc_to_the_microsecond() -> None:
    assert moments.utc(1_764_000_000.25) == "2025-11-24T16:00:00.250000Z"
    assert moments.utc(0) == "1970-01-01T00:00:00.000000Z"
    epoch = 1_764_000_123.456789
    assert datetime.fromisoformat(moments.utc(epoch)).timestamp() == pytest.approx(epoch, abs=1e-6)


def test_a_span_is_in_words() -> None:
    assert [times.duration(s) for s in (0, 1, 1.5, 90, 5400, 7 * 86400)] == [
        "0 seconds", "1 second", "1.5 seconds", "1 minute 30 seconds", "1 hour 30 minutes", "1 week"]


def test_seconds_are_numbers_or_iso_8601() -> None:
    assert [times.parse_seconds(t) for t in ("60", "0.5", "PT1H30M", "P7D", " PT5M ")] == [
        60.0, 0.5, 5400.0, 7 * 86400.0, 300.0]
    for bad in ("an hour", "1H", "h", "7x", "1h-", "-1h", "1.h", "P", "12:00"):
        with pytest.raises(ValueError, match=r"ISO 8601|time of day"):
            times.parse_seconds(bad, since_allowed=True)
    with pytest.raises(ValueError, match="point in time"):
        times.parse_seconds("2026-01-01T00:00:00Z")  # not a span unless the option allows it


def test_seconds_with_units() -> None:
    given = ("45s", "30m", "12h", "7d", "2w", "1h30m", " 1.5h ", "1d12h", "0s")
    assert [times.parse_seconds(t) for t in given] == [
        45.0, 1800.0, 43200.0, 7 * 86400.0, 14 * 86400.0, 5400.0, 5400.0, 129600.0, 0.0]


def test_a_point_in_time_is_the_span_since_then() -> None:
    an_hour_ago = pendulum.now("UTC").subtract(hours=1).to_iso8601_string()
    assert 3590 < times.parse_seconds(an_hour_ago, since_allowed=True) < 3700
    with pytest.raises(ValueError, match="in the future"):
        times.parse_seconds(pendulum.now().add(days=1).to_iso8601_string(), since_allowed=True)


# -- through the command line --------------------------------------------------------------------------------------
@pytest.fixture
def opts(wh: Warehouse, catalog_url: str, root: Path) -> list[str]:
    make_tables(wh)
    return ["--catalog", catalog_url, "--root", str(root)]


def run(capsys: pytest.CaptureFixture[str], args: list[str], code: int = exit_codes.OK) -> str:
    assert main(args) == code, capsys.readouterr()
    return capsys.readouterr().out


def run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> Any:
    return json.loads(run(capsys, [*args, "--json"]))


def test_durations_on_the_command_line(wh: Warehouse, opts: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_json(capsys, [*opts, "retention", "sales.events", "--seconds", "30m"])["seconds"] == 1800
    assert run_json(capsys, [*opts, "retention", "sales.events", "--seconds", "7d"])["seconds"] == 7 * 86400
    assert run_json(capsys, [*opts, "vacuum", "--retention", "12h", "--dry-run", "-q"])["dry_run"] is True
    assert run_json(capsys, [*opts, "doctor", "--timeout", "45s"])["ok"] is True
    assert run_json(capsys, [*opts, "retention", "sales.events", "--seconds", "PT1M"])["seconds"] == 60
    shown = run(capsys, [*opts, "retention", "sales.events"])
    assert re.search(r"^seconds\s+1 minute\s*$", shown, re.MULTILINE), shown
    assert run_json(capsys, [*opts, "vacuum", "--retention", "P7D", "--dry-run", "-q"])["dry_run"] is True
    since = pendulum.now().subtract(days=1).to_iso8601_string()
    assert run_json(capsys, [*opts, "vacuum", "--retention", since, "--dry-run", "-q"])["dry_run"] is True
    assert run_json(capsys, [*opts, "doctor", "--timeout", "PT5S"])["ok"] is True
    for args, option in ((["vacuum", "--retention", "a week"], "--retention"),
                         (["vacuum", "--retention", "2999-01-01"], "--retention"),
                         (["retention", "sales.events", "--seconds", since], "--seconds"),
                         (["doctor", "--timeout", "PT0S"], "--timeout")):
        assert main([*opts, *args]) == exit_codes.USAGE
        err = capsys.readouterr().err
        assert err.startswith("error: ") and option in err, err


def test_show_prints_iso_times_spans_and_the_lease_left(wh: Warehouse, opts: list[str],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    t = wh.begin(lease_seconds=600)
    t.append("sales.events", events([1]))
    as_json = run_json(capsys, [*opts, "show", t.tid])
    engine = wh.transaction_info(t.tid)  # the Python API: epoch seconds
    for name in ("created_at", "lease_deadline"):  # JSON: ISO 8601 in UTC, to the microsecond
        assert UTC_ISO.fullmatch(as_json[name]), as_json[name]
        assert datetime.fromisoformat(as_json[name]).timestamp() == pytest.approx(engine[name], abs=1e-6)
    assert as_json["ended_at"] is None and as_json["lease_seconds"] == 600  # spans stay numbers
    lines = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in run(capsys, [*opts, "show", t.tid])
                 .splitlines() if re.match(r"^(created_at|lease_seconds|lease_deadline)\s", line))
    assert ISO_8601.fullmatch(lines["created_at"]) and lines["lease_seconds"] == "10 minutes"
    deadline, left = lines["lease_deadline"].split(" ", 1)
    assert ISO_8601.fullmatch(deadline) and left.startswith("(in ") and left.endswith(")")
    assert abs(pendulum.parse(deadline).timestamp() - engine["lease_deadline"]) < 1
    listed = run(capsys, [*opts, "list"])
    assert t.tid in listed and ISO_8601.search(listed)
    [record] = run_json(capsys, [*opts, "list"])
    assert UTC_ISO.fullmatch(record["created_at"]) and record["ended_at"] is None
    t.rollback()
    assert "(in " not in run(capsys, [*opts, "show", t.tid])  # the lease matters to an active one only
    assert UTC_ISO.fullmatch(run_json(capsys, [*opts, "show", t.tid])["ended_at"])


def test_the_commit_log_in_json_has_utc_times(wh: Warehouse, opts: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with wh.begin() as t:
        t.append("sales.events", events([1]))
    [entry] = run_json(capsys, [*opts, "log"])
    assert entry["tid"] == t.tid and UTC_ISO.fullmatch(entry["committed_at"])
    assert datetime.fromisoformat(entry["committed_at"]).timestamp() == pytest.approx(
        wh.commit_log()[0]["committed_at"], abs=1e-6)
