"""The publishing settings: which formats a warehouse publishes to (Iceberg, Delta), and the Iceberg catalog's
properties.

Read by core/config.py (no optional dependency is imported here)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from airflow_txn import environment
from airflow_txn.errors import InvalidArgumentError

ENV_PUBLISH = environment.PUBLISH
ENV_ICEBERG_CATALOG = environment.ICEBERG_CATALOG
FORMATS = ("iceberg", "delta")
"""The formats publishing supports."""
PLANNED: tuple[str, ...] = ()
"""Formats named by the interface but not built yet: refused with a message saying so."""
OFF = ("", "off", "none")


def parse_publish(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """The formats to publish to: `value` ("iceberg", "iceberg,delta", a list; "off" or "" for none), else
    $AIRFLOW_TXN_PUBLISH, else none. InvalidArgumentError names an unknown or unbuilt format."""
    source = "publish"
    if value is None:
        value, source = environment.text(ENV_PUBLISH) or "", f"${ENV_PUBLISH}"
    items = value.split(",") if isinstance(value, str) else list(value)
    formats: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InvalidArgumentError(f"{source}: a format is a string, got {item!r}")
        name = item.strip().lower()
        if name in OFF:
            continue
        if name in PLANNED:
            raise InvalidArgumentError(f"{source}: publishing to {name} is not implemented yet; "
                                       f"supported: {', '.join(FORMATS)}")
        if name not in FORMATS:
            raise InvalidArgumentError(f"{source}: unknown format {item!r}; supported: {', '.join(FORMATS)} "
                                       "(or 'off')")
        if name not in formats:
            formats.append(name)
    return tuple(formats)


def parse_iceberg_catalog(value: Mapping[str, str] | str | None) -> dict[str, str]:
    """pyiceberg catalog properties that replace the defaults (iceberg.catalog_properties): `value` (a mapping or
    a JSON object), else $AIRFLOW_TXN_ICEBERG_CATALOG, else none. InvalidArgumentError unless every key and value
    is a string (a number or a boolean is taken as its text)."""
    source = "iceberg_catalog"
    if value is None:
        value, source = environment.given(ENV_ICEBERG_CATALOG), f"${ENV_ICEBERG_CATALOG}"
        if value is None:
            return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise InvalidArgumentError(f"{source} is not a JSON object: {exc}") from exc
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{source} must be a mapping of pyiceberg catalog properties, got "
                                   f"{type(value).__name__}")
    properties: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str | int | float | bool):
            raise InvalidArgumentError(f"{source}: property {key!r} must be a string key with a string value")
        properties[key] = str(item).lower() if isinstance(item, bool) else str(item)
    return properties


def command_formats(value: str | None) -> tuple[str, ...]:
    """The formats a command line publishes to: `value` (--format), else $AIRFLOW_TXN_PUBLISH, else Iceberg."""
    return parse_publish(value) or parse_publish(None) or ("iceberg",)
