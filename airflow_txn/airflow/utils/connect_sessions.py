"""One Spark Connect server session per transaction, shared by the transaction's Spark tasks.

A Spark Connect server keeps Python workers per session, and the airflow_txn data source runs its driver
side in them: a task that opened a NEW session paid for starting them again before its first write
(about 6 s per task measured, against 0.3-0.5 s for a write in a session that already wrote). So every
task of one transaction attaches to one server session, named by a session id derived from the server
URL and the tid, and leaves it open when it ends: it closes only its own gRPC channel (whose threads
would otherwise keep the task's process alive). The server drops an idle session after its
`spark.connect.session.manager.defaultSessionTimeout` (60 minutes by default); a task that finds its
transaction's session closed by then starts a new one.

A URL that names a `session_id` itself keeps it.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_NAMESPACE = uuid.UUID("5d6b6f0e-4f0e-4a37-9c55-2f2b3c7f7a10")
"""Fixed, so every worker derives the same session id for one (server, transaction)."""


def session_id_for(url: str, tid: str) -> str:
    """The Spark Connect session id every task of transaction `tid` uses on the server at `url`."""
    return str(uuid.uuid5(_NAMESPACE, f"{_server(url)}|{tid}"))


def with_session_id(url: str, session_id: str) -> str:
    """`url` (`sc://host:port[/;k=v;...]`) naming `session_id`, unless it names one already."""
    server, _, params = url.partition("/;")
    if any(p.split("=", 1)[0].strip() == "session_id" for p in params.split(";") if p):
        return url
    return f"{server}/;{params + ';' if params else ''}session_id={session_id}"


def _server(url: str) -> str:
    return url.partition("/;")[0].rstrip("/")


def is_closed_session_error(exc: BaseException) -> bool:
    """The server refused the session id: it released or expired that session (INVALID_HANDLE.SESSION_CLOSED)."""
    return "SESSION_CLOSED" in str(exc)


def leave_open(spark: SparkSession) -> None:
    """Close this process's channel to the server and forget the session here (the next getOrCreate
    connects anew), without releasing the server's session: the transaction's next task reuses it."""
    spark.release_session_on_close = False  # type: ignore[attr-defined]  # a Connect session's field
    spark.stop()
