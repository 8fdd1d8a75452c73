"""Cross-site request forgery guard of the page's state changes (the rollback): what Airflow 3's
own API relies on. A request that authenticates with `Authorization: Bearer <JWT>` cannot be forged
by another site (a browser never adds that header for it). A request that authenticates with the
UI's session cookie (`_token`, which Airflow sets SameSite=Lax: a page on another port of the same
host still gets it sent) must carry a JSON body (a non-simple content type: a cross-origin script
needs a CORS preflight the API server refuses, and an HTML form cannot send it), and its `Origin`
(and `Sec-Fetch-Site`, when the browser sends them) must be this server's own."""

from __future__ import annotations

from urllib.parse import urlsplit

from airflow.configuration import conf
from fastapi import HTTPException, Request, status

JSON_TYPES = ("application/json",)
SAME_SITE_FETCH = ("same-origin", "none")  # `none`: the user typed the URL / a bookmark


def _bearer(request: Request) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def _own_origins(request: Request) -> set[str]:
    """This server as a browser names it: the Host the request was sent to, and `[api] base_url`."""
    own = {f"{request.url.scheme}://{request.headers.get('host', '')}".lower()}
    base = urlsplit(conf.get("api", "base_url", fallback="") or "")
    if base.scheme and base.netloc:
        own.add(f"{base.scheme}://{base.netloc}".lower())
    return own


def _refuse(why: str) -> None:
    raise HTTPException(status.HTTP_403_FORBIDDEN,
                        f"Forbidden: {why}. Send the request from the transactions page, or with "
                        "`Authorization: Bearer <token>` (POST /auth/token) and a JSON body")


def check_state_change(request: Request) -> None:
    """403 unless the state-changing `request` cannot have been forged by another site."""
    if _bearer(request):
        return
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in JSON_TYPES:
        _refuse(f"a state change signed in by the session cookie needs a JSON body, got {content_type or 'none'!r}")
    origin = request.headers.get("origin")
    if origin is not None and origin.lower() not in _own_origins(request):
        _refuse(f"a state change signed in by the session cookie must come from this site, not {origin!r}")
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site.lower() not in SAME_SITE_FETCH:
        _refuse(f"a state change signed in by the session cookie must come from this site, "
                f"not Sec-Fetch-Site {fetch_site!r}")
