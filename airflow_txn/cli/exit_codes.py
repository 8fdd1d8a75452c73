"""The exit codes of `airflow-txn` (stable: scripts rely on them; docs/CLI.md lists them) and which
error maps to which."""

from __future__ import annotations

from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    TableNotFoundError,
    TagNotFoundError,
    TransactionNotFoundError,
    TxnError,
    WarehouseNotFoundError,
)

OK = 0
"""The command did what it was asked."""
ERROR = 1
"""A transaction or engine error: conflict, closed transaction, unreachable catalog or oracle, a CSN not
readable yet or older than the retention horizon, storage trouble, a feature this version lacks; or a
question (`rollback`'s) answered no."""
USAGE = 2
"""Bad usage: unknown command or option, a malformed value (a tid, table name, CSN or partition), a tid
prefix several tids begin with, a number out of range (an integer beyond the catalog's 64 bits), a
question that cannot be asked (`rollback` without --yes, stdin no terminal), --conn-id without Airflow
or naming no connection, a malformed warehouse configuration (catalog URL, root, oracle spec: commands.check_config)."""
NOT_FOUND = 3
"""The table, transaction or tag named (or a tid prefix) does not exist in this warehouse, the tag read
does not hold the table, or no warehouse exists where the command looked (a read on a catalog that was never
created: `init` creates it)."""
DOCTOR_FAILED = 4
"""`doctor` found at least one failing check."""
INTERRUPTED = 130
"""Interrupted (Ctrl-C)."""


def for_error(exc: BaseException) -> int:
    """The exit code of an error raised by a command."""
    if isinstance(exc, TableNotFoundError | TransactionNotFoundError | TagNotFoundError | WarehouseNotFoundError):
        return NOT_FOUND
    if isinstance(exc, InvalidNameError | InvalidArgumentError):
        return USAGE
    if isinstance(exc, handled()):
        return ERROR
    raise TypeError(f"no exit code for {type(exc).__name__}")  # pragma: no cover - callers pass only these


def handled() -> tuple[type[BaseException], ...]:
    """The errors `main` turns into `error: ...` and an exit code; anything else is a bug and shows its traceback.
    A function, so that SQLAlchemy is imported only once an error is being handled (a command that fails
    has loaded it already), never by `--help`."""
    from sqlalchemy.exc import SQLAlchemyError

    return (TxnError, SQLAlchemyError, OSError)
