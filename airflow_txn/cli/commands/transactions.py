"""`list`, `show` and `rollback`: transactions, one transaction, and rolling an active one back (asked first)."""

from __future__ import annotations

import getpass
import sys
from typing import TYPE_CHECKING

import click

from airflow_txn.cli import exit_codes, render
from airflow_txn.cli.commands.options import TID_HELP, global_options, int64
from airflow_txn.cli.commands.settings import Settings

if TYPE_CHECKING:
    from airflow_txn.model.results import TransactionInfo

STATES = ("active", "committing", "committed", "rolled_back")
"""--state's choices."""


@click.command("list")
@click.option("--state", type=click.Choice(STATES), help="Only transactions in this state.")
@click.option("--dag-id", metavar="DAG_ID",
              help="Only transactions labelled `<DAG_ID>/<run_id>` (BeginTransactionOperator's default label).")
@click.option("--run-id", metavar="RUN_ID", help="Only transactions labelled `<dag_id>/<RUN_ID>`.")
@click.option("--limit", type=int64(1), default=50, show_default=True)
@global_options
@click.pass_obj
def list_transactions(settings: Settings, state: str | None, dag_id: str | None, run_id: str | None,
                      limit: int) -> int:
    """Transactions, newest first."""
    from airflow_txn.catalog.txn_records import LabelFilter

    labels = None
    if dag_id is not None or run_id is not None:
        labels = LabelFilter(dags=None if dag_id is None else frozenset({dag_id}), no_dag=False, run_id=run_id)
    return settings.emit(settings.open().transactions(state=state, limit=limit, labels=labels), render.transactions)


@click.command(epilog=TID_HELP)
@click.argument("tid")
@global_options
@click.pass_obj
def show(settings: Settings, tid: str) -> int:
    """One transaction: state, CSNs, times, and the parts it wrote or removed, table by table."""
    wh = settings.open()
    return settings.emit(wh.transaction_info(wh.resolve_tid(tid)), render.transaction)


class NotConfirmed(click.ClickException):
    """The person asked answered no: nothing was done (exit 1)."""

    exit_code = exit_codes.ERROR


@click.command(epilog=TID_HELP)
@click.argument("tid")
@click.option("--reason", metavar="TEXT", help="Why: recorded with your user name as the transaction's failed_reason.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (needed when stdin is not a terminal).")
@global_options
@click.pass_obj
def rollback(settings: Settings, tid: str, reason: str | None, yes: bool) -> int:
    """Roll back an active transaction (its staged parts never become visible); asks first."""
    from airflow_txn.model.results import RollbackResult

    wh = settings.open()
    tid = wh.resolve_tid(tid)
    info = wh.transaction_info(tid)
    if info["state"] == "active" and not yes:  # a rolled-back one is left as it is, a committed one refused
        _confirm_rollback(info, settings.prog_name)
    wh.attach(tid).rollback(reason=rollback_reason(reason, settings.prog_name))
    after = wh.transaction_info(tid)
    result = RollbackResult(tid=tid, state=after["state"], reason=after["failed_reason"])
    return settings.emit(result, render.mapping)


def _confirm_rollback(info: TransactionInfo, prog_name: str) -> None:
    tid = info["tid"]
    if sys.stdin is None or not sys.stdin.isatty():
        raise click.UsageError(f"{prog_name} rollback asks before rolling back {tid}, and stdin is not a terminal: "
                               "pass --yes (-y) to roll it back without asking")
    staged = [p for p in info["parts"] if p["role"] == "created"]
    tables = ", ".join(info["tables"]) or "no table"
    question = (f"Roll back transaction {tid} (label {info['label'] or '-'}, {len(staged)} part(s) staged in "
                f"{tables})? Its writes will never become visible.")
    if not click.confirm(question, default=False, err=True):
        raise NotConfirmed(f"transaction {tid} was not rolled back (not confirmed)")


def rollback_reason(reason: str | None, prog_name: str = "airflow-txn") -> str:
    """What `rollback` records: who rolled back, with which command, and why (`--reason`)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name in the environment and none for this uid
        user = "an unknown user"
    recorded = f"rolled back by {user} with `{prog_name} rollback`"
    return f"{recorded}: {reason}" if reason else recorded


COMMANDS = (list_transactions, show, rollback,)
