"""The FastAPI app the plugin mounts in the Airflow API server at `/airflow-txn`.

JSON API (every route needs an Airflow user: `Authorization: Bearer <JWT>` or the UI's cookie):

    GET  /api/transactions?state=&dag_id=&run_id=&limit=   newest first; the user's readable DAGs only
    GET  /api/transactions/{tid}                           parts grouped by task and by table
    POST /api/transactions/{tid}/rollback {"reason": ...}  edit (PUT) permission on the DAG(s) needed;
                                                           a bearer token, or the cookie with a JSON body
                                                           from this site (same_origin.py)
    GET  /api/tables                                       each table's readable commit CSN (*)
    GET  /api/tags                                         the tags (named snapshots), newest CSN first (*)
    GET  /api/watermark                                    the readable CSN; the newest commit (*)
    (*) warehouse-wide: read permission on the plugin's connection (auth.py)
    Moments (created_at, ended_at, lease_deadline, committed_at) are ISO 8601 in UTC, as `airflow-txn --json`.

Pages (page.py, Jinja2 templates): `/` (transactions, filter by DAG run, tables, tags; per run the parts
each task staged) and `/transactions/{tid}`; their style and script under `/static/`. Errors: 400 bad
argument, 401 no user, 403 no permission, 404 unknown tid, 409 not active, 503 warehouse unreachable.
The warehouse is the hook's: connection `[airflow_txn] conn_id` (default `airflow_txn_default`), else
the AIRFLOW_TXN_* environment, opened once per process (warehouses.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from airflow.configuration import conf
from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow_txn.airflow.hooks.txn import DEFAULT_CONN_ID, TxnHook
from airflow_txn.airflow.plugins.web import data, page
from airflow_txn.airflow.plugins.web.auth import DagPermission, GetUserDep, login_url, may_read_warehouse, user_name
from airflow_txn.airflow.plugins.web.runs import run_tids
from airflow_txn.airflow.plugins.web.same_origin import check_state_change
from airflow_txn.airflow.plugins.web.warehouses import Warehouses
from airflow_txn.core.adapter import ACTIVE
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import (
    CatalogUnavailableError,
    InvalidNameError,
    OracleUnavailableError,
    TransactionClosedError,
    TransactionNotFoundError,
    TxnError,
    WarehouseNotFoundError,
)

URL_PREFIX = "/airflow-txn"
ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#2563eb" '
        'stroke-width="2"><ellipse cx="12" cy="5" rx="8" ry="3"/><path d="M4 5v14c0 1.7 3.6 3 8 3s8-1.3 8-3V5"/>'
        '<path d="M4 12c0 1.7 3.6 3 8 3s8-1.3 8-3"/></svg>')

app = FastAPI(title="airflow_txn", version="1",
              description="Transactions of the airflow_txn warehouse: list, inspect, roll back.")
app.mount("/static", page.STATIC, name="static")  # the page's style and script (no user needed)


def conn_id() -> str:
    return str(conf.get("airflow_txn", "conn_id", fallback=DEFAULT_CONN_ID))


WAREHOUSES = Warehouses()  # for the process's lifetime (a mounted app's lifespan never runs)


def open_warehouse() -> Warehouse:
    """The warehouse of the plugin's connection, opened once per process (503 when it cannot be)."""
    try:
        return WAREHOUSES.get(TxnHook(conn_id=conn_id()).config())
    except Exception as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            f"cannot open the warehouse of connection {conn_id()!r}: {exc}") from exc


WarehouseDep = Annotated[Warehouse, Depends(open_warehouse)]
SameOriginDep = Annotated[None, Depends(check_state_change)]


class RollbackBody(BaseModel):
    reason: str | None = Field(default=None, max_length=500, description="recorded as the rollback reason")


def root_of(request: Request) -> str:
    """This app's path prefix as the browser sees it (the API server's base path + the mount)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _is_page(request: Request) -> bool:
    return not request.url.path.startswith(root_of(request) + "/api/")


def _error(request: Request, code: int, message: str) -> Response:
    if _is_page(request):
        return page.error_page(request, root_of(request), code, message)
    return JSONResponse({"detail": message}, status_code=code)


_ERROR_CODES: list[tuple[type[Exception], int]] = [
    (TransactionNotFoundError, status.HTTP_404_NOT_FOUND),
    (WarehouseNotFoundError, status.HTTP_404_NOT_FOUND),
    (TransactionClosedError, status.HTTP_409_CONFLICT),
    (OracleUnavailableError, status.HTTP_503_SERVICE_UNAVAILABLE),
    (CatalogUnavailableError, status.HTTP_503_SERVICE_UNAVAILABLE),
    (InvalidNameError, status.HTTP_400_BAD_REQUEST),
    (TxnError, status.HTTP_400_BAD_REQUEST),
]


@app.exception_handler(TxnError)
async def _txn_error(request: Request, exc: TxnError) -> Response:
    code = next(code for kind, code in _ERROR_CODES if isinstance(exc, kind))
    return _error(request, code, str(exc))


@app.exception_handler(StarletteHTTPException)
async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """A page without a valid user goes to Airflow's login page (and back); the API answers 401."""
    no_user = exc.status_code == 401 or (exc.status_code == 403 and exc.detail == "Invalid JWT token")
    if no_user and _is_page(request) and request.method == "GET":
        return RedirectResponse(login_url(str(request.url)), status_code=status.HTTP_303_SEE_OTHER)
    return await http_exception_handler(request, exc)


def _require(allowed: bool, what: str) -> None:
    if not allowed:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"Forbidden: {what}")


def _transactions(wh: Warehouse, user: Any, state: str | None, dag_id: str | None, run_id: str | None,
                  limit: int) -> list[data.TransactionSummary]:
    data.check_filters(state, limit)
    tids = run_tids(dag_id, run_id) if dag_id and run_id else []
    return data.list_transactions(wh, state=state, dag_id=dag_id, run_id=run_id, limit=limit, run_tids=tids,
                                  readable=DagPermission(user, "GET"))


def _watermark(wh: Warehouse, user: Any) -> data.PageWatermark:
    return data.watermark(wh, warehouse_wide=may_read_warehouse(user, conn_id()))


def _detail(wh: Warehouse, user: Any, tid: str) -> data.TransactionView:
    detail = data.detail(wh.transaction_info(tid))
    _require(DagPermission(user, "GET").on_all(detail["owner_dags"]),
             f"reading transaction {tid} needs read permission on DAG(s) {detail['owner_dags'] or 'in general'}")
    can_roll_back = detail["state"] == ACTIVE and DagPermission(user, "PUT").on_all(detail["owner_dags"])
    return data.TransactionView(**detail, can_roll_back=can_roll_back)


@app.get("/api/transactions")
def list_transactions(user: GetUserDep, wh: WarehouseDep, state: str | None = None, dag_id: str | None = None,
                      run_id: str | None = None, limit: int = 50) -> data.TransactionList:
    return data.TransactionList(readable_csn=wh.readable_csn(),
                                transactions=_transactions(wh, user, state, dag_id, run_id, limit))


@app.get("/api/transactions/{tid}")
def get_transaction(tid: str, user: GetUserDep, wh: WarehouseDep) -> data.TransactionView:
    return _detail(wh, user, tid)


@app.post("/api/transactions/{tid}/rollback")
def roll_back(tid: str, user: GetUserDep, _same_origin: SameOriginDep, wh: WarehouseDep,
              body: RollbackBody | None = None) -> data.TransactionView:
    info = wh.transaction_info(tid)
    dags = data.owner_dags(info)
    _require(DagPermission(user, "PUT").on_all(dags),
             f"rolling back {tid} needs edit permission on DAG(s) {dags or 'in general'}")
    if info["state"] != ACTIVE:
        raise TransactionClosedError(f"transaction {tid} is {info['state']}, not active: nothing to roll back")
    reason = f"rolled back by {user_name(user)} on the airflow_txn page"
    if body is not None and body.reason:
        reason += f": {body.reason}"
    wh.attach(tid).rollback(reason=reason)
    return _detail(wh, user, tid)


@app.get("/api/tables")
def list_tables(user: GetUserDep, wh: WarehouseDep) -> data.TableList:
    _require(may_read_warehouse(user, conn_id()),
             f"the tables of the whole warehouse need read permission on connection {conn_id()!r}")
    return data.TableList(tables=data.tables(wh))


@app.get("/api/tags")
def list_tags(user: GetUserDep, wh: WarehouseDep) -> list[data.PageTag]:
    _require(may_read_warehouse(user, conn_id()),
             f"the tags of the whole warehouse need read permission on connection {conn_id()!r}")
    return data.tags(wh)


@app.get("/api/watermark")
def get_watermark(user: GetUserDep, wh: WarehouseDep) -> data.PageWatermark:
    return _watermark(wh, user)


@app.get("/", response_class=HTMLResponse)
def transactions_page(request: Request, user: GetUserDep, wh: WarehouseDep, state: str | None = None,
                      dag_id: str | None = None, run_id: str | None = None, limit: int = 50) -> HTMLResponse:
    rows = _transactions(wh, user, state, dag_id, run_id, limit)
    cards = []
    if dag_id and run_id:
        for row in rows:
            try:
                detail = _detail(wh, user, row["tid"])
            except HTTPException:  # staged by a DAG this user may not read: listed, not detailed
                continue
            cards.append((detail, bool(detail["can_roll_back"])))
    tables = data.tables(wh) if may_read_warehouse(user, conn_id()) else None
    tags = data.tags(wh) if tables is not None else None
    return page.index_page(request, root_of(request), user=user_name(user), watermark=_watermark(wh, user),
                           tables=tables, conn_id=conn_id(), transactions=rows, details=cards, states=data.STATES,
                           filters={"state": state or "", "dag_id": dag_id, "run_id": run_id, "limit": limit},
                           tags=tags)


@app.get("/transactions/{tid}", response_class=HTMLResponse)
def transaction_page(request: Request, tid: str, user: GetUserDep, wh: WarehouseDep) -> HTMLResponse:
    detail = _detail(wh, user, tid)
    return page.transaction_page(request, root_of(request), user=user_name(user), watermark=_watermark(wh, user),
                                 detail=detail, can_roll_back=bool(detail["can_roll_back"]))


@app.get("/icon.svg")
def icon() -> Response:
    return Response(ICON, media_type="image/svg+xml")
