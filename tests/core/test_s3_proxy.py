"""The benchmarks' counting S3 proxy (benchmarks/_s3_proxy.py): request kinds, and forwarding that leaves a
request as the client signed it (chunked bodies de-chunked, `Expect` dropped, the Host header kept)."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import importlib.util
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_s3_proxy", REPO / "benchmarks" / "_s3_proxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


proxy_module = _load()


@pytest.mark.parametrize(("method", "target", "headers", "kind"), [
    ("PUT", "/b/wh/t/p-1.parquet", {}, "PUT object"),
    ("PUT", "/b/_delta_log/0001.json", {"if-none-match": "*"}, "PUT object (conditional)"),
    ("PUT", "/b/k", {"x-amz-copy-source": "/b/j"}, "COPY"),
    ("PUT", "/b/k?partNumber=1&uploadId=u", {}, "PUT multipart part"),
    ("PUT", "/b", {}, "bucket"),
    ("POST", "/b/k?uploads", {}, "POST multipart create"),
    ("POST", "/b/k?uploadId=u", {}, "POST multipart complete"),
    ("POST", "/b?delete", {}, "DELETE (batch)"),
    ("GET", "/b/k", {}, "GET"),
    ("GET", "/b?list-type=2&prefix=wh/", {}, "LIST"),
    ("GET", "/b/?prefix=wh/", {}, "LIST"),
    ("HEAD", "/b/k", {}, "HEAD"),
    ("HEAD", "/b", {}, "bucket"),
    ("DELETE", "/b/k", {}, "DELETE"),
    ("DELETE", "/b/k?uploadId=u", {}, "DELETE multipart abort"),
])
def test_classify(method: str, target: str, headers: dict[str, str], kind: str) -> None:
    assert proxy_module.classify(method, target, headers) == kind
    assert kind in proxy_module.KINDS


class _Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]] = []

    def _do(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                          "body": body})
        status = 404 if self.path.endswith("/missing") else 200
        reply = b"ok:" + body
        self.send_response(status)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _do

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[Any]:
    _Upstream.seen = []
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        with proxy_module.CountingProxy(f"http://127.0.0.1:{upstream.server_address[1]}") as counting:
            yield counting
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_forwards_a_chunked_body_de_chunked_without_expect_and_counts_it(proxy: Any) -> None:
    client = http.client.HTTPConnection("127.0.0.1", int(proxy.endpoint.rsplit(":", 1)[1]))
    with contextlib.closing(client), proxy.counting() as tally:
        client.request("PUT", "/b/wh/p.parquet", body=iter([b"abc", b"defg"]), encode_chunked=True,
                       headers={"Transfer-Encoding": "chunked", "Expect": "100-continue", "X-Amz-Date": "d"})
        response = client.getresponse()
        assert (response.status, response.read()) == (200, b"ok:abcdefg")
        client.request("HEAD", "/b/wh/p.parquet")
        head = client.getresponse()
        assert (head.status, head.getheader("Content-Length"), head.read()) == (200, "3", b"")
        client.request("GET", "/b/missing")
        assert client.getresponse().read() == b"ok:"
        client.request("GET", "/b?list-type=2")
        client.getresponse().read()
    put = _Upstream.seen[0]
    names = {name.lower() for name in put["headers"]}
    assert put["body"] == b"abcdefg" and put["headers"]["Content-Length"] == "7"
    assert "transfer-encoding" not in names and "expect" not in names
    assert put["headers"]["Host"] == proxy.address and put["headers"]["X-Amz-Date"] == "d"
    assert dict(tally.kinds) == {"PUT object": 1, "HEAD": 1, "GET": 1, "LIST": 1} and tally.total == 4
    assert dict(tally.failed) == {"GET 404": 1}
    assert proxy_module.summary([tally]) == "1 PUT object, 1 GET, 1 HEAD, 1 LIST (of which failed: 1 GET 404)"
