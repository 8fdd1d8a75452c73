"""The plugin's HTML: the transactions page (filters, tables and their readable CSN, transactions,
and for a DAG run the parts each task staged) and one transaction's page. Server-rendered, every
value escaped; a few lines of vanilla JS roll back (two clicks: the Airflow UI's iframe allows no
confirm()) and refresh the watermark through the JSON API. No build step, no asset files."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from airflow_txn.csn import ROLLBACK_CSN

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:16px 20px;color:#1a202c;
     background:#fff;font-size:14px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 8px} h3{font-size:14px;margin:14px 0 6px}
a{color:#2563eb;text-decoration:none} a:hover{text-decoration:underline}
.muted{color:#64748b} .mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
table{border-collapse:collapse;width:100%;margin:4px 0 8px} th,td{text-align:left;padding:5px 8px;
     border-bottom:1px solid #e2e8f0;vertical-align:top} th{background:#f8fafc;font-weight:600;color:#475569}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.s-active{background:#dbeafe;color:#1e40af} .s-committed{background:#dcfce7;color:#166534}
.s-rolled_back{background:#fee2e2;color:#991b1b} .s-staged{background:#dbeafe;color:#1e40af}
.s-withdrawn,.s-superseded{background:#f1f5f9;color:#475569} .s-removing,.s-removed{background:#fef3c7;color:#92400e}
form.filters{display:flex;gap:10px;align-items:end;flex-wrap:wrap;margin:12px 0;padding:10px;background:#f8fafc;
     border:1px solid #e2e8f0;border-radius:6px} form.filters label{display:flex;flex-direction:column;font-size:12px;
     color:#475569;gap:3px} input,select{padding:4px 6px;border:1px solid #cbd5e1;border-radius:4px;font-size:13px}
button{padding:5px 12px;border-radius:4px;border:1px solid #2563eb;background:#2563eb;color:#fff;cursor:pointer}
button.rollback{background:#dc2626;border-color:#dc2626} button.rollback.armed{background:#7f1d1d}
button:disabled{opacity:.5;cursor:default}
.card{border:1px solid #e2e8f0;border-radius:6px;padding:10px 14px;margin:10px 0}
.topline{display:flex;gap:18px;flex-wrap:wrap;align-items:baseline} .nowrap{white-space:nowrap} .scroll{overflow-x:auto}
.reason{display:inline-block;min-width:160px;max-width:420px;overflow-wrap:anywhere}
"""

_JS = """
const ROOT = document.body.dataset.root;
for (const button of document.querySelectorAll("button.rollback")) {
  button.addEventListener("click", async () => {
    const out = document.getElementById("result-" + button.dataset.tid);
    if (!button.classList.contains("armed")) {
      button.classList.add("armed"); button.textContent = "Click again to roll back";
      out.textContent = "every part it staged will be withdrawn";
      return;
    }
    button.disabled = true; out.textContent = "rolling back...";
    const response = await fetch(ROOT + "/api/transactions/" + encodeURIComponent(button.dataset.tid) + "/rollback", {
      method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json"}, body: "{}"});
    const body = await response.json().catch(() => ({}));
    if (response.ok) { out.textContent = "rolled back"; setTimeout(() => location.reload(), 600); }
    else { out.textContent = response.status + ": " + (body.detail || response.statusText); button.disabled = false; }
  });
}
async function refreshWatermark() {
  const response = await fetch(ROOT + "/api/watermark", {credentials: "same-origin"});
  if (response.ok) { document.getElementById("watermark").textContent = (await response.json()).readable_csn; }
}
setInterval(refreshWatermark, 10000);
"""


def when(epoch: float | None) -> str:
    if epoch is None:
        return ""
    moment = time.gmtime(float(epoch))
    return (f'<span class="nowrap">{time.strftime("%Y-%m-%d", moment)}</span> '
            f'<span class="nowrap">{time.strftime("%H:%M:%S", moment)}</span>')



def badge(state: str | None) -> str:
    text = escape(str(state or ""))
    return f'<span class="badge s-{text}">{text.replace("_", " ")}</span>'


def text(value: Any) -> str:
    return "" if value is None else escape(str(value))


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str) -> str:
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="muted">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _document(root: str, title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>'
            f'<body data-root="{escape(root)}">{body}<script>{_JS}</script></body></html>')


def _filter_link(root: str, label: str | None, **query: str | None) -> str:
    """A link to the transactions page filtered by `query` (DAG, run), shown as `label`."""
    if not label:
        return ""
    params = urlencode({k: v for k, v in query.items() if v})
    return f'<a href="{escape(root)}/?{escape(params)}">{text(label)}</a>'


def csn(value: int | None) -> str:
    return "rollback" if value == ROLLBACK_CSN else text(value)


def _tid_link(root: str, tid: str) -> str:
    return f'<a class="mono nowrap" href="{escape(root)}/transactions/{quote(tid)}">{text(tid)}</a>'


def _header(root: str, watermark: Mapping[str, Any], user: str) -> str:
    """Title, readable CSN and (for a user who sees the whole warehouse) the newest commit."""
    latest = watermark.get("latest_commit") or {}
    pending = watermark.get("unapplied_commits")
    home = f'<a href="{escape(root)}/" style="color:inherit">airflow_txn transactions</a>'
    newest = "" if pending is None else (f'<span class="muted">latest commit CSN {text(latest.get("csn", "-"))}'
                                         f'{f", {pending} not applied yet" if pending else ""}</span>')
    return (f'<div class="topline"><h1>{home}</h1>'
            f'<span>readable CSN <b id="watermark" class="mono">{text(watermark["readable_csn"])}</b></span>'
            f'{newest}<span class="muted">signed in as {text(user)}</span></div>')


def _filters(root: str, filters: Mapping[str, Any], states: Sequence[str]) -> str:
    options = "".join(f'<option value="{s}"{" selected" if filters.get("state") == s else ""}>{s or "any"}</option>'
                      for s in ("", *states))
    return (f'<form class="filters" method="get" action="{escape(root)}/">'
            f'<label>DAG id<input name="dag_id" value="{text(filters.get("dag_id"))}" size="24"></label>'
            f'<label>Run id<input name="run_id" value="{text(filters.get("run_id"))}" size="40"></label>'
            f'<label>State<select name="state">{options}</select></label>'
            f'<label>Limit<input name="limit" value="{text(filters.get("limit"))}" size="4"></label>'
            f'<button type="submit">Find</button> <a href="{escape(root)}/">clear</a></form>')


def _tables_section(tables: Sequence[Mapping[str, Any]] | None, conn_id: str) -> str:
    """Every table and its readable commit, or (`tables` None) why the user does not see them."""
    if tables is None:
        return (f'<h2>Tables</h2><p class="muted">shown to users with read permission on connection '
                f'<span class="mono">{text(conn_id)}</span> (the whole warehouse)</p>')
    rows = [(f'<span class="mono">{text(t["table"])}</span>', f'<span class="mono">{text(t["last_commit_csn"])}</span>',
             text(t["readable_csn"]), text(t["pending_commit_csn"] or "")) for t in tables]
    return "<h2>Tables</h2>" + _table(
        ["table", "readable commit CSN (latest commit a reader sees)", "readable CSN (watermark)",
         "commit written, not applied yet"], rows, "no table yet")


def _own_label(txn: Mapping[str, Any]) -> str:
    """The label, unless it only says `<dag_id>/<run_id>` (the DAG and run columns do)."""
    label = txn["label"]
    return "" if txn["dag_id"] and label == f"{txn['dag_id']}/{txn['run_id']}" else text(label)


def _transactions_section(root: str, transactions: Sequence[Mapping[str, Any]]) -> str:
    labels = any(_own_label(t) for t in transactions)  # a label column only when a label says more
    rows = [(_tid_link(root, t["tid"]), badge(t["state"]), _filter_link(root, t["dag_id"], dag_id=t["dag_id"]),
             _filter_link(root, t["run_id"], dag_id=t["dag_id"], run_id=t["run_id"]),
             *([_own_label(t)] if labels else []), text(t["snapshot_csn"]), text(t["commit_csn"]),
             when(t["created_at"]), when(t["ended_at"]), f'<span class="reason">{text(t["failed_reason"])}</span>')
            for t in transactions]
    headers = ["tid", "state", "DAG", "run", *(["label"] if labels else []), "snapshot CSN", "commit CSN",
               "began (UTC)", "ended (UTC)", "rollback reason"]
    return f"<h2>Transactions ({len(transactions)})</h2>" + _table(headers, rows, "no transaction matches")


def _groups(title: str, groups: Sequence[Mapping[str, Any]], by_task: bool) -> str:
    """Parts grouped per task (key, tables, attempts) or per table (table, task keys)."""
    rows = []
    for g in groups:
        first = f'<span class="mono">{text(g["key"] if by_task else g["table"])}</span>'
        others = ", ".join(text(x) for x in (g["tables"] if by_task else g["tasks"]))
        attempts = [", ".join(str(a) for a in g["attempts"])] if by_task else []
        statuses = " ".join(f'<span class="nowrap">{badge(s)} {n}</span>' for s, n in sorted(g["statuses"].items()))
        rows.append((first, others, *attempts, text(g["parts"]), statuses, text(g["rows_added"]),
                     text(g["bytes_added"]), text(g["rows_removed"])))
    headers = (["task key (dag/task/map index)", "tables", "attempts"] if by_task else ["table", "task keys"])
    return f"<h3>{escape(title)}</h3>" + _table(
        [*headers, "parts", "status", "rows added", "bytes added", "rows removed"], rows, "no part staged")


def transaction_card(root: str, detail: Mapping[str, Any], can_roll_back: bool) -> str:
    """One transaction: what it is, the parts each task staged, per table, and the rollback button."""
    tid = str(detail["tid"])
    action = ""
    if detail["state"] == "active":
        disabled = "" if can_roll_back else ' disabled title="needs edit permission on the DAG"'
        action = (f'<button class="rollback" data-tid="{escape(tid)}"{disabled}>Roll back</button> '
                  f'<span class="muted" id="result-{escape(tid)}"></span>')
    facts = [("DAG", _filter_link(root, detail["dag_id"], dag_id=detail["dag_id"])),
             ("run", _filter_link(root, detail["run_id"], dag_id=detail["dag_id"], run_id=detail["run_id"])),
             ("label", text(detail["label"])), ("isolation", text(detail["isolation"])),
             ("snapshot CSN", text(detail["snapshot_csn"])), ("commit CSN", text(detail["commit_csn"])),
             ("began (UTC)", when(detail["created_at"])), ("ended", when(detail["ended_at"])),
             ("lease until", when(detail["lease_deadline"]) if detail["state"] == "active" else ""),
             ("rollback reason", text(detail["failed_reason"]))]
    facts_html = " &middot; ".join(f'<span class="muted">{k}</span> {v}' for k, v in facts if v)
    return (f'<div class="card" id="txn-{escape(tid)}"><div class="topline"><h3>{_tid_link(root, tid)}</h3>'
            f'{badge(detail["state"])} {action}</div><p>{facts_html}</p>'
            + _groups("Parts staged per task", detail["by_task"], by_task=True)
            + _groups("Parts per table", detail["by_table"], by_task=False) + "</div>")


def index_page(root: str, *, user: str, watermark: Mapping[str, Any], tables: Sequence[Mapping[str, Any]] | None,
               conn_id: str, transactions: Sequence[Mapping[str, Any]], filters: Mapping[str, Any],
               states: Sequence[str],
               details: Sequence[tuple[Mapping[str, Any], bool]] = ()) -> str:
    run = ""
    if filters.get("run_id"):
        run = (f"<h2>DAG run {text(filters.get('dag_id'))} / {text(filters['run_id'])}</h2>"
               + ("".join(transaction_card(root, d, ok) for d, ok in details)
                  or '<p class="muted">no transaction was begun in this run</p>'))
    body = (_header(root, watermark, user) + _filters(root, filters, states) + run
            + _transactions_section(root, transactions) + _tables_section(tables, conn_id))
    return _document(root, "airflow_txn transactions", body)


def transaction_page(root: str, *, user: str, watermark: Mapping[str, Any], detail: Mapping[str, Any],
                     can_roll_back: bool) -> str:
    parts = [(f'<span class="mono">{text(p["table"])}</span>', text(p["partition"] or ""), badge(p["status"]),
              f'<span class="mono">{text(p["removal_key"] if p["role"] == "removed" else p["key"])}</span>',
              text(p["rows"]), text(p["bytes"]), csn(p["creation_csn"]), csn(p["removal_csn"]),
              f'<span class="mono muted">{text(p["path"])}</span>') for p in detail["parts"]]
    body = (_header(root, watermark, user) + transaction_card(root, detail, can_roll_back)
            + "<h2>Every part</h2>" + _table(["table", "partition", "status", "task key", "rows", "bytes",
                                              "creation CSN", "removal CSN", "path"], parts, "no part staged"))
    return _document(root, f"transaction {detail['tid']}", body)
