"""How the CLI prints results: JSON for scripts, rich tables for people (on stdout), messages on stderr.

Every command produces one JSON-able value; `emit` prints it as JSON (`--json`) or hands it to the
command's renderer. Renderers only format: they never query the warehouse. Times and spans of seconds
are written by cli/times.py: in tables ISO 8601 with the local zone and words; in JSON the moments
(epoch seconds in the result) become ISO 8601 in UTC (airflow_txn/model/moments.py) and spans stay numbers.
A part's creation CSN ROLLBACK_CSN (a withdrawn part: rolled back, or replaced by a retry) is no CSN: it is
written `withdrawn` in tables, and in JSON the part's `creation_csn` is null and its `withdrawn` true (every
part of `show` has `withdrawn`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from airflow_txn import environment
from airflow_txn.cli import times
from airflow_txn.model import moments
from airflow_txn.model.csn import ROLLBACK_CSN

if TYPE_CHECKING:  # only annotations: the result types load pyarrow, which printing a help never needs
    from airflow_txn.model.results import (
        AdoptionReport,
        CommitLogEntry,
        CompactionReport,
        DoctorReport,
        PartInfo,
        ReadResult,
        SchemaInfo,
        TableStats,
        TagInfo,
        TransactionInfo,
        TransactionRecord,
        VacuumReport,
    )

T = TypeVar("T")
Renderer = Callable[[Console, T], None]
"""Prints a command's result (of type T) for people."""

_TIME_FIELDS = moments.TIME_FIELDS
_DURATION_FIELDS = {"lease_seconds", "seconds"}
_CSN_FIELDS = {"creation_csn", "removal_csn"}
_BYTE_FIELDS = {"bytes", "bytes_freed", "size_bytes", "free_bytes", "target_file_bytes", "bytes_before", "bytes_after"}
_PIPE_WIDTH = 4096
"""Width of output that is not a terminal (a pipe, a file): wide enough that no cell is ever cut."""


def stdout_console() -> Console:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal and not environment.is_set(environment.COLUMNS):
        console.width = _PIPE_WIDTH
    return console


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def to_json(value: object) -> str:
    """The value as JSON, its moments (fields like created_at, in epoch seconds) as ISO 8601 in UTC, a withdrawn
    part's creation CSN null (module docstring)."""
    return json.dumps(moments.utc_times(_no_rollback_csn(value)), indent=2, default=str, ensure_ascii=False)


def _no_rollback_csn(value: object) -> object:
    """`value` with each part (a dict with `creation_csn`) saying whether it was withdrawn, ROLLBACK_CSN gone."""
    if isinstance(value, Mapping):
        out = {k: _no_rollback_csn(v) for k, v in value.items()}
        if "creation_csn" in out:
            withdrawn = out["creation_csn"] == ROLLBACK_CSN
            out["withdrawn"] = withdrawn
            if withdrawn:
                out["creation_csn"] = None
        return out
    if isinstance(value, list | tuple):
        return [_no_rollback_csn(v) for v in value]
    return value


# -- cell formatting ----------------------------------------------------------------------------------------
def fmt_bytes(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return fmt(value)
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def fmt_time(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return fmt(value)
    return times.moment(float(value))


def fmt_duration(value: object) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return fmt(value)
    return times.duration(float(value))


def fmt_csn(value: object) -> str:
    """A part's creation or removal CSN; ROLLBACK_CSN (rolled back, or withdrawn by a retry) as `withdrawn`."""
    return "withdrawn" if value == ROLLBACK_CSN else fmt(value)


def fmt_partition(partition: object) -> str:
    if isinstance(partition, Mapping):
        return "/".join(f"{k}={'null' if v is None else v}" for k, v in partition.items()) or "-"
    return fmt(partition)


def fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v) for v in value) or "-"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items()) or "-"
    return str(value)


def fmt_field(name: str, value: object) -> str:
    """A value formatted by what its field holds (epoch seconds, spans of seconds, byte counts, partitions)."""
    if name in _TIME_FIELDS:
        return fmt_time(value)
    if name in _DURATION_FIELDS:
        return fmt_duration(value)
    if name in _BYTE_FIELDS:
        return fmt_bytes(value)
    if name in _CSN_FIELDS:
        return fmt_csn(value)
    if name == "partition":
        return fmt_partition(value)
    if name == "metadata":  # a transaction's: JSON as it was recorded (nested objects stay readable)
        return json.dumps(value, sort_keys=True) if value else "-"
    return fmt(value)


# -- generic shapes ---------------------------------------------------------------------------------------------
def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A plain table; narrow terminals fold long cells (a tid is never cut short)."""
    out = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*(cell if isinstance(cell, Text) else Text(str(cell)) for cell in row))
    return out


def records(console: Console, rows: Sequence[Mapping[str, object]], columns: Sequence[str], empty: str,
            title: str | None = None) -> None:
    """A list of dicts as one table with the given columns (field names)."""
    if title:
        console.print(Text(title, style="bold"))
    if not rows:
        if empty:
            console.print(empty)
        return
    console.print(table(columns, ([fmt_field(c, r.get(c)) for c in columns] for r in rows)))


def mapping(console: Console, value: Mapping[str, object], title: str | None = None) -> None:
    """A dict as a two-column key/value grid (nested values flattened to one line)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for key, item in value.items():
        shown = f"{len(item)} item(s)" if isinstance(item, list) and len(item) > 20 else fmt_field(key, item)
        grid.add_row(Text(str(key)), Text(shown))
    if title:
        console.print(Text(title, style="bold underline"))
    console.print(grid)


# -- per-command renderers ---------------------------------------------------------------------------------------
def tables(console: Console, rows: Sequence[TableStats]) -> None:
    columns = ["table", "partition_by", "last_commit_csn", "parts", "rows", "bytes"]
    records(console, rows, columns, "no tables")


def transactions(console: Console, rows: Sequence[TransactionRecord]) -> None:
    shown = [{**r, "state": "committing" if r.get("commit_in_progress") else r.get("state")} for r in rows]
    columns = ["tid", "label", "state", "snapshot_csn", "commit_csn", "created_at", "ended_at"]
    records(console, shown, columns, "no transactions")


def transaction(console: Console, info: TransactionInfo) -> None:
    header = {k: v for k, v in info.items() if k not in {"parts", "tables"}}
    deadline = header.get("lease_deadline")
    if info.get("state") == "active" and isinstance(deadline, int | float):  # when recovery may roll it back
        header["lease_deadline"] = f"{fmt_time(deadline)} ({times.relative(deadline)})"
    mapping(console, header, title=f"transaction {info.get('tid')}")
    parts = info.get("parts") or []
    by_table: dict[str, list[PartInfo]] = {}
    for part in parts:
        by_table.setdefault(str(part["table"]), []).append(part)
    columns = ["partition", "path", "rows", "bytes", "role", "creation_csn", "removal_csn", "key"]
    for name, table_parts in sorted(by_table.items()):
        created = sum(1 for p in table_parts if p.get("role") == "created")
        total = sum(int(p.get("bytes") or 0) for p in table_parts if p.get("role") == "created")
        withdrawn = sum(1 for p in table_parts if p.get("role") == "created" and p.get("creation_csn") == ROLLBACK_CSN)
        of_them = f", {withdrawn} withdrawn" if withdrawn else ""
        title = (f"{name}: {created} part(s) written ({fmt_bytes(total)}{of_them}), "
                 f"{len(table_parts) - created} removed")
        console.print()
        records(console, table_parts, columns, "", title=title)
    if not parts:
        console.print("\nno parts")


def rows(console: Console, result: ReadResult) -> None:
    data = result["rows"]
    columns = list(data[0]) if data else []
    shown = len(data)
    at = f"tag {result['tag']} (CSN {result['csn']})" if "tag" in result else f"CSN {result['csn']}"
    console.print(Text(f"{result['table']} at {at}: {shown} of {result['num_rows']} row(s)", style="bold"))
    if data:
        console.print(table(columns, ([fmt(r.get(c)) for c in columns] for r in data)))


def commit_log(console: Console, rows: Sequence[CommitLogEntry]) -> None:
    records(console, rows, ["csn", "tid", "tables", "committed_at", "applied"], "no commits")


def tags(console: Console, rows: Sequence[TagInfo]) -> None:
    records(console, rows, ["name", "csn", "tables", "created_at", "note"], "no tags")


def doctor(console: Console, report: DoctorReport) -> None:
    styles = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}
    out = table(["check", "status", "detail", "hint"], [])
    for check in report["checks"]:
        status = Text(check["status"], style=styles.get(check["status"], ""))
        out.add_row(Text(check["name"]), status, Text(check["detail"]), Text(check.get("hint") or ""))
    console.print(out)
    failed = sum(1 for c in report["checks"] if c["status"] == "fail")
    warned = sum(1 for c in report["checks"] if c["status"] == "warn")
    if failed:
        console.print(Text(f"{failed} problem(s) found", style="bold red"))
    else:
        console.print(Text(f"healthy ({warned} warning(s))" if warned else "healthy", style="green"))


def compaction(console: Console, report: CompactionReport) -> None:
    mapping(console, {k: v for k, v in report.items() if k not in {"merges", "tids"}},
            title=f"compaction of {report.get('table')}")
    merges = report.get("merges") or []
    if merges:
        console.print()
        columns = [c for c in ("status", "tid", "partition", "sources", "rows", "bytes_before", "bytes_after", "reason")
                   if any(c in m for m in merges)]
        records(console, merges, columns, "")


_WOULD = {"parts_removed": "would remove parts", "orphan_dirs_removed": "would remove orphan dirs",
          "bytes_freed": "would free bytes", "manifests_removed": "would remove manifests",
          "manifests_refreshed": "would refresh manifests", "rows_purged": "would purge rows"}
"""vacuum --dry-run: the report's fields of what a vacuum does, as what it would do."""


def vacuum(console: Console, report: VacuumReport) -> None:
    """What vacuum removed; with --dry-run, what it would remove (nothing was deleted)."""
    if not report.get("dry_run"):
        mapping(console, report)
        return
    shown = {_WOULD.get(k, k): fmt_bytes(v) if k == "bytes_freed" else v for k, v in report.items()}
    mapping(console, shown, title="dry run: nothing was deleted")


def adoption(console: Console, report: AdoptionReport) -> None:
    """What adopt-root checked and whose the root was before."""
    before = ("no warehouse (no marker)" if report["previous_warehouse_id"] is None
              else f"warehouse {report['previous_warehouse_id']} (CSN {report['previous_csn']})")
    mapping(console, report, title=f"root adopted by warehouse {report['warehouse_id']}; it was {before}'s")


def published(console: Console, rows: Sequence[Mapping[str, object]]) -> None:
    keys = [k for k in ("iceberg_snapshot_id", "delta_version") if any(k in row for row in rows)] or [
        "iceberg_snapshot_id"]
    records(console, rows, ["table", "csn", *keys, "published_csn"], "nothing published")


def schema(console: Console, value: SchemaInfo) -> None:
    """`schema`: the table and its partitioning, then one line per column."""
    console.print(Text(f"{value['table']} (partitioned by {', '.join(value['partition_by']) or 'nothing'})",
                       style="bold underline"))
    records(console, cast("list[Mapping[str, object]]", value["columns"]),
            ["name", "type", "nullable", "column_id", "default"], "no columns")


def generic(console: Console, value: object) -> None:
    """Whatever a maintenance call returned: a dict as key/value lines, a list as a table."""
    if isinstance(value, Mapping):
        mapping(console, value)
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        records(console, value, list(value[0]), "")
    else:
        console.print(fmt(value))
