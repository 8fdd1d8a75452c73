"""The plugin's HTML: the transactions page (filters, tables and their readable CSN, tags, transactions,
and for a DAG run the parts each task staged), one transaction's page and the error page, rendered
from the Jinja2 templates in templates/ with autoescape (every value escaped by Jinja2). The style
and the few lines of vanilla JS (roll back in two clicks: the Airflow UI's iframe allows no
confirm(); refresh the watermark through the JSON API) are static/page.css and static/page.js.
Times are shown by pendulum as ISO 8601 with their zone. No build step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import jinja2
import pendulum
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from airflow_txn import __version__
from airflow_txn.airflow.plugins.web.data import PageTag, PageWatermark, TableRow, TransactionSummary, TransactionView
from airflow_txn.model.csn import ROLLBACK_CSN

PACKAGE = "airflow_txn.airflow.plugins.web"


def moment(iso: str) -> pendulum.DateTime:
    """A moment of the page's data (ISO 8601 in UTC: data.py) as a time in UTC, to the second."""
    return pendulum.instance(datetime.fromisoformat(iso)).in_tz("UTC").replace(microsecond=0)


def csn(value: int | None) -> int | str | None:
    """A part's creation or removal CSN as the page names it."""
    return "rollback" if value == ROLLBACK_CSN else value


def own_label(txn: TransactionSummary) -> str:
    """The label, unless it only says `<dag_id>/<run_id>` (the DAG and run columns do)."""
    label = txn["label"]
    return "" if txn["dag_id"] and label == f"{txn['dag_id']}/{txn['run_id']}" else str(label or "")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader(PACKAGE, "templates"), autoescape=jinja2.select_autoescape(),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=lambda value: "" if value is None else value)
    env.filters.update(moment=moment, csn=csn, own_label=own_label)
    env.globals["version"] = __version__
    return env


TEMPLATES = Jinja2Templates(env=_environment())
STATIC = StaticFiles(packages=[(PACKAGE, "static")])  # mounted at /static by app.py


def index_page(request: Request, root: str, *, user: str, watermark: PageWatermark,
               tables: Sequence[TableRow] | None, conn_id: str, transactions: Sequence[TransactionSummary],
               filters: Mapping[str, str | int | None], states: Sequence[str],
               details: Sequence[tuple[TransactionView, bool]] = (),
               tags: Sequence[PageTag] | None = None) -> HTMLResponse:
    """The transactions page; `details` (a DAG run's transactions, each with whether the user may roll
    it back) shown as cards when the filters name a run; `tables` and `tags` (named snapshots) None: the
    user may not see them."""
    return TEMPLATES.TemplateResponse(request, "index.html", {
        "root": root, "user": user, "watermark": watermark, "tables": tables, "conn_id": conn_id,
        "transactions": transactions, "filters": filters, "states": states, "details": details, "tags": tags})


def transaction_page(request: Request, root: str, *, user: str, watermark: PageWatermark,
                     detail: TransactionView, can_roll_back: bool) -> HTMLResponse:
    """One transaction's page: its card and every part."""
    return TEMPLATES.TemplateResponse(request, "transaction.html", {
        "root": root, "user": user, "watermark": watermark, "detail": detail, "can_roll_back": can_roll_back})


def error_page(request: Request, root: str, code: int, message: str) -> HTMLResponse:
    """An error on a page: the message and a link back to the transactions."""
    return TEMPLATES.TemplateResponse(request, "error.html", {"root": root, "message": message}, status_code=code)
