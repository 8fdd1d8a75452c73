"""The `airflow-txn` Asset URI scheme's handler, which Airflow calls on every such URI it is given (provider
info `asset-uris`): a URI naming no warehouse table is refused when the DAG is parsed, not found later as an
Asset no commit ever updates. Light on purpose (no warehouse, no pyarrow): Airflow imports it while parsing.

Accepted: `airflow-txn://<warehouse id>/<ns.table>` (assets.table_asset) and the same with `?watch=commit-log`
(assets.commit_watcher); the warehouse id is hex digits (`airflow-txn doctor` shows it) and is lower-cased.
"""

from __future__ import annotations

import string
import urllib.parse
from urllib.parse import SplitResult

from airflow_txn.errors import InvalidNameError
from airflow_txn.model.names import parse_table_name

SCHEME = "airflow-txn"
WATCH_QUERY = "watch=commit-log"
_HEX = frozenset(string.hexdigits)


def check_warehouse_id(value: str) -> str:
    """THE check of a warehouse id as a name carries it (table_identity, this scheme's handler): hex digits of
    either case (Warehouse.warehouse_id is lower-case; Airflow lower-cases a URI's host), returned lower-cased.
    InvalidNameError for anything else."""
    if not isinstance(value, str) or not value or not set(value) <= _HEX:
        raise InvalidNameError(f"a warehouse id is hex digits (Warehouse.warehouse_id; `airflow-txn doctor` shows "
                               f"it), got {value!r}")
    return value.lower()


def normalize(uri: SplitResult) -> SplitResult:
    """`uri` (already split and sanitized by Airflow) with its warehouse id lower-cased; ValueError, saying
    what is wrong, for a URI that names no warehouse table."""
    written = urllib.parse.urlunsplit(uri)
    try:
        warehouse_id = check_warehouse_id(uri.netloc)
    except InvalidNameError:
        raise ValueError(f"{written}: an {SCHEME} Asset URI names a warehouse by its id (hex digits: "
                         f"`airflow-txn doctor` shows it), got {uri.netloc!r}; make it with "
                         "table_asset(table, conn_id)") from None
    table = urllib.parse.unquote(uri.path.lstrip("/"))
    try:
        parse_table_name(table)
    except InvalidNameError as exc:
        raise ValueError(f"{written}: {exc}") from None
    if uri.query not in ("", WATCH_QUERY):
        raise ValueError(f"{written}: the only query an {SCHEME} Asset URI takes is {WATCH_QUERY!r} "
                         "(commit_watcher)")
    return SplitResult(uri.scheme, warehouse_id, uri.path, uri.query, uri.fragment)
