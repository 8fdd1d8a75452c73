"""The transactions page of the plugin on a real `airflow api-server` (loopback port, throw-away home,
started by `python -m demo.ui_server` as the README's newcomer does, SimpleAuthManager
users admin, editor (role user) and viewer): the JSON API over HTTP with bearer tokens, the
rollback's permission checks, the HTML pages, and the page rendered in headless Chromium (Playwright
driving Debian's /usr/bin/chromium, no browser download) alone and inside the Airflow UI. In
process: a DAG run's transaction found through its begin task's XCom whatever its label.

One server for the module (it takes 20-40 s to start). Set AIRFLOW_TXN_SCREENSHOTS=DIR to keep the
screenshots. (docs/img/plugin_page.png was taken the newcomer's way: scripts/demo.sh, scripts/ui.sh.)
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pendulum
import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.airflow.plugins.web import data
from airflow_txn.catalog.txn_records import ACTIVE, COMMITTED, ROLLED_BACK
from airflow_txn.checks import RowCountCheck, UniqueCheck, record, run_checks
from airflow_txn.model import moments
from airflow_txn.model.csn import ROLLBACK_CSN
from tests.airflow.helpers import run_dag
from tests.harness.chromium import ensure_installed, png_size
from tests.harness.ports import free_port

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
DAG = "multi_table_backfill"
RUNS = {"committed": "manual__2024-01-01T00:00:00+00:00", "active": "manual__2024-01-02T00:00:00+00:00",
        "clicked": "scheduled__2024-01-03T00:00:00+00:00"}
USERS = {"admin": "admin", "editor": "user", "viewer": "viewer"}  # name: role (password = name + "-pw")
ORDERS = pa.schema([("id", pa.int64()), ("day", pa.string())])
CUSTOMERS = pa.schema([("id", pa.int64())])
START_TIMEOUT = 240.0


def _orders(ids: list[int], day: str) -> pa.Table:
    return pa.table({"id": ids, "day": [day] * len(ids)}, schema=ORDERS)


def _customers(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids}, schema=CUSTOMERS)


TAG = "month-end-probe"


def populate(wh: Warehouse) -> dict[str, str]:
    """Four transactions: committed (run 1), active with a retried task (run 2), active (run 3, rolled
    back by a click in Chromium), and one with neither DAG nor run (label None, a key of its own)."""
    wh.create_table("shop.orders", ORDERS, partition_by=["day"])
    wh.create_table("shop.customers", CUSTOMERS)
    tids = {}
    txn = wh.begin(label=f"{DAG}/{RUNS['committed']}", metadata={"airflow": {"dag_id": DAG, "task_id": "begin"}})
    wh.attach(txn.tid).use_key(f"{DAG}/load_orders/0", attempt=1).append("shop.orders", _orders([1, 2, 3], "d1"))
    wh.attach(txn.tid).use_key(f"{DAG}/load_customers/0", attempt=1).append("shop.customers", _customers([1, 2]))
    record(txn, run_checks(txn, [RowCountCheck("shop.orders", min=3), UniqueCheck("shop.orders", "id")]), "check")
    txn.commit()
    tids["committed"] = txn.tid
    wh.tag(TAG, tables=["shop.orders"], note="closed by the probe")  # the page lists it with the tables

    txn = wh.begin(label=f"{DAG}/{RUNS['active']}")
    orders = f"{DAG}/load_orders/0"
    wh.attach(txn.tid).use_key(orders, attempt=1).append("shop.orders", _orders([10, 11], "d2"))  # the failed try
    wh.attach(txn.tid).use_key(orders, attempt=2).append("shop.orders", _orders([10, 11, 12], "d2"))  # its retry
    wh.attach(txn.tid).use_key(f"{DAG}/load_orders/1", attempt=1).append("shop.orders", _orders([13], "d3"))
    wh.attach(txn.tid).use_key(f"{DAG}/load_customers/0", attempt=1).append("shop.customers", _customers([3, 4]))
    tids["active"] = txn.tid

    txn = wh.begin(label=f"{DAG}/{RUNS['clicked']}")
    wh.attach(txn.tid).use_key(f"{DAG}/load_customers/0", attempt=1).append("shop.customers", _customers([5]))
    tids["clicked"] = txn.tid

    txn = wh.begin()
    txn.append("shop.customers", _customers([6]), key="manual-fix")
    tids["orphan"] = txn.tid
    return tids


@dataclass
class Site:
    """The running API server, its warehouse and a token per user."""

    base: str
    wh: Warehouse
    tids: dict[str, str]
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, user: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token(user)}"} if user else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=60, follow_redirects=False)

    def cookie_client(self, user: str) -> httpx.Client:
        """A client signed in only by the UI's session cookie (what a browser sends)."""
        return httpx.Client(base_url=self.base, cookies={"_token": self.token(user)}, timeout=60,
                            follow_redirects=False)

    def token(self, user: str | None) -> str:
        assert user is not None
        if user not in self.tokens:
            with httpx.Client(base_url=self.base, timeout=60) as client:
                response = client.post("/auth/token", json={"username": user, "password": f"{user}-pw"})
            assert response.status_code == 201, response.text
            self.tokens[user] = response.json()["access_token"]
        return self.tokens[user]

    def state(self, name: str) -> str:
        return str(self.wh.transaction_info(self.tids[name])["state"])


def _wait_until_up(process: subprocess.Popen[bytes], base: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the API server exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{base}/api/v2/monitor/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1)
    pytest.fail(f"the API server did not answer within {START_TIMEOUT}s:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    home = tmp_path_factory.mktemp("plugin_page")
    wh = Warehouse.open(catalog=f"sqlite:///{home / 'catalog.db'}", root=str(home / "warehouse"))  # the demo's layout
    tids = populate(wh)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}  # not the other tests' home
    users = [arg for name, role in USERS.items() for arg in ("--user", f"{name}:{role}:{name}-pw")]
    log = home / "api-server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "demo.ui_server", "--home", str(home),
                                    "--port", str(port), *users], cwd=REPO, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(process, base, log)
        yield Site(base=base, wh=wh, tids=tids, log=log)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        wh.close()


def test_the_api_and_the_page_need_an_airflow_user(site: Site) -> None:
    with site.client() as anonymous:
        assert anonymous.get("/airflow-txn/api/transactions").status_code == 401
        assert anonymous.get(f"/airflow-txn/api/transactions/{site.tids['active']}").status_code == 401
        assert anonymous.post(f"/airflow-txn/api/transactions/{site.tids['active']}/rollback").status_code == 401
        page = anonymous.get("/airflow-txn/", params={"dag_id": DAG})
        assert page.status_code == 303 and page.headers["location"].startswith("/auth/login?next=")
        forged = anonymous.get("/airflow-txn/api/watermark", headers={"Authorization": "Bearer not-a-token"})
        assert forged.status_code in (401, 403)
    assert site.state("active") == ACTIVE


def test_the_plugin_is_registered_in_the_api_server(site: Site) -> None:
    with site.client("viewer") as viewer:
        plugins = viewer.get("/api/v2/plugins", params={"limit": 100}).json()["plugins"]
    [plugin] = [p for p in plugins if p["name"] == "airflow_txn"]
    assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == ["/airflow-txn"]
    views = {v["destination"]: v for v in plugin["external_views"]}
    assert views["nav"]["href"] == "/airflow-txn/" and views["nav"]["name"] == "Transactions"
    assert views["dag_run"]["href"] == "/airflow-txn/?dag_id={DAG_ID}&run_id={RUN_ID}"
    assert any("listener" in name for name in plugin["listeners"])


def test_the_json_api_lists_filters_and_groups_parts_by_task(site: Site) -> None:
    with site.client("viewer") as viewer:
        listed = viewer.get("/airflow-txn/api/transactions").json()
        assert listed["readable_csn"] == site.wh.readable_csn()
        by_tid = {t["tid"]: t for t in listed["transactions"]}
        assert set(site.tids.values()) <= set(by_tid)
        assert by_tid[site.tids["committed"]]["run_id"] == RUNS["committed"]
        assert by_tid[site.tids["orphan"]]["dag_id"] is None

        of_run = viewer.get("/airflow-txn/api/transactions", params={"dag_id": DAG, "run_id": RUNS["active"]}).json()
        assert [t["tid"] for t in of_run["transactions"]] == [site.tids["active"]]
        committed = viewer.get("/airflow-txn/api/transactions", params={"state": COMMITTED}).json()["transactions"]
        assert [t["tid"] for t in committed] == [site.tids["committed"]]
        of_dag = viewer.get("/airflow-txn/api/transactions", params={"dag_id": DAG, "limit": 2}).json()
        assert len(of_dag["transactions"]) == 2

        detail = viewer.get(f"/airflow-txn/api/transactions/{site.tids['active']}").json()
        assert detail["can_roll_back"] is False  # a viewer may look, not roll back
        tasks = {g["key"]: g for g in detail["by_task"]}
        assert set(tasks) == {f"{DAG}/load_orders/0", f"{DAG}/load_orders/1", f"{DAG}/load_customers/0"}
        retried = tasks[f"{DAG}/load_orders/0"]
        assert retried["task"] == {"dag_id": DAG, "task_id": "load_orders", "map_index": 0}
        assert retried["attempts"] == [1, 2] and retried["statuses"] == {"staged": 1, "withdrawn": 1}
        assert retried["rows_added"] == 3  # the retry's rows only: the failed try's are withdrawn
        tables = {g["table"]: g for g in detail["by_table"]}
        assert tables["shop.orders"]["rows_added"] == 4 and tables["shop.customers"]["rows_added"] == 2

        for path, code in [("/airflow-txn/api/transactions/9-9-00000000000000ff", 404),
                           ("/airflow-txn/api/transactions/not-a-tid", 400),
                           ("/airflow-txn/api/transactions?state=finished", 400),
                           ("/airflow-txn/api/transactions?limit=0", 400)]:
            response = viewer.get(path)
            assert response.status_code == code, (path, response.text)
            assert response.json()["detail"]


def test_tables_show_their_readable_commit_and_the_watermark(site: Site) -> None:
    commit_csn = site.wh.transaction_info(site.tids["committed"])["commit_csn"]
    with site.client("admin") as admin:  # the whole warehouse: read permission on the connection
        tables = {t["table"]: t for t in admin.get("/airflow-txn/api/tables").json()["tables"]}
        watermark = admin.get("/airflow-txn/api/watermark").json()
    assert set(tables) == {"shop.orders", "shop.customers"}
    assert tables["shop.orders"]["last_commit_csn"] == commit_csn == site.wh.last_commit_csn("shop.orders")
    assert tables["shop.orders"]["readable_csn"] == site.wh.readable_csn() == watermark["readable_csn"]
    assert watermark["latest_commit"]["tid"] == site.tids["committed"]


def test_the_json_api_gives_moments_as_iso_8601_in_utc_like_the_cli(site: Site) -> None:
    """Every moment of the API (a transaction's, the newest commit's, a tag's) is what `airflow-txn --json` prints
    for it: ISO 8601 in UTC to the microsecond (airflow_txn/model/moments.py), not epoch seconds."""
    info = site.wh.transaction_info(site.tids["committed"])
    with site.client("admin") as admin:
        listed = {t["tid"]: t for t in admin.get("/airflow-txn/api/transactions").json()["transactions"]}
        detail = admin.get(f"/airflow-txn/api/transactions/{site.tids['committed']}").json()
        active = admin.get(f"/airflow-txn/api/transactions/{site.tids['active']}").json()
        latest = admin.get("/airflow-txn/api/watermark").json()["latest_commit"]
        [tag] = admin.get("/airflow-txn/api/tags").json()
    for shown in (listed[info["tid"]], detail):
        assert (shown["created_at"], shown["ended_at"], shown["lease_deadline"]) == (
            moments.utc(info["created_at"]), moments.utc(info["ended_at"]), moments.utc(info["lease_deadline"]))
    assert active["ended_at"] is None and active["created_at"].endswith("Z")
    log = {entry["csn"]: entry for entry in site.wh.commit_log(limit=50)}
    assert latest["committed_at"] == moments.utc(log[latest["csn"]]["committed_at"])
    assert tag["created_at"] == moments.utc(site.wh.tag_info(TAG)["created_at"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", tag["created_at"]), tag


def test_the_whole_warehouse_needs_read_permission_on_its_connection(site: Site) -> None:
    """issue 16, case 6: every table, its commit CSNs and the newest commit's tid and tables are for
    users who may read the plugin's connection (SimpleAuthManager: op, admin); a viewer of the DAGs
    gets the readable CSN and the transactions of the DAGs it may read, nothing warehouse-wide."""
    for name in ("viewer", "editor"):
        with site.client(name) as user:
            refused = user.get("/airflow-txn/api/tables")
            assert refused.status_code == 403 and "airflow_txn_default" in refused.json()["detail"]
            assert user.get("/airflow-txn/api/tags").status_code == 403  # tags are warehouse-wide too
            watermark = user.get("/airflow-txn/api/watermark").json()
            assert watermark == {"readable_csn": site.wh.readable_csn(), "latest_commit": None,
                                 "unapplied_commits": None}
            index = user.get("/airflow-txn/")
        assert index.status_code == 200
        assert "shop.orders" not in index.text and "latest commit CSN" not in index.text and TAG not in index.text
        assert "shown to users with read permission on connection" in index.text
    with site.client("admin") as admin:
        index = admin.get("/airflow-txn/")
        tags = admin.get("/airflow-txn/api/tags").json()
    assert "shop.orders" in index.text and "latest commit CSN" in index.text
    assert [(t["name"], t["tables"], t["note"]) for t in tags] == [(TAG, ["shop.orders"], "closed by the probe")]


def test_the_api_server_opens_the_warehouse_once(site: Site) -> None:
    """issue 16, case 8: the page keeps one Warehouse per connection per process: however many
    requests (and watermark polls) ran, the API server's log says it opened the warehouse once."""
    with site.client("viewer") as viewer:
        for path in ("/airflow-txn/api/watermark", "/airflow-txn/api/transactions", "/airflow-txn/"):
            assert viewer.get(path).status_code == 200
    assert site.log.read_text().count("airflow_txn page: opened Warehouse(") == 1


def _csrf_victim(site: Site) -> str:
    """A fresh active transaction of the DAG (the populated ones belong to other tests)."""
    txn = site.wh.begin(label=f"{DAG}/manual__csrf")
    site.wh.attach(txn.tid).use_key(f"{DAG}/load_customers/0", attempt=1).append("shop.customers", _customers([7]))
    return txn.tid


FOREIGN = "http://evil.example"


def test_a_state_change_by_cookie_needs_a_json_body_from_this_site(site: Site) -> None:
    """issue 16, case 5: with only the session cookie, a rollback posted as a plain cross-site form
    (empty or form body, any content type, a foreign Origin or Sec-Fetch-Site) gets 403 and rolls
    nothing back; the page's own request (JSON, same origin) and a bearer token still work."""
    tid = _csrf_victim(site)
    url = f"/airflow-txn/api/transactions/{tid}/rollback"
    forged = [
        {"headers": {"Origin": FOREIGN}},
        {"headers": {"Origin": FOREIGN, "Content-Type": "application/x-www-form-urlencoded"}, "content": "reason=x"},
        {"headers": {"Origin": FOREIGN, "Content-Type": "text/plain"}, "content": '{"reason": "x"}'},
        {"headers": {"Origin": FOREIGN, "Content-Type": "application/json"}, "content": "{}"},
        {"headers": {"Origin": "null", "Content-Type": "application/json"}, "content": "{}"},
        {"headers": {"Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}, "content": "{}"},
        {"headers": {"Origin": site.base, "Content-Type": "multipart/form-data; boundary=x"}, "content": ""},
    ]
    with site.cookie_client("admin") as admin:
        for request in forged:
            response = admin.post(url, **request)
            assert response.status_code == 403, (request, response.text)
            assert "Forbidden" in response.json()["detail"]
            assert site.wh.transaction_info(tid)["state"] == ACTIVE
        own = admin.post(url, headers={"Origin": site.base, "Sec-Fetch-Site": "same-origin"},
                         json={"reason": "from the page"})
    assert own.status_code == 200, own.text
    assert site.wh.transaction_info(tid)["state"] == ROLLED_BACK
    with site.client("admin") as admin:  # a bearer token: no body, no Origin needed (as Airflow's API)
        assert admin.post(f"/airflow-txn/api/transactions/{_csrf_victim(site)}/rollback").status_code == 200


def test_rollback_needs_edit_permission_on_the_dag(site: Site) -> None:
    tid = site.tids["active"]
    with site.client("viewer") as viewer:
        refused = viewer.post(f"/airflow-txn/api/transactions/{tid}/rollback", json={"reason": "try"})
        assert refused.status_code == 403 and DAG in refused.json()["detail"]
    assert site.state("active") == ACTIVE

    with site.client("admin") as admin:
        done = admin.post(f"/airflow-txn/api/transactions/{tid}/rollback", json={"reason": "bad input data"})
        assert done.status_code == 200, done.text
        assert done.json()["state"] == ROLLED_BACK
        info = site.wh.transaction_info(tid)
        assert info["state"] == ROLLED_BACK and info["failed_reason"].endswith("by admin on the airflow_txn page: "
                                                                               "bad input data")
        assert all(p["creation_csn"] == ROLLBACK_CSN for p in info["parts"])
        assert admin.post(f"/airflow-txn/api/transactions/{tid}/rollback").status_code == 409
        committed = admin.post(f"/airflow-txn/api/transactions/{site.tids['committed']}/rollback")
        assert committed.status_code == 409 and site.state("committed") == COMMITTED
        assert admin.post("/airflow-txn/api/transactions/9-9-00000000000000ff/rollback").status_code == 404

    with site.client("editor") as editor:  # role `user`: may edit DAGs; no DAG known: DAGs in general
        assert editor.post(f"/airflow-txn/api/transactions/{site.tids['orphan']}/rollback").status_code == 200
    assert site.state("orphan") == ROLLED_BACK


def test_the_pages_list_transactions_and_the_parts_each_task_staged(site: Site) -> None:
    with site.client("viewer") as viewer:
        index = viewer.get("/airflow-txn/")
        run = viewer.get("/airflow-txn/", params={"dag_id": DAG, "run_id": RUNS["committed"]})
        one = viewer.get(f"/airflow-txn/transactions/{site.tids['committed']}")
        missing = viewer.get("/airflow-txn/transactions/9-9-00000000000000ff")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert all(tid in index.text for tid in site.tids.values())
    assert "signed in as viewer" in index.text  # the tables: test_the_whole_warehouse_needs_read_permission...
    assert run.status_code == 200
    assert f"DAG run {DAG} / {RUNS['committed']}" in run.text and "Parts staged per task" in run.text
    assert f"{DAG}/load_orders/0" in run.text and site.tids["active"] not in run.text
    assert one.status_code == 200 and "Every part" in one.text and "day=d1" in one.text
    assert "<h3>Checks</h3>" in one.text and "unique(shop.orders: id)" in one.text  # what its check task found
    assert "<summary>metadata</summary>" in one.text and "\"task_id\": \"begin\"" in one.text  # the run that began it
    assert missing.status_code == 404 and "no transaction" in missing.text


def _keep(path: Path, name: str) -> None:
    keep = os.environ.get("AIRFLOW_TXN_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / name)


def _check_png(path: Path, min_width: int, min_height: int) -> None:
    raw = path.read_bytes()
    width, height = png_size(raw)
    assert width >= min_width and height >= min_height, (width, height)
    assert len(raw) > 20_000, len(raw)  # a rendered page, not a blank one


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = ensure_installed()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _signed_in(browser: Any, site: Site, user: str) -> Any:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_cookies([{"name": "_token", "value": site.token(user), "url": site.base}])
    return context


def test_the_page_renders_in_chromium_and_its_button_rolls_back(site: Site, browser: Any, tmp_path: Path) -> None:
    tid = site.tids["clicked"]
    context = _signed_in(browser, site, "admin")
    page = context.new_page()
    page.goto(f"{site.base}/airflow-txn/?dag_id={DAG}&run_id={RUNS['clicked'].replace('+', '%2B')}")
    shot = tmp_path / "run_page.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot, "run_page.png")
    _check_png(shot, 1400, 600)
    dom = page.content()
    assert tid in dom and RUNS["clicked"] in dom and f"{DAG}/load_customers/0" in dom
    assert page.get_by_role("heading", name="Tags").is_visible() and TAG in dom  # below the tables
    assert page.locator(f"#txn-{tid} .badge").first.inner_text() == "active"

    button = page.locator(f'button.rollback[data-tid="{tid}"]')
    button.click()  # arms it (the UI's iframe allows no confirm())
    assert site.state("clicked") == ACTIVE
    button.click()
    page.wait_for_function(f"!document.querySelector('#txn-{tid} button.rollback')", timeout=30_000)  # reloaded
    assert site.state("clicked") == ROLLED_BACK
    assert page.locator(f"#txn-{tid} .badge").first.inner_text() == "rolled back"
    context.close()


@pytest.fixture
def other_site(site: Site) -> Iterator[str]:
    """Another site on this host (another port): a page whose form posts to the rollback at once."""
    tid = _csrf_victim(site)
    html = (f'<!doctype html><form method="post" action="{site.base}/airflow-txn/api/transactions/{tid}/rollback">'
            '</form><script>document.forms[0].submit()</script>').encode()  # an empty body

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/#{tid}"
    server.shutdown()
    thread.join()
    server.server_close()


def test_a_cross_site_form_in_chromium_gets_403(site: Site, browser: Any, other_site: str) -> None:
    """issue 16, case 5: a signed-in admin's Chromium opens another site's page (same host, another
    port: Airflow's SameSite=Lax cookie is sent) whose form posts to the rollback: 403, nothing rolled back."""
    tid = other_site.rsplit("#", 1)[1]
    context = browser.new_context()
    context.add_cookies([{"name": "_token", "value": site.token("admin"), "url": site.base, "sameSite": "Lax",
                          "httpOnly": True}])
    page = context.new_page()
    with page.expect_response(lambda response: response.url.endswith(f"/{tid}/rollback")) as posted:
        page.goto(other_site)
    response = posted.value
    assert response.request.method == "POST" and response.status == 403, response.text()
    assert site.wh.transaction_info(tid)["state"] == ACTIVE
    context.close()


def test_the_page_is_a_view_of_the_airflow_ui(site: Site, browser: Any, tmp_path: Path) -> None:
    context = _signed_in(browser, site, "viewer")
    page = context.new_page()
    page.goto(f"{site.base}/plugin/airflow-txn")
    frame = page.frame_locator("iframe")
    frame.locator(f"text={site.tids['committed']}").first.wait_for(timeout=60_000)
    assert page.get_by_role("link", name="Transactions").count() >= 1  # the nav entry
    shot = tmp_path / "plugin_page.png"
    page.screenshot(path=str(shot))
    _keep(shot, "plugin_page.png")
    _check_png(shot, 1400, 1000)
    for tid in site.tids.values():  # every transaction is listed in the embedded page (waits while it renders)
        frame.locator(f"text={tid}").first.wait_for(timeout=30_000)
    context.close()


HTML_LABEL = "<script>alert(1)</script>"
HTML_KEY = '<img src=x onerror="alert(2)">'


def test_html_in_a_label_or_key_is_text_and_times_carry_their_zone(site: Site, browser: Any) -> None:
    """issue 17, item 9: the pages come from Jinja2 templates with autoescape: a label and a staging key
    holding HTML are shown as text on both pages (no script runs, no element is added, in Chromium),
    and the times a user sees are ISO 8601 with their zone (pendulum)."""
    txn = site.wh.begin(label=HTML_LABEL)
    site.wh.attach(txn.tid).use_key(HTML_KEY, attempt=1).append("shop.customers", _customers([8]))
    began = pendulum.from_timestamp(int(site.wh.transaction_info(txn.tid)["created_at"]), tz="UTC").isoformat()
    with site.client("admin") as admin:
        index, one = admin.get("/airflow-txn/"), admin.get(f"/airflow-txn/transactions/{txn.tid}")
    assert index.status_code == one.status_code == 200
    for html in (index.text, one.text):
        assert HTML_LABEL not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in one.text and "&lt;img src=x onerror=" in one.text

    context = _signed_in(browser, site, "admin")
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{site.base}/airflow-txn/")
    assert HTML_LABEL in page.inner_text("body")
    page.goto(f"{site.base}/airflow-txn/transactions/{txn.tid}")
    assert HTML_LABEL in page.inner_text("body") and HTML_KEY in page.inner_text("body")
    assert page.locator("img").count() == 0 and page.locator("script").count() == 1 and dialogs == []
    shown = page.locator(f"#txn-{txn.tid} time").first
    assert shown.get_attribute("datetime") == began and shown.inner_text() == began
    context.close()


def test_a_run_is_found_through_its_begin_task_xcom(dagbag: Any, txn_conn: Warehouse) -> None:
    from airflow_txn.airflow.plugins.web.runs import run_tids

    run = run_dag(dagbag, "txn_label_probe")
    assert str(run.state) == "success"
    tids = run_tids("txn_label_probe", run.run_id)
    [tid] = tids
    assert txn_conn.transaction_info(tid)["label"] == "nightly load with a label of its own"
    by_label = data.list_transactions(txn_conn, dag_id="txn_label_probe", run_id=run.run_id)
    assert by_label == []  # the label names no run ...
    [found] = data.list_transactions(txn_conn, dag_id="txn_label_probe", run_id=run.run_id, run_tids=tids)
    assert (found["tid"], found["dag_id"], found["run_id"]) == (tid, "txn_label_probe", run.run_id)  # ... the XCom does
    assert run_tids("txn_label_probe", "no_such_run") == [] and run_tids("no_such_dag", run.run_id) == []


def test_labels_and_keys_name_the_dag_run_and_task() -> None:
    assert data.dag_run_of("etl/manual__2024-01-01T00:00:00+00:00") == ("etl", "manual__2024-01-01T00:00:00+00:00")
    assert data.dag_run_of("nightly load") == (None, None) and data.dag_run_of(None) == (None, None)
    assert data.dag_run_of("a b/run") == (None, None)  # not a DAG id
    assert data.task_of("etl/group.load/3") == {"dag_id": "etl", "task_id": "group.load", "map_index": 3}
    assert data.task_of("etl/load/x") is None and data.task_of("manual-fix") is None
    info = {"label": "etl/run1", "parts": [{"key": "etl/load/-1", "removal_key": None},
                                           {"key": "other/load/0", "removal_key": "etl2/clean/-1"}]}
    assert data.owner_dags(info) == ["etl", "etl2", "other"]
    assert data.owner_dags({"label": None, "parts": [{"key": "manual-fix", "removal_key": None}]}) == []
    base = {"role": "created", "creation_csn": None, "removal_csn": None}
    assert data.part_status(base) == "staged"
    assert data.part_status({**base, "creation_csn": ROLLBACK_CSN}) == "withdrawn"
    assert data.part_status({**base, "creation_csn": 7}) == "committed"
    assert data.part_status({**base, "creation_csn": 7, "removal_csn": 7}) == "superseded"
    assert data.part_status({**base, "role": "removed", "creation_csn": 3}) == "removing"
    assert data.part_status({**base, "role": "removed", "creation_csn": 3, "removal_csn": 7}) == "removed"
