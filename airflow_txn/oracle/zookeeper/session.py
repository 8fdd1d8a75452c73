"""The ZooKeeper oracle's client: one kazoo session per process, every call retried and bounded in time.

Every ZooKeeper call goes through an explicit KazooRetry (connection loss, operation timeout and
session expiry are retried until the spec's `timeout`), with asynchronous calls waited on with a
timeout: kazoo's synchronous calls would block while the client is disconnected. Giving up raises
OracleUnavailableError, the one error the rest of the oracle sees for "ZooKeeper did not answer".
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, NodeExistsError, NoNodeError, OperationTimeoutError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry, RetryFailedError

from airflow_txn.errors import OracleUnavailableError, TxnError
from airflow_txn.oracle.zookeeper.spec import ZooKeeperSpec
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)
T = TypeVar("T")


class ZooKeeperSession:
    """Connects on first use and runs `on_connect` once per new client (the log's layout); after a
    fork the child connects again (`forget`)."""

    def __init__(self, spec: ZooKeeperSpec, on_connect: Callable[[], None]) -> None:
        self.spec = spec
        self._on_connect = on_connect
        self._lock = threading.RLock()
        self.client: Any = None
        """The live kazoo client, None until the first call (tests expire its session)."""

    def run(self, what: str, attempt: Callable[[Any], T]) -> T:
        """`attempt(client)` under an explicit KazooRetry bounded by spec.timeout; `what` names it in errors."""
        client = self._connected()
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=self.spec.timeout,
                           ignore_expire=True)
        try:
            result: T = retry(attempt, client)
            return result
        except (RetryFailedError, ConnectionClosedError) as exc:
            raise self.unavailable(what, exc) from exc

    def wait(self, async_result: Any) -> Any:
        """The result of one asynchronous call; a timeout becomes a retryable OperationTimeoutError."""
        try:
            return async_result.get(timeout=min(self.spec.timeout, max(1.0, self.spec.session_timeout / 2)))
        except KazooTimeoutError as exc:  # the timeout of kazoo's (default) threading handler
            raise OperationTimeoutError() from exc

    def create_quietly(self, client: Any, path: str, value: bytes) -> None:
        with contextlib.suppress(NodeExistsError):
            self.wait(client.create_async(path, value))

    def delete_quietly(self, client: Any, path: str) -> None:
        with contextlib.suppress(NoNodeError):
            self.wait(client.delete_async(path))

    def check_available(self) -> None:
        """Raise OracleUnavailableError unless the client is connected within spec.timeout."""
        client = self._connected()
        deadline = time.monotonic() + self.spec.timeout
        while not client.connected:
            if time.monotonic() >= deadline:
                raise self.unavailable("connection check", ConnectionError("not connected"))
            time.sleep(0.05)

    def unavailable(self, what: str, exc: BaseException) -> OracleUnavailableError:
        return OracleUnavailableError(
            f"ZooKeeper at {self.spec.hosts} did not answer ({what}) within {self.spec.timeout:g}s: "
            f"{type(exc).__name__}: {exc}; the transaction is not committed unless its record was written "
            "(commit() again resumes safely, recovery settles it once ZooKeeper is back)"
        )

    def close(self) -> None:
        with self._lock:
            client, self.client = self.client, None
        if client is not None:
            _stop(client)

    def forget(self) -> None:
        """In a forked child: the parent's kazoo threads do not exist here; connect again on first use."""
        self.client = None
        self._lock = threading.RLock()

    def _connected(self) -> Any:
        with self._lock:
            if self.client is not None:
                return self.client
            client = KazooClient(
                hosts=self.spec.hosts, timeout=self.spec.session_timeout,
                connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
                logger=logging.getLogger("airflow_txn.kazoo"),
            )
            try:
                client.start(timeout=self.spec.timeout)
                self.client = client
                self._on_connect()
            except Exception as exc:
                self.client = None
                _stop(client)
                if isinstance(exc, TxnError):
                    raise
                raise self.unavailable("connect", exc) from exc
            return client


def _stop(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception:  # closing a client whose server is gone must not hide the real problem
        log.debug("closing the ZooKeeper client failed", exc_info=True)
