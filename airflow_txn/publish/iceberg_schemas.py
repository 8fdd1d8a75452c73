"""A table's schema versions as Iceberg schemas (docs/DESIGN.md, D26 point 6 and D27 point 2): pure functions over
pyiceberg's types, no catalog and no I/O.

- **Ids.** The Iceberg field ids are the warehouse's column ids (`PARQUET:field_id` in each field's Arrow metadata,
  written into the part files as Parquet field ids): `to_iceberg` converts a version's schema with pyiceberg's public
  `pyarrow_to_schema`, which takes those ids. Iceberg readers then match a file's columns by its field ids, so a
  renamed column reads under its new name and a dropped one is left unread, with no name involved.
- **Name mapping.** Files written before columns had ids (a table from before schema versions) carry no field ids:
  Iceberg readers match them through the table's name mapping (`schema.name-mapping.default`). `name_mapping` lists
  per id the names the column had in the table's versions, oldest first; a name another id had first is not given
  to a later one (after `rename a -> c, b -> a`, "a" stays the first column's), since a file without ids can only
  come from the first version (every writer writes ids since).
- **Widening.** Iceberg promotes int -> long, float -> double and a decimal's precision; `check_promotions` refuses
  any other change of a column's type (`date -> timestamp`, ...) with PublishError naming the column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from airflow_txn.errors import PublishError

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.name_mapping import MappedField, NameMapping

PARTITION_FIELD_BASE = 1000
"""Iceberg's first partition field id (the spec's own ids, apart from the columns')."""


def to_iceberg(arrow_schema: pa.Schema, table: str, schema_id: int = 0) -> Schema:
    """The Iceberg schema of one version of `table`'s schema, its field ids the column ids; PublishError for a type
    Iceberg lacks (uint64: Iceberg's long is signed; nanosecond timestamps in format version 2, ...)."""
    from pyiceberg.io.pyarrow import pyarrow_to_schema
    from pyiceberg.schema import Schema

    unsigned = [f.name for f in arrow_schema if f.type == pa.uint64()]
    if unsigned:  # pyiceberg takes it as a long: values past 2^63-1 would read back wrong
        raise PublishError(f"table {table} cannot be published to Iceberg: column(s) {unsigned} are uint64, "
                           "which Iceberg has no type for (its long is signed); use int64 or decimal(20, 0)")
    try:
        converted = pyarrow_to_schema(arrow_schema, format_version=2)
    except Exception as exc:  # pyiceberg's UnsupportedPyArrowTypeException, ValueError, TypeError
        raise PublishError(f"table {table} cannot be published to Iceberg: {exc}") from exc
    return Schema(*converted.fields, schema_id=schema_id)


def same_schema(a: Schema, b: Schema) -> bool:
    """Whether two Iceberg schemas have the same fields (ids, names, types, required), whatever their schema ids."""
    return bool(a.as_struct() == b.as_struct())


def ids_by_name(schema: Schema) -> dict[str, int]:
    """{dotted name: field id} of every field, nested ones too."""
    from pyiceberg.schema import index_by_name

    return dict(index_by_name(schema))


def foreign_ids(published: Schema, ours: Schema) -> list[str]:
    """The columns `published` (an Iceberg table's current schema) gives other ids than `ours` (the warehouse's
    schema at the CSN it holds): a table published before the Iceberg ids were the column ids."""
    theirs, mine = ids_by_name(published), ids_by_name(ours)
    return sorted(name for name, found in theirs.items() if name in mine and mine[name] != found)


def check_promotions(current: Schema, wanted: Schema, table: str) -> None:
    """PublishError naming each column whose type changes from `current` to `wanted` in a way Iceberg cannot read
    its older files under (Iceberg promotes int -> long, float -> double, decimal(P, S) -> decimal(P', S), P' > P)."""
    from pyiceberg.schema import index_by_id
    from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType

    old, new = index_by_id(current), index_by_id(wanted)
    refused = []
    for field_id, after in new.items():
        before = old.get(field_id)
        if before is None or before.field_type == after.field_type:
            continue
        a, b = before.field_type, after.field_type
        if not (a.is_primitive and b.is_primitive):
            continue  # a nested field's own type changed: its children are checked one by one
        allowed = ((isinstance(a, IntegerType) and isinstance(b, LongType))
                   or (isinstance(a, FloatType) and isinstance(b, DoubleType))
                   or (isinstance(a, DecimalType) and isinstance(b, DecimalType) and a.scale == b.scale
                       and b.precision > a.precision))
        if not allowed:
            refused.append(f"{wanted.find_column_name(field_id)} ({a} -> {b})")
    if refused:
        raise PublishError(f"table {table} cannot be published to Iceberg: the type change of column(s) "
                           f"{', '.join(refused)} is not one Iceberg can read older files under (it promotes "
                           "int -> long, float -> double and a decimal's precision only); the commits stand, "
                           "read them through airflow_txn (or Delta)")


def partition_spec(schema: Schema, partition_by: Sequence[str], spec_id: int = 0,
                   first_field_id: int = PARTITION_FIELD_BASE) -> PartitionSpec:
    """Identity partitions on the partition columns, their source ids the columns' ids."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    fields = [PartitionField(source_id=schema.find_field(column).field_id, field_id=first_field_id + i,
                             transform=IdentityTransform(), name=column)
              for i, column in enumerate(partition_by)]
    return PartitionSpec(*fields, spec_id=spec_id)


def spec_sources(spec: PartitionSpec) -> list[tuple[int, str]]:
    """(source id, name) of a spec's identity fields, in order: what makes two of our specs the same."""
    return [(f.source_id, f.name) for f in spec.fields]


@dataclass
class _Slot:
    field_id: int | None
    names: list[str] = field(default_factory=list)
    children: list[_Slot] = field(default_factory=list)


def name_mapping(schemas: Iterable[Schema]) -> NameMapping:
    """The name mapping of a table whose versions are `schemas`, oldest first: per id, every name it had, except a
    name another id had first (see the module doc)."""
    from pyiceberg.table.name_mapping import NameMapping, create_mapping_from_schema

    top: list[_Slot] = []
    for schema in schemas:
        _merge(top, list(create_mapping_from_schema(schema)))
    return NameMapping(_mapped(top))


def _merge(into: list[_Slot], fields: Sequence[MappedField]) -> None:
    for mapped in fields:
        slot = next((s for s in into if s.field_id == mapped.field_id), None)
        if slot is None:
            slot = _Slot(mapped.field_id)
            into.append(slot)
        for name in mapped.names:
            taken = any(name in other.names for other in into if other is not slot)
            if not taken and name not in slot.names:
                slot.names.append(name)
        _merge(slot.children, list(mapped.fields))


def _mapped(slots: Sequence[_Slot]) -> list[MappedField]:
    from pyiceberg.table.name_mapping import MappedField

    return [MappedField.model_validate({"field-id": s.field_id, "names": list(s.names), "fields": _mapped(s.children)})
            for s in slots if s.names]


def mapped_id(mapping: NameMapping, name: str) -> int | None:
    """The id the mapping gives a top-level column name (None: none)."""
    for mapped in mapping:
        if name in mapped.names:
            return None if mapped.field_id is None else int(mapped.field_id)
    return None


def unmatched_names(file_schema: pa.Schema, written: Mapping[str, int], mapping: NameMapping) -> list[str]:
    """The columns of a file WITHOUT field ids that the name mapping would read as another column than the one the
    file was written as (`written`: {name: id} of the version it was written under). Empty when the file has ids."""
    from airflow_txn.model.evolution import column_id

    if all(column_id(f) is not None for f in file_schema):
        return []
    return sorted(f.name for f in file_schema
                  if f.name in written and mapped_id(mapping, f.name) not in (None, written[f.name]))
