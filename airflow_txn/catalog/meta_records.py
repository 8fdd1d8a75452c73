"""Facts about the catalog itself (txn_meta key/value rows) read or claimed after it was set up.

`schema_version` (read by the doctor: catalog/inspection.py) and the ZooKeeper oracle's warehouse id
(oracle/zookeeper.py) live here. Creating the catalog and migrating it, which write the version and
index rows, is catalog/database.py's business.
"""

from __future__ import annotations

from sqlalchemy import Connection, insert, select
from sqlalchemy.exc import IntegrityError

from airflow_txn.catalog import schema

SCHEMA_VERSION_KEY = "schema_version"

_m = schema.meta.c


def value(conn: Connection, key: str) -> str | None:
    """The value stored under `key`, None when there is none."""
    found = conn.execute(select(_m.value).where(_m.key == key)).scalar()
    return None if found is None else str(found)


def claim(conn: Connection, key: str, new_value: str) -> str:
    """The value under `key`, storing `new_value` first when there is none; when another process stores
    one at the same time, its value (so every caller ends up with the same one). Call inside a write."""
    found = value(conn, key)
    if found is not None:
        return found
    try:
        with conn.begin_nested():
            conn.execute(insert(schema.meta).values(key=key, value=new_value))
    except IntegrityError:
        return str(conn.execute(select(_m.value).where(_m.key == key)).scalar_one())
    return new_value
