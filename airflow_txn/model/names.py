"""Validation of every name a user passes (tables, columns, keys, labels) and safe path joining.

Invariant 10: nothing a user passes can address a file outside the table's directory or reach SQL
as text. Names are checked here against strict patterns; values never enter SQL except as bound
parameters; every path is built with `safe_join`, which refuses to leave its base directory.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from airflow_txn.errors import InvalidNameError

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SAFE_PATH_CHARS = re.compile(r"[A-Za-z0-9_\-]")
MAX_KEY_LENGTH = 512
MAX_LABEL_LENGTH = 1000
MAX_TAG_LENGTH = 128
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]*")
_MAX_ENCODED_VALUE = 96


@dataclass(frozen=True, slots=True)
class TableName:
    """A validated `namespace.table` name."""

    namespace: str
    table: str

    @property
    def qualified(self) -> str:
        return f"{self.namespace}.{self.table}"

    def __str__(self) -> str:
        return self.qualified


def parse_table_name(name: object) -> TableName:
    """Parse `namespace.table`; each part lower-case letters, digits and `_`, not starting with a digit."""
    if not isinstance(name, str):
        raise InvalidNameError(f"table name must be a string 'namespace.table', got {type(name).__name__}")
    parts = name.split(".")
    if len(parts) != 2 or not all(_IDENT.fullmatch(p) for p in parts):
        raise InvalidNameError(
            f"invalid table name {name!r}: use 'namespace.table', each part 1-63 characters of "
            "lower-case letters, digits and '_', not starting with a digit"
        )
    return TableName(parts[0], parts[1])


def check_column_name(name: object) -> str:
    """A column name usable in a partition path: non-empty text without NUL, '/', or '='."""
    if not isinstance(name, str) or not name or any(c in name for c in "\x00/=\\") or name in {".", ".."}:
        raise InvalidNameError(f"invalid column name {name!r}: non-empty, without NUL, '/', '\\' or '='")
    return name


def check_key(key: object) -> str | None:
    """A staging key (dag/task/map index in Airflow): None or printable text up to 512 characters."""
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise InvalidNameError(f"invalid staging key {key!r}: non-empty text up to {MAX_KEY_LENGTH} characters")
    return key


def check_label(label: object) -> str | None:
    """A transaction label: None or text up to 1000 characters without NUL."""
    if label is None:
        return None
    if not isinstance(label, str) or len(label) > MAX_LABEL_LENGTH or "\x00" in label:
        raise InvalidNameError(f"invalid label {label!r}: text up to {MAX_LABEL_LENGTH} characters, no NUL")
    return label


def check_tag_name(name: object) -> str:
    """A tag's name: 1-128 characters of letters, digits and `._:+-`, starting with a letter or digit
    (`month-end-2024-01`, `backfill-2024-01-31`, a rendered `backfill-{{ ts }}` too)."""
    if not isinstance(name, str) or len(name) > MAX_TAG_LENGTH or not _TAG.fullmatch(name):
        raise InvalidNameError(f"invalid tag name {name!r}: 1-{MAX_TAG_LENGTH} characters of letters, digits and "
                               "'._:+-', starting with a letter or digit (e.g. 'month-end-2024-01')")
    return name


def encode_path_value(value: str | None) -> str:
    """Encode a partition value as one safe path component (no '/', no '..', bounded length)."""
    if value is None:
        return "__null__"
    encoded = "".join(c if _SAFE_PATH_CHARS.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode()) for c in value)
    if len(encoded) > _MAX_ENCODED_VALUE or not encoded:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return f"h-{digest}" if encoded else "__empty__"
    return encoded


def check_path_length(path: Path, limit: int) -> None:
    """Refuse a path the filesystem cannot open (`limit`: PATH_MAX, counting the final NUL) before
    anything is created on the way to it, rather than fail half-way with ENAMETOOLONG."""
    length = len(os.fsencode(path))
    if length >= limit:
        raise InvalidNameError(
            f"the path {str(path)[:100]}... ({length} bytes) is longer than the filesystem allows ({limit} bytes "
            "with its final NUL, PATH_MAX): use fewer or shorter partition values, or a shorter storage root")


def check_components(*components: str) -> None:
    """Refuse a relative path component that could leave its base: empty, absolute, `.`/`..`, a NUL or a
    backslash. All an object store's keys need (no links there); local paths also go through safe_join."""
    for component in components:
        if not component or "\x00" in component or component.startswith("/") or "\\" in component:
            raise InvalidNameError(f"unsafe path component {component!r}")
        if any(piece in {"..", "."} for piece in component.split("/")):
            raise InvalidNameError(f"unsafe path component {component!r}")


def safe_join(base: Path, *components: str) -> Path:
    """Join components under base; refuse anything that would resolve outside base."""
    return safe_join_resolved(base, base.resolve(), *components)[0]


def safe_join_resolved(base: Path, resolved_base: Path, *components: str) -> tuple[Path, Path]:
    """`safe_join` for a caller that already holds `resolved_base` (= base.resolve(), e.g. cached for a
    table directory): the same checks, one realpath instead of two. Returns (path, path resolved)."""
    check_components(*components)
    path = base.joinpath(*components)
    resolved = _resolved_without_links(resolved_base, components)
    if resolved is None:  # a symbolic link below base: resolve it and check where it leads
        resolved = path.resolve()
        if resolved != resolved_base and resolved_base not in resolved.parents:
            raise InvalidNameError(f"path {path} escapes {base}")
    return path, resolved


def _resolved_without_links(resolved_base: Path, components: tuple[str, ...]) -> Path | None:
    """`resolved_base / components` when no existing entry below resolved_base on the way is a symbolic
    link (then that IS the resolved path, inside base: no '..' is left); None when one is. Looks at the
    new components only, where a full realpath looks at every directory from the root."""
    current = str(resolved_base)
    for piece in "/".join(components).split("/"):
        current = os.path.join(current, piece)
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):  # what does not exist is no link, nor anything below it
            break
        if stat.S_ISLNK(mode):
            return None
    return resolved_base.joinpath(*components)
