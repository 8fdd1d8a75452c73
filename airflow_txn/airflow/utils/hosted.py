"""Work of ours that runs inside Airflow's own processes (a listener in the scheduler loop or the API server): run
off the host's thread, on sessions of its own, bounded in time, never raising into the host (invariant 13).

Why a thread: the scheduler calls listeners inside its loop, whose metadata session (Airflow's thread-scoped
`settings.Session`) is under `prohibit_commit`. Anything that opens "a session" there (an XCom read, a connection
looked up in the metastore, the serialized DAG) gets THAT session, and committing or closing it kills the
scheduler. A thread of our own has a scoped session of its own, which it removes when done; the host's session is
never touched. The caller copies the plain values it needs (ids, task ids) out of the host's ORM objects first:
those objects belong to the host's session and its thread.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from airflow_txn.airflow.provider import LISTENER_TIMEOUT_SECONDS
from airflow_txn.airflow.version_compat import release_thread_session

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TIMEOUT_SECONDS = LISTENER_TIMEOUT_SECONDS
"""How long a host waits for our work by default (`[airflow_txn] listener_timeout`; provider.py declares it)."""


def hosted_timeout() -> float:
    """`[airflow_txn] listener_timeout` (seconds a listener may hold up its host), else DEFAULT_TIMEOUT_SECONDS; an
    unusable value is logged and replaced by the default (a listener never raises)."""
    from airflow_txn.airflow.hooks.txn import config_option

    try:
        value = config_option("listener_timeout")
        seconds = float(value) if value is not None else DEFAULT_TIMEOUT_SECONDS
    except Exception:
        log.warning("[airflow_txn] listener_timeout must be a number of seconds; using %s", DEFAULT_TIMEOUT_SECONDS,
                    exc_info=True)
        return DEFAULT_TIMEOUT_SECONDS
    return seconds if seconds > 0 else DEFAULT_TIMEOUT_SECONDS


def run_hosted(what: str, work: Callable[[], T], timeout: float | None = None) -> T | None:
    """Run `work` in a thread of its own and wait for it at most `timeout` seconds (default hosted_timeout()).

    Returns what `work` returned; None when it raised (logged with `what`) or is still running at the deadline
    (logged; it finishes in the background, and whatever it does not finish the transaction's lease ends).
    Never raises.
    """
    outcome: list[T] = []
    context = contextvars.copy_context()  # the task's context variables (a worker's connections, say)

    def target() -> None:
        try:
            outcome.append(context.run(work))
        except Exception:
            log.exception("airflow_txn: %s failed", what)
        finally:
            release_thread_session()

    try:
        limit = hosted_timeout() if timeout is None else timeout
        thread = threading.Thread(target=target, name=f"airflow_txn {what}"[:60], daemon=True)
        thread.start()
        thread.join(limit)
        if thread.is_alive():
            log.error("airflow_txn: %s still runs after %.0f s ([airflow_txn] listener_timeout); not waiting for "
                      "it any longer (the transaction's lease ends what it does not finish)", what, limit)
    except Exception:  # a thread that cannot start: the host goes on
        log.exception("airflow_txn: %s could not run", what)
    return outcome[0] if outcome else None
