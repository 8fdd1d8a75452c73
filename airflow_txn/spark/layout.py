"""Spark's files in a write dir: finding its partition leaf dirs and decoding their names.

Spark's `partitionBy` writes `<col>=<value>` directories, one level per partition column, whose
names are escaped Hive-style (`%XX` for `/`, `=`, `:`, `%` and a few more) and whose null value is
`__HIVE_DEFAULT_PARTITION__`. Dates are `yyyy-MM-dd`, timestamps `yyyy-MM-dd HH:mm:ss[.ffffff]` in
the session time zone. Each leaf becomes one part; its partition is stored in the catalog as the
canonical text of `partitioning.value_to_text`, so a part staged by Spark and one staged by the core
for the same value land in the same partition. Nothing here touches the catalog or Spark.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_txn.core.adapter import WrittenPart
from airflow_txn.errors import SchemaMismatchError, StorageError
from airflow_txn.model.partitioning import Partition, normalize_partitions, value_to_text

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_SPARK_TIMESTAMP = re.compile(r"(\d{4,}-\d{2}-\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_FIXED_OFFSET = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?")
_UTC_NAMES = {"UTC", "Z", "GMT", "UT", "Etc/UTC", "Etc/GMT", "Etc/UCT", "UCT", "Etc/Universal", "Etc/Zulu"}


@dataclass(frozen=True, slots=True)
class Leaf:
    """One partition directory Spark wrote: its path below the write dir and its data files."""

    relative: str  # "" for an unpartitioned table
    names: tuple[str, ...]  # the raw `<col>=<value>` directory names, one per partition column
    files: tuple[str, ...]


def unescape(name: str) -> str:
    """Undo Spark's path escaping (ExternalCatalogUtils.escapePathName)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)


def fixed_zone(zone_id: str) -> dt.tzinfo | None:
    """The tzinfo of a Spark session time zone id if it has one fixed offset (no daylight saving)."""
    if zone_id in _UTC_NAMES:
        return dt.UTC
    match = _FIXED_OFFSET.fullmatch(zone_id)
    if match is None:
        return None
    sign = -1 if match.group(1) == "-" else 1
    return dt.timezone(sign * dt.timedelta(hours=int(match.group(2)), minutes=int(match.group(3) or 0)))


def zoned_partitions(schema: pa.Schema, partition_by: Sequence[str]) -> list[str]:
    """The partition columns that are timestamps with a time zone."""
    return [c for c in partition_by if pa.types.is_timestamp(schema.field(c).type) and schema.field(c).type.tz]


def check_zone(zone_id: str, schema: pa.Schema, partition_by: Sequence[str]) -> dt.tzinfo | None:
    """The zone to decode timestamp partition values in; refuse zones whose local times repeat."""
    zoned = zoned_partitions(schema, partition_by)
    if not zoned:
        return None
    zone = fixed_zone(zone_id)
    if zone is None:
        raise SchemaMismatchError(
            f"partition column {zoned[0]!r} is a timestamp with time zone, which Spark names directories "
            f"by in the session time zone {zone_id!r}; local times repeat there when clocks go back, so "
            "set spark.sql.session.timeZone to UTC (or a fixed offset such as +02:00) for this write"
        )
    return zone


def decode_partition(names: Sequence[str], schema: pa.Schema, partition_by: Sequence[str],
                     zone: dt.tzinfo | None) -> Partition:
    """The canonical partition of a leaf from its `<col>=<value>` directory names."""
    if len(names) != len(partition_by):
        raise StorageError(f"partition directories {list(names)} do not match the columns {list(partition_by)}")
    raw: dict[str, str | None] = {}
    for name, column in zip(names, partition_by, strict=True):
        key, sep, value = name.partition("=")
        if not sep or unescape(key) != column:
            raise StorageError(f"unexpected directory {name!r} where Spark writes {column}=<value>")
        arrow_type = schema.field(column).type
        text = None if value == HIVE_NULL else unescape(value)
        raw[column] = _timestamp_text(text, arrow_type, zone) if pa.types.is_timestamp(arrow_type) else text
    return normalize_partitions([raw], schema, partition_by)[0] if partition_by else {}


def _timestamp_text(text: str | None, arrow_type: pa.DataType, zone: dt.tzinfo | None) -> str | None:
    if text is None:
        return None
    match = _SPARK_TIMESTAMP.fullmatch(text)
    if match is None:
        raise StorageError(f"cannot read the timestamp partition value {text!r}")
    day, hour, minute, second, fraction = match.groups()
    local = dt.datetime.combine(dt.date.fromisoformat(day),
                                dt.time(int(hour), int(minute), int(second), int((fraction or "0").ljust(6, "0")[:6])))
    if arrow_type.tz is None:
        return value_to_text(local)
    instant = local.replace(tzinfo=zone or dt.UTC).astimezone(dt.UTC)
    return value_to_text(pa.scalar(instant, arrow_type).as_py())


def leaves(write_dir: Path, depth: int) -> list[Leaf]:
    """Every leaf directory `depth` levels below `write_dir` with its data files (hidden files skipped)."""
    found: list[Leaf] = []
    _walk(write_dir, (), depth, found)
    return found


def _walk(current: Path, names: tuple[str, ...], depth: int, found: list[Leaf]) -> None:
    entries = sorted(os.scandir(current), key=lambda e: e.name)
    if depth == 0:
        files = tuple(e.name for e in entries if e.is_file() and not _hidden(e.name))
        found.append(Leaf("/".join(names), names, files))
        return
    for entry in entries:
        if _hidden(entry.name):
            continue
        if not entry.is_dir():
            raise StorageError(f"unexpected file {entry.path} between Spark's partition directories")
        _walk(Path(entry.path), (*names, entry.name), depth - 1, found)


def _hidden(name: str) -> bool:
    """Spark's and Hadoop's bookkeeping files (`_SUCCESS`, `.crc` checksums, the sidecar)."""
    return name.startswith(("_", "."))


def footer_rows(paths: Sequence[Path]) -> list[int]:
    """Row counts from the Parquet footers, read in parallel threads (no data is read)."""
    if len(paths) <= 4:
        return [_rows(p) for p in paths]
    with ThreadPoolExecutor(max_workers=min(16, len(paths))) as pool:
        return list(pool.map(_rows, paths))


def _rows(path: Path) -> int:
    try:
        return int(pq.read_metadata(path).num_rows)
    except (OSError, pa.ArrowInvalid) as exc:
        raise StorageError(f"Spark wrote {path}, but its Parquet footer is unreadable: {exc}") from exc


def written_parts(write_dir: Path, write_rel: str, schema: pa.Schema, partition_by: Sequence[str],
                  zone: dt.tzinfo | None) -> list[tuple[Partition, WrittenPart]]:
    """The parts of a finished Spark write: one per leaf holding rows; empty files are deleted."""
    found = leaves(write_dir, len(partition_by))
    paths = [write_dir / leaf.relative / name for leaf in found for name in leaf.files]
    counts = dict(zip(paths, footer_rows(paths), strict=True))
    parts: list[tuple[Partition, WrittenPart]] = []
    for leaf in found:
        base = write_dir / leaf.relative
        for name in leaf.files:
            if counts[base / name] == 0:
                (base / name).unlink()
        files = tuple(n for n in leaf.files if counts[base / n] > 0)
        if not files:
            if leaf.relative:
                shutil.rmtree(base, ignore_errors=True)
            continue
        rows = sum(counts[base / n] for n in files)
        size = sum((base / n).stat().st_size for n in files)
        path = f"{write_rel}/{leaf.relative}" if leaf.relative else write_rel
        partition = decode_partition(leaf.names, schema, partition_by, zone)
        parts.append((partition, WrittenPart(path, files, rows, size)))
    return parts
