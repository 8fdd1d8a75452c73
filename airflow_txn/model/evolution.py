"""Schema evolution as pure functions on Arrow schemas (docs/DESIGN.md, "A table's schema is versioned like a
part"): column ids, the changes a transaction may make to a table's schema, whether a change is compatible with
concurrent writers, and the projection that reads a part written under one version of a schema as another.

- **Column ids.** Every field of a table's schema, nested ones included, carries an id in its Arrow metadata
  under `PARQUET:field_id`, the key pyarrow writes as the Parquet field id (what Iceberg and Spark's
  `spark.sql.parquet.fieldId.read.enabled` match columns by). Ids are given when a table is created
  (`with_ids`), in Iceberg's order of fresh ids (a struct's fields, then their children in turn), a new column
  takes the next one, and the schema's metadata keeps the highest id ever given (`airflow_txn.last_column_id`),
  so a dropped column's id is never given again.
- **Changes** (`add_column`, `rename_column`, `drop_column`, `alter_column`, `set_nullable`) each return the new
  schema and a `Change` saying whether it is *compatible*: a part written under the old schema reads under the
  new one with the same meaning, so concurrent writers of the old schema may still commit (an added nullable or
  defaulted column, a widened type, a relaxed NOT NULL). A drop, a rename or a tightened NOT NULL is not.
  Partition columns cannot be dropped, renamed, added or retyped (their values name the part's directory).
  Each refusal is a typed error naming the table, the column and what to do instead, before anything is staged.
- **Merging a data schema** (`merge_schema`): the changes a write of data of another schema needs (its new columns
  added nullable, the columns it holds wider widened), decided here for every writer that merges (the core's
  `merge_schema=True`, Spark's), which then stage them.
- **Reading** (`projection`): a part written under schema `written` is read as schema `read` by column id: a
  renamed column takes its new name, a widened one is cast, a column added since is null or its default, a
  dropped one is not read. Nothing is rewritten.

Nothing here touches the catalog or storage: the catalog keeps the versions, the readers apply projections.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn.errors import InvalidArgumentError, InvalidNameError, SchemaMismatchError
from airflow_txn.model.names import check_column_name
from airflow_txn.model.types import check_column_type

COLUMN_ID = b"PARQUET:field_id"
"""A field's column id, as Arrow field metadata: the key pyarrow's Parquet writer turns into the field id."""
LAST_ID = b"airflow_txn.last_column_id"
"""Schema metadata: the highest column id the table ever gave (ids are never given twice)."""
DEFAULT = b"airflow_txn.default"
"""Field metadata: a column's default (what parts written before it was added read as), a one-value Arrow IPC
stream, base64."""

ChangeKind = Literal["add_column", "rename_column", "drop_column", "alter_column", "set_nullable"]


@dataclass(frozen=True, slots=True)
class Change:
    """One schema change: what it did, to which column, and whether it is compatible (see the module doc)."""

    kind: ChangeKind
    column: str
    detail: str
    compatible: bool


# -- column ids ------------------------------------------------------------------------------------------------
def column_id(field: pa.Field) -> int | None:
    """The field's column id, None when it has none."""
    raw = (field.metadata or {}).get(COLUMN_ID)
    return None if raw is None else int(raw)


def last_id(schema: pa.Schema) -> int:
    """The highest column id the schema's table ever gave (0: none yet)."""
    raw = (schema.metadata or {}).get(LAST_ID)
    given = max(_all_ids(schema), default=0)
    return max(given, int(raw) if raw is not None else 0)


def with_ids(schema: pa.Schema, fresh: bool = False) -> pa.Schema:
    """`schema` with a column id on every field (nested ones too) that has none, given in schema order after
    `last_id`. `fresh`: drop every id first and number from 1 (a new table: ids a user's schema carried, e.g.
    from another table's Parquet file, mean nothing here)."""
    if fresh:
        schema = pa.schema([_strip_ids(f) for f in schema], metadata=_without(schema.metadata, LAST_ID))
    counter = [last_id(schema)]
    fields = _give_ids(list(schema), counter)
    return pa.schema(fields, metadata={**(schema.metadata or {}), LAST_ID: str(counter[0]).encode()})


def continued(schema: pa.Schema, after: int) -> pa.Schema:
    """`schema` numbered afresh after id `after`, in the order `with_ids` gives: a table created again in its row (a
    dropped table's name, or one whose creation rolled back) continues its ids, never reusing one (docs/DESIGN.md,
    D27)."""
    stripped = pa.schema([_strip_ids(f) for f in schema],
                         metadata={**_without(schema.metadata, LAST_ID), LAST_ID: str(after).encode()})
    return with_ids(stripped)


def _give_ids(fields: list[pa.Field], counter: list[int]) -> list[pa.Field]:
    """Ids for `fields` (one struct's, or the schema's) in Iceberg's order of fresh ids: every field of the struct
    first, then the children of each in turn (a list's element, a map's key and value, a struct's fields), so a
    table's ids are those Iceberg gives its published table (publish/iceberg.py: assign_fresh_schema_ids), and an
    Iceberg reader, which matches a file's columns by field id, reads them as named."""
    numbered = []
    for field in fields:
        if column_id(field) is None:
            counter[0] += 1
            field = field.with_metadata({**(field.metadata or {}), COLUMN_ID: str(counter[0]).encode()})
        numbered.append(field)
    return [field.with_type(_with_children(field.type, counter)) for field in numbered]


def _with_children(type_: pa.DataType, counter: list[int]) -> pa.DataType:
    children = _children(type_)
    if not children:
        return type_
    done = iter(_give_ids(children, counter))
    return _nested(type_, lambda _child: next(done))


def _strip_ids(field: pa.Field) -> pa.Field:
    metadata = _without(field.metadata, COLUMN_ID)
    return pa.field(field.name, _nested(field.type, _strip_ids), field.nullable, metadata or None)


def _nested(type_: pa.DataType, each: Callable[[pa.Field], pa.Field]) -> pa.DataType:
    """`type_` with `each` applied to its child fields (struct fields, list and map items)."""
    if pa.types.is_struct(type_):
        return pa.struct([each(type_.field(i)) for i in range(type_.num_fields)])
    if pa.types.is_map(type_):
        return pa.map_(each(type_.key_field), each(type_.item_field), type_.keys_sorted)
    if pa.types.is_large_list(type_):
        return pa.large_list(each(type_.value_field))
    if pa.types.is_fixed_size_list(type_):
        return pa.list_(each(type_.value_field), type_.list_size)
    if pa.types.is_list(type_):
        return pa.list_(each(type_.value_field))
    return type_


def _children(type_: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(type_):
        return [type_.field(i) for i in range(type_.num_fields)]
    if pa.types.is_map(type_):
        return [type_.key_field, type_.item_field]
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        return [type_.value_field]
    return []


def _all_ids(schema: pa.Schema) -> Iterator[int]:
    def walk(field: pa.Field) -> Iterator[int]:
        found = column_id(field)
        if found is not None:
            yield found
        for child in _children(field.type):
            yield from walk(child)

    for field in schema:
        yield from walk(field)


def _without(metadata: dict[bytes, bytes] | None, key: bytes) -> dict[bytes, bytes]:
    return {k: v for k, v in (metadata or {}).items() if k != key}


# -- changes ---------------------------------------------------------------------------------------------------
def add_column(schema: pa.Schema, field: object, default: object = None, *, table: str,
               partition_by: Sequence[str] = ()) -> tuple[pa.Schema, Change]:
    """Add `field` as the last column: nullable, or NOT NULL with a `default` that parts written before read as
    (a default on a nullable column is allowed too). Compatible."""
    del partition_by  # a new column is never a partition column: the parts' directories could not say its value
    if not isinstance(field, pa.Field):
        raise SchemaMismatchError(f"add_column to {table} takes a pyarrow.Field, got {type(field).__name__}")
    name = check_column_name(field.name)
    if name in schema.names:
        raise SchemaMismatchError(f"{table} has a column {name!r} already")
    check_column_type(name, field.type, table)
    value: pa.Scalar | None = None
    if default is not None:
        try:
            value = default if isinstance(default, pa.Scalar) else pa.scalar(default)
            value = value.cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as exc:
            raise SchemaMismatchError(f"the default {default!r} of column {name!r} of {table} is not a "
                                      f"{field.type}: {exc}") from exc
        if not value.is_valid:
            value = None
    if not field.nullable and value is None:
        raise SchemaMismatchError(f"column {name!r} added to {table} is NOT NULL, so it needs a default: the rows "
                                  "written before have no value for it (give default=..., or add it nullable)")
    metadata = _without(_without(field.metadata, COLUMN_ID), DEFAULT)
    if value is not None:
        metadata[DEFAULT] = _encode_default(value)
    new_field = pa.field(name, _nested(field.type, _strip_ids), field.nullable, metadata or None)
    evolved = with_ids(schema.append(new_field))
    detail = f"added column {name!r} {field.type}" + (f" default {value.as_py()!r}" if value is not None else "")
    return evolved, Change("add_column", name, detail, compatible=True)


def rename_column(schema: pa.Schema, old: str, new: object, *, table: str,
                  partition_by: Sequence[str] = ()) -> tuple[pa.Schema, Change]:
    """Rename a column (its id stays: parts written before read it under the new name). Not compatible: a
    concurrent writer's rows would land under a name it did not write."""
    index = _index(schema, old, table)
    if old in partition_by:
        raise SchemaMismatchError(f"{old!r} is a partition column of {table}: its name is in every part's "
                                  "directory, so it cannot be renamed (create a new table and copy the rows)")
    name = check_column_name(new)
    if name == old:
        raise InvalidNameError(f"rename_column of {table}: {old!r} has that name already")
    if name in schema.names:
        raise SchemaMismatchError(f"{table} has a column {name!r} already")
    evolved = schema.set(index, schema.field(index).with_name(name))
    return evolved, Change("rename_column", old, f"renamed column {old!r} to {name!r}", compatible=False)


def drop_column(schema: pa.Schema, name: str, *, table: str,
                partition_by: Sequence[str] = ()) -> tuple[pa.Schema, Change]:
    """Drop a column: parts keep its values unread (time travel still reads them). Not compatible."""
    index = _index(schema, name, table)
    if name in partition_by:
        raise SchemaMismatchError(f"{name!r} is a partition column of {table}: it cannot be dropped")
    if len(schema) - 1 <= len(partition_by):
        raise SchemaMismatchError(f"{table} needs at least one column that is not a partition column: "
                                  f"{name!r} is its last one")
    evolved = schema.remove(index)
    evolved = evolved.with_metadata({**(evolved.metadata or {}), LAST_ID: str(last_id(schema)).encode()})
    return evolved, Change("drop_column", name, f"dropped column {name!r}", compatible=False)


def alter_column(schema: pa.Schema, name: str, type_: object, *, table: str,
                 partition_by: Sequence[str] = ()) -> tuple[pa.Schema, Change]:
    """Widen a column's type (is_widening: every value of the old type is a value of the new one). Compatible."""
    index = _index(schema, name, table)
    if not isinstance(type_, pa.DataType):
        raise SchemaMismatchError(f"alter_column of {table} takes a pyarrow.DataType, got {type(type_).__name__}")
    old = schema.field(index)
    if name in partition_by:
        raise SchemaMismatchError(f"{name!r} is a partition column of {table}: its type cannot change")
    if old.type == type_:
        raise SchemaMismatchError(f"column {name!r} of {table} is {type_} already")
    if not is_widening(old.type, type_):
        raise SchemaMismatchError(f"column {name!r} of {table} cannot change from {old.type} to {type_}: only a "
                                  "widening keeps every value (int8 -> int16 -> int32 -> int64, uint to a wider "
                                  "int or uint, float32 -> float64, decimal to more precision at the same scale, "
                                  "date32 -> timestamp[s|ms|us], string -> large_string, binary -> large_binary); "
                                  "to narrow, add a new column and copy the values")
    evolved = schema.set(index, old.with_type(type_))
    return evolved, Change("alter_column", name, f"widened column {name!r} from {old.type} to {type_}",
                           compatible=True)


def set_nullable(schema: pa.Schema, name: str, nullable: bool, *, table: str,
                 partition_by: Sequence[str] = ()) -> tuple[pa.Schema, Change]:
    """Allow nulls in a column (compatible), or forbid them (not compatible: the caller must check that no
    visible row holds a null before it commits the change)."""
    del partition_by
    index = _index(schema, name, table)
    old = schema.field(index)
    if old.nullable == bool(nullable):
        raise SchemaMismatchError(f"column {name!r} of {table} is {'nullable' if nullable else 'NOT NULL'} already")
    evolved = schema.set(index, old.with_nullable(bool(nullable)))
    what = "allowed nulls in" if nullable else "forbade nulls in"
    return evolved, Change("set_nullable", name, f"{what} column {name!r}", compatible=bool(nullable))


@dataclass(frozen=True, slots=True)
class SchemaMerge:
    """What writing data of another schema into a table needs (merge_schema): the table's schema once merged, and
    the changes that make it (each compatible: an added nullable column, a widening)."""

    schema: pa.Schema
    changes: tuple[Change, ...]

    @property
    def detail(self) -> str:
        """The changes, as a version of the schema records them."""
        return "; ".join(change.detail for change in self.changes)


def merge_flag(value: object) -> bool:
    """A writer's merge_schema flag: InvalidArgumentError unless True or False."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"merge_schema must be True or False, got {value!r}")
    return value


def merge_schema(schema: pa.Schema, data: object, *, table: str, partition_by: Sequence[str] = (),
                 fits: Callable[[str, pa.DataType], bool] | None = None) -> SchemaMerge:
    """The changes a write of data of schema `data` into a table of `schema` needs, decided here for every writer
    (the core's merge_schema=True, Spark's merge_schema and the data source's mergeSchema): each column of the data
    the table lacks is added (nullable, the data's type; add_column), each column the data holds in a type the
    table's column does not take but a widening of it is (is_widening) is widened (alter_column). `fits(name, table
    type)`: whether the data's column `name` is written into a column of that type as it is (None: the same type;
    an engine whose types are not Arrow's says). Refused before anything is staged, naming the column: a narrowing
    (SchemaMismatchError: a column is widened, never narrowed), a type no widening reaches, a partition column to
    widen, a new column of a type no table may hold (UnsupportedTypeError), duplicate names. A column of the table
    the data lacks is no change: the write itself refuses it."""
    if not isinstance(data, pa.Schema):
        raise SchemaMismatchError(f"merge_schema into {table} takes the data's pyarrow.Schema, got "
                                  f"{type(data).__name__}")
    if len(set(data.names)) != len(data.names):
        raise SchemaMismatchError(f"merge_schema into {table}: the data has duplicate column names {data.names}")
    fit = fits or (lambda name, type_: data.field(name).type == type_)
    merged, changes, problems = schema, [], []
    for field in data:
        if field.name not in merged.names:
            merged, change = add_column(merged, pa.field(field.name, field.type, True), table=table,
                                        partition_by=partition_by)
            changes.append(change)
            continue
        current = merged.field(field.name).type
        if fit(field.name, current):
            continue
        if is_widening(current, field.type):
            merged, change = alter_column(merged, field.name, field.type, table=table, partition_by=partition_by)
            changes.append(change)
        elif is_widening(field.type, current):
            problems.append(f"column {field.name!r} of {table} is {current} and the data holds {field.type}: "
                            f"merge_schema widens a column, it never narrows one (cast the data to {current})")
        else:
            problems.append(f"column {field.name!r} of {table} is {current} and the data holds {field.type}, which "
                            f"no widening of {current} reaches (alter_column lists the widenings; to change the type, "
                            "add a new column and copy the values)")
    if problems:
        raise SchemaMismatchError("; ".join(problems) + ". Nothing was staged")
    return SchemaMerge(merged, tuple(changes))


def _index(schema: pa.Schema, name: object, table: str) -> int:
    if not isinstance(name, str) or name not in schema.names:
        raise SchemaMismatchError(f"{table} has no column {name!r} (its columns: {', '.join(schema.names)})")
    return int(schema.get_field_index(name))


_SIGNED = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
_UNSIGNED = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


def is_widening(old: pa.DataType, new: pa.DataType) -> bool:
    """True when every value of `old` is a value of `new`, exactly (the widenings the module doc lists)."""
    if old in _SIGNED and new in _SIGNED:
        return _SIGNED.index(new) > _SIGNED.index(old)
    if old in _UNSIGNED and new in _UNSIGNED:
        return _UNSIGNED.index(new) > _UNSIGNED.index(old)
    if old in _UNSIGNED and new in _SIGNED:  # uint8 fits int16, ..., uint32 fits int64
        return bool(new.bit_width > old.bit_width)
    if old == pa.float32() and new == pa.float64():
        return True
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return bool(new.scale == old.scale and new.precision > old.precision)
    if old == pa.date32() and pa.types.is_timestamp(new):
        return new.unit in ("s", "ms", "us") and new.tz is None  # ns cannot hold years past 2262
    return (old, new) in ((pa.string(), pa.large_string()), (pa.binary(), pa.large_binary()))


# -- reading ---------------------------------------------------------------------------------------------------
def projection(written: pa.Schema, read: pa.Schema) -> Callable[[pa.Table], pa.Table]:
    """How rows written under `written` read under `read`, matched by column id (a schema without ids, from before
    ids existed, is matched by name): renamed columns take their new names, widened ones are cast, columns
    added since are null or their default, dropped ones are left out. The identity when nothing changed."""
    if _same(written, read):
        return lambda rows: rows
    plan = column_sources(written, read)

    def apply(rows: pa.Table) -> pa.Table:
        columns = []
        for field, source in plan:
            if source is None:
                columns.append(_filled(field, rows.num_rows))
            else:
                column = rows.column(source)
                columns.append(column if column.type == field.type else pc.cast(column, field.type))
        return pa.Table.from_arrays(columns, schema=read)

    return apply


def column_sources(written: pa.Schema, read: pa.Schema) -> list[tuple[pa.Field, str | None]]:
    """For each field of `read`, in order: the column of `written` its values come from (matched by column id; by
    name when `written` has no ids), None for a column added since (null or its default: default_of). The rule every
    reader applies (projection here; an engine's reader builds the same projection in its own terms)."""
    by_id = {column_id(f): f for f in written if column_id(f) is not None}
    plan: list[tuple[pa.Field, str | None]] = []  # (the read field, the written column it comes from)
    for field in read:
        found = by_id.get(column_id(field)) if column_id(field) is not None else None
        if found is None and not by_id and field.name in written.names:
            found = written.field(field.name)
        plan.append((field, None if found is None else found.name))
    return plan


def _same(written: pa.Schema, read: pa.Schema) -> bool:
    """Whether rows written under `written` read as they are: a column's nullability counts too (set_nullable
    changes only it, and a part must carry the reader's field to concatenate with the parts written since)."""
    return written.names == read.names and all(
        a.type == b.type and a.nullable == b.nullable and column_id(a) == column_id(b)
        for a, b in zip(written, read, strict=True))


def default_of(field: pa.Field) -> pa.Scalar | None:
    """The column's default (None: none, rows written before it was added read null)."""
    raw = (field.metadata or {}).get(DEFAULT)
    if raw is None:
        return None
    with pa.ipc.open_stream(base64.b64decode(raw)) as reader:
        return reader.read_all().column(0)[0]


def _filled(field: pa.Field, rows: int) -> pa.Array:
    value = default_of(field)
    return pa.nulls(rows, field.type) if value is None else pa.repeat(value, rows).cast(field.type)


def _encode_default(value: pa.Scalar) -> bytes:
    batch = pa.record_batch([pa.array([value.as_py()], value.type)], names=["default"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return base64.b64encode(sink.getvalue().to_pybytes())


def reads_by_name(written: pa.Schema, read: pa.Schema) -> bool:
    """Whether reading files written as `written` by column name, a missing column as null, gives what `projection`
    gives: every column is the written one of that name and type, or new with no default (an engine that reads
    files by name, a manifest's reader, reads such a part right)."""
    ids = {column_id(f): f for f in written}
    for column in read:
        found = ids.get(column_id(column))
        if found is None:
            if column.name in written.names or default_of(column) is not None:
                return False
        elif found.name != column.name or found.type != column.type:
            return False
    return True


def file_columns(written: pa.Schema, read: pa.Schema) -> dict[str, str | None]:
    """{each column of `read`: the name of the column of `written` holding it (matched by id), None when the files
    lack it (added since: its default, or null)}."""
    ids = {column_id(f): f.name for f in written}
    return {column.name: ids.get(column_id(column)) for column in read}
