"""The checks of a write-audit-publish step: plain frozen dataclasses, each validated when it is built
(a DAG file's checks fail when the DAG is parsed, naming the check), each measuring ONE number with a
query over the transaction's view of its tables and passing when the number lies within its bounds.

    RowCountCheck("shop.orders", min=1)                          rows of the table
    NullCheck("shop.orders", "customer_id")                      rows where the column is NULL (max 0)
    UniqueCheck("shop.orders", ["order_id"])                     rows repeating a key already seen (max 0)
    PredicateCheck("shop.orders", "amount >= 0")                 rows where the predicate is false (max 0)
    ReferenceCheck("shop.orders", ["customer_id"], "shop.customers")   rows whose key has no referenced row

The SQL a check runs is built here from the views the engine made of the tables (`views`: table ->
view name) and the engine's quoting of identifiers; a PredicateCheck's predicate is the user's own SQL,
run as written (DuckDB's dialect, or Spark SQL's with engine="spark").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from airflow_txn.errors import InvalidArgumentError, InvalidNameError
from airflow_txn.model.names import parse_table_name

Quote = Callable[[str], str]
"""An engine's quoting of an identifier (a column or view name)."""


def _columns(value: object, what: str) -> tuple[str, ...]:
    """One column name or a non-empty list of them, as a tuple."""
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, Sequence) or not names or not all(isinstance(c, str) and c for c in names):
        raise InvalidArgumentError(f"{what} must be a column name or a non-empty list of them, got {value!r}")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"{what} names a column twice: {list(names)}")
    return tuple(names)


def _bound(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{what} must be a non-negative integer or None, got {value!r}")
    return value


@dataclass(frozen=True)
class Check:
    """What every check has: the table it measures, its bounds and its name (default: built from what it
    checks). Subclasses say what the number is (`kind`, `sql`)."""

    kind: ClassVar[str] = "check"
    table: str
    min: int | None = field(default=None, kw_only=True)
    max: int | None = field(default=None, kw_only=True)
    name: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        try:
            self._validate()
        except (InvalidArgumentError, InvalidNameError) as exc:
            raise type(exc)(f"check {self.label}: {exc}") from exc

    def _validate(self) -> None:
        parse_table_name(self.table)
        _bound(self.min, "min")
        _bound(self.max, "max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise InvalidArgumentError(f"min {self.min} is above max {self.max}")
        if self.name is not None and (not isinstance(self.name, str) or not self.name.strip()):
            raise InvalidArgumentError(f"name must be non-empty text, got {self.name!r}")

    @property
    def label(self) -> str:
        """The check's name as reports show it: `name`, else one built from what it checks."""
        return self.name if isinstance(self.name, str) and self.name.strip() else self.default_name()

    def default_name(self) -> str:
        return f"{self.kind}({self.table})"

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables the check reads."""
        return (self.table,)

    def columns_read(self) -> dict[str, tuple[str, ...]]:
        """{table: the columns the check names}: checked against the tables' schemas before anything runs."""
        return {self.table: ()}

    def sql(self, views: Mapping[str, str], quote: Quote) -> str:
        """The query whose single value is the number checked."""
        raise NotImplementedError

    def holds(self, value: int) -> bool:
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)


@dataclass(frozen=True)
class RowCountCheck(Check):
    """The number of rows of `table` lies in [min, max] (give at least one of them)."""

    kind: ClassVar[str] = "row_count"

    def _validate(self) -> None:
        super()._validate()
        if self.min is None and self.max is None:
            raise InvalidArgumentError("give min or max (or both): a row count with no bound always passes")

    def sql(self, views: Mapping[str, str], quote: Quote) -> str:
        return f"SELECT COUNT(*) FROM {quote(views[self.table])}"  # noqa: S608 - views and quoted names only


@dataclass(frozen=True)
class _OffendingRows(Check):
    """A check counting offending rows: at most `max` of them (default 0)."""

    max: int | None = field(default=0, kw_only=True)


@dataclass(frozen=True)
class NullCheck(_OffendingRows):
    """At most `max` (default 0) rows of `table` have `column` NULL."""

    kind: ClassVar[str] = "nulls"
    column: str

    def _validate(self) -> None:
        super()._validate()
        if not isinstance(self.column, str) or not self.column:
            raise InvalidArgumentError(f"column must be one column name, got {self.column!r}")

    def default_name(self) -> str:
        return f"nulls({self.table}.{self.column})"

    def columns_read(self) -> dict[str, tuple[str, ...]]:
        return {self.table: (self.column,)}

    def sql(self, views: Mapping[str, str], quote: Quote) -> str:
        return f"SELECT COUNT(*) FROM {quote(views[self.table])} WHERE {quote(self.column)} IS NULL"  # noqa: S608


@dataclass(frozen=True)
class UniqueCheck(_OffendingRows):
    """At most `max` (default 0) rows of `table` repeat a key (`columns`: one column or several) another
    row holds: the rows minus the distinct keys. A key with a NULL counts like any other value."""

    kind: ClassVar[str] = "unique"
    columns: str | Sequence[str]

    def _validate(self) -> None:
        super()._validate()
        object.__setattr__(self, "columns", _columns(self.columns, "columns"))

    @property
    def key(self) -> tuple[str, ...]:
        return _columns(self.columns, "columns")

    def default_name(self) -> str:
        return f"unique({self.table}: {', '.join(_names(self.columns))})"

    def columns_read(self) -> dict[str, tuple[str, ...]]:
        return {self.table: self.key}

    def sql(self, views: Mapping[str, str], quote: Quote) -> str:
        key = ", ".join(quote(c) for c in self.key)
        groups = f"SELECT COUNT(*) AS n FROM {quote(views[self.table])} GROUP BY {key}"  # noqa: S608
        return f"SELECT COALESCE(SUM(n - 1), 0) FROM ({groups}) AS g"  # noqa: S608


@dataclass(frozen=True)
class PredicateCheck(_OffendingRows):
    """At most `max` (default 0) rows of `table` break `predicate`, an SQL condition on its columns
    (`amount >= 0 AND qty BETWEEN 1 AND 99`): rows where it is false. As in an SQL CHECK constraint, a
    row where it is NULL (unknown) does not break it."""

    kind: ClassVar[str] = "predicate"
    predicate: str

    def _validate(self) -> None:
        super()._validate()
        if not isinstance(self.predicate, str) or not self.predicate.strip():
            raise InvalidArgumentError(f"predicate must be an SQL condition, got {self.predicate!r}")
        if ";" in self.predicate:
            raise InvalidArgumentError(f"predicate must be one SQL condition, without ';': {self.predicate!r}")

    def default_name(self) -> str:
        return f"predicate({self.table}: {self.predicate})"

    def sql(self, views: Mapping[str, str], quote: Quote) -> str:
        return f"SELECT COUNT(*) FROM {quote(views[self.table])} WHERE NOT ({self.predicate})"  # noqa: S608


@dataclass(frozen=True)
class ReferenceCheck(_OffendingRows):
    """Referential integrity between two tables of the transaction: at most `max` (default 0) rows of
    `table` have a key (`columns`, none of it NULL) that no row of `references` holds in
    `referenced_columns` (default: the same names). A row with a NULL in its key references nothing and
    is not counted (add a NullCheck for that)."""

    kind: ClassVar[str] = "references"
    columns: str | Sequence[str]
    references: str
    referenced_columns: str | Sequence[str] | None = None

    def _validate(self) -> None:
        super()._validate()
        parse_table_name(self.references)
        key = _columns(self.columns, "columns")
        referenced = key if self.referenced_columns is None else _columns(self.referenced_columns,
                                                                          "referenced_columns")
        if len(referenced) != len(key):
            raise InvalidArgumentError(f"columns {list(key)} and referenced_columns {list(referenced)} "
                                       "differ in length")
        object.__setattr__(self, "columns", key)
        object.__setattr__(self, "referenced_columns", referenced)

    @property
    def key(self) -> tuple[str, ...]:
        return _columns(self.columns, "columns")

    @property
    def referenced(self) -> tuple[str, ...]:
        return self.key if self.referenced_columns is None else _columns(self.referenced_columns, "referenced")

    def default_name(self) -> str:
        return f"references({self.table}: {', '.join(_names(self.columns))} -> {self.references})"

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.table, self.references)))

    def columns_read(self) -> dict[str, tuple[str, ...]]:
        if self.references == self.table:
            return {self.table: tuple(dict.fromkeys((*self.key, *self.referenced)))}
        return {self.table: self.key, self.references: self.referenced}

    def sql(self, views: Mapping[str, str], quote: Quote) -> str:
        child, parent = quote(views[self.table]), quote(views[self.references])
        present = " AND ".join(f"c.{quote(c)} IS NOT NULL" for c in self.key)
        joined = " AND ".join(f"p.{quote(r)} = c.{quote(c)}" for c, r in zip(self.key, self.referenced, strict=True))
        return (f"SELECT COUNT(*) FROM {child} AS c WHERE {present} "  # noqa: S608 - views and quoted names only
                f"AND NOT EXISTS (SELECT 1 FROM {parent} AS p WHERE {joined})")


def _names(value: object) -> list[str]:
    """Column names for a default check name, whatever was given (validation reports what is wrong)."""
    return [value] if isinstance(value, str) else [str(v) for v in value] if isinstance(value, Sequence) else [
        repr(value)]


CHECK_TYPES = (RowCountCheck, NullCheck, UniqueCheck, PredicateCheck, ReferenceCheck)


def check_list(checks: object) -> list[Check]:
    """`checks` as a list of checks with distinct names: InvalidArgumentError naming the first item that is
    no check (a dict, a string) or the name two checks share."""
    if isinstance(checks, Check):
        checks = [checks]
    if isinstance(checks, str | bytes | Mapping) or not isinstance(checks, Sequence):
        raise InvalidArgumentError(f"checks must be a list of checks (airflow_txn.checks), got {checks!r}")
    if not checks:
        raise InvalidArgumentError("checks is empty: give at least one check")
    seen: set[str] = set()
    for position, check in enumerate(checks):
        if not isinstance(check, Check) or type(check).sql is Check.sql:
            kinds = ", ".join(t.__name__ for t in CHECK_TYPES)
            raise InvalidArgumentError(f"checks[{position}] is {check!r}, not a check ({kinds})")
        if check.label in seen:
            raise InvalidArgumentError(f"two checks are named {check.label!r}: give one of them another name=")
        seen.add(check.label)
    return list(checks)
