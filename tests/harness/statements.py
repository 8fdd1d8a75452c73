"""The SQL a warehouse's catalog runs (SQLAlchemy's cursor events on its engine): tests that count statements or run
something between two of them; and the work a SQLite catalog does for them (its virtual machine's steps). Counted,
never timed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from airflow_txn import Warehouse

OnStatement = Callable[[str, Any], None]
"""Called with each statement's text and its parameters, before the catalog's cursor runs it."""


@contextmanager
def watching(wh: Warehouse, on_statement: OnStatement) -> Iterator[None]:
    """`on_statement` sees every statement `wh`'s catalog runs inside the block, on any of its connections."""

    def before(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        on_statement(statement, parameters)

    engine = wh.runtime.catalog.engine
    event.listen(engine, "before_cursor_execute", before)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", before)


@contextmanager
def statements(wh: Warehouse) -> Iterator[list[str]]:
    """The statements `wh`'s catalog runs inside the block, whole, whitespace collapsed (a list filled as they run)."""
    seen: list[str] = []
    with watching(wh, lambda statement, _parameters: seen.append(" ".join(statement.split()))):
        yield seen


@contextmanager
def sqlite_steps(wh: Warehouse) -> Iterator[list[int]]:
    """[virtual-machine steps] `wh`'s SQLite catalog runs inside the block, over every statement on every connection
    (a progress handler called at each step): what a statement costs, independent of the machine's speed."""
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0  # go on

    def on_checkout(dbapi_conn: Any, *_: Any) -> None:
        dbapi_conn.set_progress_handler(tick, 1)

    engine = wh.runtime.catalog.engine
    engine.dispose()  # every connection from now on is checked out through the listener
    event.listen(engine, "checkout", on_checkout)
    try:
        yield counted
    finally:
        event.remove(engine, "checkout", on_checkout)
        engine.dispose()
