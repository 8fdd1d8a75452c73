"""One Spark Connect server session per transaction, shared by the transaction's Spark tasks.

A Spark Connect server keeps Python workers per session, and the airflow_txn data source runs its driver
side in them: a task that opened a NEW session paid for starting them again before its first write
(about 6 s per task measured, against 0.3-0.5 s for a write in a session that already wrote). So every
task of one transaction attaches to one server session and leaves it open when it ends: it closes only its
own gRPC channel (whose threads would otherwise keep the task's process alive). The server drops an idle
session after its `spark.connect.session.manager.defaultSessionTimeout` (60 minutes by default); a task that
finds its transaction's session closed by then starts a new one, and keeps it for the transaction's next tasks.

The session id is random (uuid4), made by the transaction's first task on that server and kept WITH the
transaction (Transaction.claim_private: first writer wins, so two tasks starting at once agree on one id;
never shown on the page, by `airflow-txn show` or in XCom). Anyone who can join a session sees its temporary
views and cached data, and tids are everywhere (logs, XCom, the page): so the id is no function of the tid. A
tid given without its Transaction (spark_session(tid=...)) gets a random session of this process only.

A URL that names a `session_id` itself keeps it.

A server that does not answer fails fast (invariant 13): pyspark's own client retries an unreachable server
for about ten minutes; a session made here connects at most half of `connect_timeout` per attempt (gRPC's
`grpc.min_reconnect_backoff_ms`) and retries every call of the session only while the attempt still fits in
`connect_timeout` (bounded_channel, bound_retries), after which the call raises SparkConnectUnavailableError
naming `sc://host:port` (never the URL's token).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_txn.errors import SparkConnectUnavailableError, TxnError
from airflow_txn.model.secrets import mask_secrets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client import DefaultChannelBuilder

    from airflow_txn.core.transaction import Transaction

_UNREACHABLE_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED")
"""gRPC status codes of a server that did not answer (as opposed to one that answered with an error)."""

_PROCESS_SESSIONS: dict[tuple[str, str], str] = {}
"""(server, tid) -> session id, for a tid given without its Transaction: shared within this process only."""


def session_id_for(url: str, txn: Transaction | str, replacing: str | None = None) -> str:
    """The Spark Connect session id every task of transaction `txn` uses on the server at `url`: random, kept
    with the transaction (the first task's id wins; `replacing`: the id of a session the server closed, swapped
    for a new one unless another task swapped it already). For a bare tid, or a transaction that can no longer
    keep anything (ended), a random id kept in this process."""
    server = server_address(url)
    if not isinstance(txn, str):
        try:
            return txn.claim_private(f"spark_connect_session {server}", str(uuid.uuid4()), replacing)
        except TxnError:  # ended or expired: nothing to share with
            txn = txn.tid
    key = (server, txn)
    if key not in _PROCESS_SESSIONS or _PROCESS_SESSIONS[key] == replacing:
        _PROCESS_SESSIONS[key] = str(uuid.uuid4())
    return _PROCESS_SESSIONS[key]


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


def server_address(url: str) -> str:
    """`sc://host:port` of a Spark Connect URL, without its parameters (a token among them) or userinfo, and
    masked besides (model/secrets.py) should anything else carry a secret."""
    server = _server(url).split("?", 1)[0].split("#", 1)[0]
    scheme, sep, rest = server.partition("://")
    return mask_secrets(f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else server)


def bounded_channel(url: str, connect_timeout: float) -> DefaultChannelBuilder:
    """The gRPC channel to `url` whose connection attempts take at most half of `connect_timeout`."""
    from pyspark.sql.connect.client import DefaultChannelBuilder

    attempt_ms = max(100, int(connect_timeout * 500))
    return DefaultChannelBuilder(url, [("grpc.min_reconnect_backoff_ms", attempt_ms)])


def bound_retries(spark: SparkSession, connect_timeout: float) -> None:
    """Retry the calls of a Connect session on an unreachable server only within `connect_timeout` of each
    call's first attempt (pyspark's DefaultPolicy otherwise retries for about ten minutes)."""
    client = spark.client  # a Connect session's (SparkConnectClient)
    client.set_retry_policies([_deadline_policy(connect_timeout)])


def _deadline_policy(connect_timeout: float) -> Any:
    from pyspark.sql.connect.client.retries import DefaultPolicy, RetryPolicyState

    class DeadlineState(RetryPolicyState):
        """One call's retries: none once the next attempt would end past its deadline."""

        def __init__(self, policy: DefaultPolicy) -> None:
            super().__init__(policy)
            self._deadline = time.monotonic() + connect_timeout

        def next_attempt(self, exception: BaseException | None = None) -> int | None:
            wait_ms: int | None = super().next_attempt(exception)
            left = self._deadline - time.monotonic()
            if wait_ms is None or left <= connect_timeout / 2:  # an attempt may take half the bound
                return None
            return min(wait_ms, int((left - connect_timeout / 2) * 1000))

    class DeadlinePolicy(DefaultPolicy):
        """pyspark's DefaultPolicy (what it retries, its backoff), bounded in time per call."""

        def __init__(self) -> None:
            limit_ms = int(connect_timeout * 1000)
            super().__init__(max_retries=None, max_backoff=min(limit_ms, 5000), max_server_retry_delay=limit_ms)

        def to_state(self) -> RetryPolicyState:
            return DeadlineState(self)

    return DeadlinePolicy()


def unreachable_reason(exc: BaseException) -> str | None:
    """What a server that did not answer left in `exc` or its chain (gRPC UNAVAILABLE or DEADLINE_EXCEEDED,
    raised by grpc or wrapped by pyspark), e.g. "UNAVAILABLE: failed to connect to all addresses; ...";
    None for any other error (the server answered)."""
    chain = list(_chain(exc))
    for current in chain:  # grpc's own error first: its details name the address and what failed
        code, details = getattr(current, "code", None), getattr(current, "details", None)
        if callable(code) and callable(details):
            with contextlib.suppress(Exception):
                name = getattr(code(), "name", None)
                if name in _UNREACHABLE_CODES:
                    return f"{name}: {str(details() or '').strip()}"
    for current in chain:
        name = getattr(getattr(current, "_grpc_status_code", None), "name", None)  # pyspark's wrapper
        if name in _UNREACHABLE_CODES:
            return f"{name}: {str(current).strip()}"
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


@contextlib.contextmanager
def unreachable_as_typed(url: str, connect_timeout: float) -> Iterator[None]:
    """Raise SparkConnectUnavailableError, naming the server, for a call the server did not answer."""
    try:
        yield
    except Exception as exc:
        reason = unreachable_reason(exc)
        if reason is None:
            raise
        raise SparkConnectUnavailableError(
            f"the Spark Connect server {server_address(url)} did not answer within connect_timeout "
            f"({connect_timeout:g} s): {reason}. Is it running and reachable from here? Wait longer with "
            "connect_timeout (the airflow_txn connection's extra, [airflow_txn] connect_timeout or "
            "$AIRFLOW_TXN_CONNECT_TIMEOUT)") from exc
