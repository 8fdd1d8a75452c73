"""Facts about the catalog itself (txn_meta key/value rows) read or claimed after it was set up.

`schema_version` (read by the doctor: catalog/inspection.py) and the warehouse id live here. The
warehouse id is the warehouse's stable identity: a random hex string claimed once (`warehouse_id`) and
kept for the catalog's life, whatever the connection, URL or host it is reached by. The ZooKeeper oracle
writes it into its log's /meta to claim the chroot; Airflow Asset URIs and lineage names name the
warehouse by it (airflow/assets/tables.py). Creating the catalog and migrating it, which write the version and
index rows, is catalog/database.py's business.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_txn.catalog import schema

SCHEMA_VERSION_KEY = "schema_version"
WAREHOUSE_ID_KEY = "warehouse_id"

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


def warehouse_id(conn: Connection) -> str:
    """The catalog's warehouse id, claimed on first use (a new random id, 32 hex digits); the same for
    every caller from then on. Call inside a write (a read finds it with `value(conn, WAREHOUSE_ID_KEY)`)."""
    return claim(conn, WAREHOUSE_ID_KEY, uuid.uuid4().hex)


def put(conn: Connection, key: str, new_value: str) -> None:
    """Store `new_value` under `key`, replacing what was there. Call inside a write."""
    if conn.execute(update(schema.meta).where(_m.key == key).values(value=new_value)).rowcount == 0:
        conn.execute(insert(schema.meta).values(key=key, value=new_value))
