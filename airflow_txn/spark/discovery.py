"""Whether Spark's own partition discovery gives back exactly the partition values the catalog holds for parts.

Spark (PartitioningUtils.parsePartition, pyspark 4.3) walks up from the directory of each file it reads to the
read's `basePath`: every `name=value` directory is a partition column, and the walk stops at the first directory
without `=` above one with it (the `w-...` directory of a Spark write). The name, and the value of a string or
timestamp column, are unescaped by `unescapePathName`: each `%XX` becomes the character with code XX, so
the core's percent-encoded UTF-8 survives only for ASCII. `__HIVE_DEFAULT_PARTITION__` is null. The value is then
cast to the column's type in the read's schema: integers by Java's parseInt/parseLong, booleans by `toBoolean`,
dates and timestamps by Spark's cast of the text (a timestamp's text without an offset in the session's time
zone).

`discoverable_parts` answers yes for a part only when each of its values comes back exactly, whatever the
session's settings: the directory names parse to the table's partition columns in order, and each value's
text IS the catalog's canonical text (model/partitioning.py) in a form Spark's cast takes without guessing:
a string of what the unescaping gives back (not null, empty, hashed, non-ASCII in the core's layout, nor
Spark's null name), an integer (an unsigned one read as Spark's wider type), true/false, yyyy-MM-dd, or an
ISO timestamp with an offset when the column has a time zone and without one when it has none. Anything
else (a null, a Spark write's timestamp directory, which is in the writer's session time zone) answers no
for that part, and the caller joins its values on from the catalog instead; the other parts keep their
pruning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

import pyarrow as pa

from airflow_txn.core.adapter import PartView, TableView

SPARK_NULL = "__HIVE_DEFAULT_PARTITION__"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_INTEGER = re.compile(r"-?[0-9]+")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{6})?"
_ZONED = re.compile(_TIME + r"[+-][0-9]{2}:[0-9]{2}")
_LOCAL = re.compile(_TIME)
_INTEGER_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64())
"""Read by Spark as short, int, long, decimal(20,0) for the unsigned ones: each value of the column fits."""


def discoverable_parts(info: TableView, parts: Sequence[PartView]) -> list[bool]:
    """For each of `parts`, whether a read of it with Spark's partition discovery (basePath: the table's
    directory; the table's schema given) yields its partition values exactly as the catalog holds them. Each
    part is judged on its own: the parts answered no are read with their values joined on (frames.py)."""
    if not info.partition_by or len({n.lower() for n in info.schema.names}) != len(info.schema.names):
        return [False] * len(parts)  # Spark matches directory names to the schema ignoring case (caseSensitive)
    types = [info.schema.field(c).type for c in info.partition_by]
    checked: dict[tuple[str, str], bool] = {}
    found: list[bool] = []
    for part in parts:
        canonical = [part.partition.get(c) for c in info.partition_by]
        ok = True
        for name in part.files:
            directory = str(PurePosixPath(part.path, name).parent)
            key = (directory, part.partition_key)
            if key not in checked:
                pairs = directory_partition(directory)
                checked[key] = pairs is not None and [c for c, _ in pairs] == list(info.partition_by) and all(
                    reads_back(raw, text, t) for (_, raw), text, t in zip(pairs, canonical, types, strict=True))
            ok = ok and checked[key]
        found.append(ok)
    return found


def directory_partition(directory: str) -> list[tuple[str, str]] | None:
    """The (column, raw value) pairs Spark's discovery finds in `directory` (relative to the base path), outermost
    first, the column names unescaped; None where Spark finds no partition (a `_temporary` directory)."""
    found: list[tuple[str, str]] = []
    for name in reversed(PurePosixPath(directory).parts):
        if name.lower() == "_temporary":
            return None
        column, equals, raw = name.partition("=")
        if equals:
            found.append((unescape(column) or "", raw))
        elif found:
            break
    return found[::-1]


def unescape(text: str) -> str | None:
    """What Spark's unescapePathName makes of `text` where every `%` starts a %XX escape (two ASCII hex digits: the
    character with code XX); None for any other `%`, whose reading depends on Java's parseInt (neither writer's
    directory names hold one: both escape `%` itself)."""
    if text.count("%") != len(_ESCAPE.findall(text)):
        return None
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def reads_back(raw: str, canonical: str | None, arrow_type: pa.DataType) -> bool:
    """Whether Spark casts the directory value `raw` to exactly the partition value of canonical text `canonical`."""
    if canonical is None or raw == SPARK_NULL:
        return False
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return unescape(raw) == canonical
    if arrow_type in _INTEGER_TYPES:
        return raw == canonical and _INTEGER.fullmatch(raw) is not None
    if pa.types.is_boolean(arrow_type):
        return raw == canonical and raw in ("true", "false")
    if arrow_type in (pa.date32(), pa.date64()):
        return raw == canonical and _DATE.fullmatch(raw) is not None
    if pa.types.is_timestamp(arrow_type):  # a timestamp[ns] partition value is whole microseconds
        form = _ZONED if arrow_type.tz is not None else _LOCAL
        return unescape(raw) == canonical and form.fullmatch(canonical) is not None
    return False
