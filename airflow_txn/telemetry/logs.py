"""Structured logs of the engine: every line carries the transaction id and CSN it is about.

The core logs through `get_logger(__name__)`, a LoggerAdapter that puts two fields on each record:

    record.tid   the transaction the line is about (None when none, e.g. vacuum)
    record.csn   the CSN it is about: the commit CSN, the snapshot, the vacuum horizon (None when unknown)

They come from the call (`log.info("committed", extra=fields(tid, csn))`) or, when the call passes
none, from the innermost `bind(tid=..., csn=...)` block of the current thread or task (the commit
and rollback protocols bind their tid, so lines of the modules they call carry it too). The message
text starts with the known fields, so a line reads the same in any handler (Airflow's task log,
pytest, a plain StreamHandler):

    tid=12-3-9f1c0a2b4d5e6f70 csn=42 committed 3 table(s): shop.customers, shop.orders, shop.order_items

`configure()` attaches a handler to the `airflow_txn` logger with `TextFormatter` or, with
`AIRFLOW_TXN_LOG_FORMAT=json`, `JsonFormatter` (one JSON object per line with `tid` and `csn` as
fields and the message without the prefix). `TxnContextFilter` gives any record the two attributes
(None when absent), for handlers whose format string names `%(tid)s` / `%(csn)s`.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import IO, Any

from airflow_txn import environment

ENV_LOG_FORMAT = environment.LOG_FORMAT
LOG_FORMATS = ("text", "json")
FIELDS = ("tid", "csn")
EVENT_ATTR = "txn_event"
"""The record attribute holding the message format string without the tid/csn prefix."""

_context: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar("airflow_txn_log_context",
                                                                                    default=None)


def _bound() -> Mapping[str, Any]:
    return _context.get() or {}


def fields(tid: str | None = None, csn: int | None = None) -> dict[str, Any]:
    """The `extra=` of a log call about transaction `tid` and CSN `csn` (either may be None)."""
    return {"tid": tid, "csn": csn}


@contextmanager
def bind(tid: str | None = None, csn: int | None = None) -> Iterator[None]:
    """Within the block, log lines of this thread/task that name no tid or csn get these."""
    current = dict(_bound())
    current.update({k: v for k, v in fields(tid, csn).items() if v is not None})
    token = _context.set(current)
    try:
        yield
    finally:
        _context.reset(token)


def prefix(values: Mapping[str, Any]) -> str:
    """`tid=... csn=... ` for the fields that are known ('' when none is)."""
    return "".join(f"{name}={values[name]} " for name in FIELDS if values.get(name) is not None)


class TxnLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose records carry `tid` and `csn` (see the module doc)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        extra = dict(kwargs.get("extra") or {})
        bound = _bound()
        for name in FIELDS:
            if extra.get(name) is None:
                extra[name] = bound.get(name)
        extra[EVENT_ATTR] = msg
        kwargs["extra"] = extra
        return f"{prefix(extra)}{msg}", kwargs  # tids and CSNs hold no '%': the prefix needs no escaping


def get_logger(name: str) -> TxnLogger:
    """The engine's logger for module `name` (use `__name__`)."""
    return TxnLogger(logging.getLogger(name), {})


class TxnContextFilter(logging.Filter):
    """Gives every record `tid` and `csn` attributes (None when the line is about no transaction),
    so a handler's format string may name them: `%(asctime)s %(tid)s %(csn)s %(message)s`."""

    def filter(self, record: logging.LogRecord) -> bool:
        bound = _bound()
        for name in FIELDS:
            if getattr(record, name, None) is None:
                setattr(record, name, bound.get(name))
        return True


def event_message(record: logging.LogRecord) -> str:
    """The record's message without the `tid=... csn=...` prefix."""
    event = getattr(record, EVENT_ATTR, None)
    if event is None:
        return record.getMessage()
    text = str(event)
    return text % record.args if record.args else text


class TextFormatter(logging.Formatter):
    """`2024-01-01T10:00:00Z INFO airflow_txn.core.commit tid=... csn=... committed in 4.2 ms` (UTC)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s", "%Y-%m-%dT%H:%M:%SZ")
        self.converter = time.gmtime


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, tid, csn (and exc_info as text)."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": event_message(record),
            "tid": getattr(record, "tid", None),
            "csn": getattr(record, "csn", None),
        }
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def formatter(fmt: str | None = None) -> logging.Formatter:
    """The formatter for `fmt` ("text" or "json"; None: $AIRFLOW_TXN_LOG_FORMAT, else text)."""
    chosen = (fmt or environment.given(ENV_LOG_FORMAT) or "text").strip().lower()
    if chosen not in LOG_FORMATS:
        raise ValueError(f"{ENV_LOG_FORMAT} must be one of {LOG_FORMATS}, got {chosen!r}")
    return JsonFormatter() if chosen == "json" else TextFormatter()


def configure(fmt: str | None = None, level: int | str = logging.INFO,
              stream: IO[str] | None = None) -> logging.Handler:
    """Send the engine's logs (logger `airflow_txn`) to `stream` (default stderr) in `fmt`; replaces a
    handler an earlier configure() attached. Returns the handler. For scripts and the CLI: inside
    Airflow the task log already receives the lines (with their `tid=... csn=...` prefix)."""
    logger = logging.getLogger("airflow_txn")
    for old in [h for h in logger.handlers if getattr(h, "_airflow_txn", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(TxnContextFilter())
    handler._airflow_txn = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return handler


__all__ = [
    "ENV_LOG_FORMAT",
    "JsonFormatter",
    "TextFormatter",
    "TxnContextFilter",
    "TxnLogger",
    "bind",
    "configure",
    "fields",
    "get_logger",
]
