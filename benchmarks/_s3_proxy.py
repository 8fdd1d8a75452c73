"""A counting HTTP reverse proxy for an S3 endpoint: every request forwarded as is, counted by kind.

Owns request counting for the object-store rows (B10): each contender is pointed at the proxy's
endpoint instead of the S3 server's, and the proxy tells, per block of work, how many requests of
each kind it made (PUT object, GET, HEAD, LIST, COPY, DELETE, the multipart calls...):

    with CountingProxy("http://127.0.0.1:8333") as proxy:   # proxy.endpoint == "http://127.0.0.1:PORT"
        with proxy.counting() as counts:
            ...                                              # counts: Counter {"PUT object": 3, ...}

The request line, headers and body are forwarded unchanged (the Host header too, so SigV4 signatures
made for the proxy's address still verify), except for the hop-by-hop headers: a body sent with
`Transfer-Encoding: chunked` (the AWS C++/Rust SDKs do) is de-chunked and sent with a Content-Length,
and `Expect: 100-continue` is dropped (the proxy has read the whole body already). Responses are read
whole and sent back with a Content-Length. Loopback and benchmarks only: no TLS, no streaming.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import http.server
import io
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from email.message import Message
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                        "upgrade", "expect"})
KINDS = ("PUT object", "PUT object (conditional)", "GET", "HEAD", "LIST", "COPY", "DELETE", "DELETE (batch)",
         "POST multipart create", "PUT multipart part", "POST multipart complete", "DELETE multipart abort",
         "bucket", "other")
"""Every kind `classify` returns, in the order reports show them."""


def classify(method: str, target: str, headers: dict[str, str]) -> str:
    """The kind of one S3 request (path-style addressing: /bucket/key?query). `headers` lower-cased."""
    split = urlsplit(target)
    query = parse_qs(split.query, keep_blank_values=True)
    key = split.path.lstrip("/").partition("/")[2]
    if method == "PUT":
        return _classify_put(key, query, headers)
    if method == "POST":
        return next((kind for param, kind in (("uploads", "POST multipart create"),
                                              ("uploadId", "POST multipart complete"),
                                              ("delete", "DELETE (batch)")) if param in query), "other")
    if not key:
        return "LIST" if method == "GET" else "bucket"
    if method == "GET":
        return "LIST" if "list-type" in query else "GET"
    if method == "DELETE":
        return "DELETE multipart abort" if "uploadId" in query else "DELETE"
    return "HEAD" if method == "HEAD" else "other"


def _classify_put(key: str, query: dict[str, list[str]], headers: dict[str, str]) -> str:
    if not key:
        return "bucket"
    if "x-amz-copy-source" in headers:
        return "COPY"
    if "uploadId" in query:
        return "PUT multipart part"
    if "if-none-match" in headers or "if-match" in headers:
        return "PUT object (conditional)"
    return "PUT object"


def read_body(headers: Message, rfile: io.BufferedIOBase) -> bytes | None:
    """A request's body: de-chunked if sent with `Transfer-Encoding: chunked`, else Content-Length bytes."""
    if headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size = int(rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(chunks)
            chunks.append(rfile.read(size))
            rfile.readline()
    length = int(headers.get("Content-Length") or 0)
    return rfile.read(length) if length else None


@dataclass(frozen=True)
class Tally:
    """Requests by kind (`kinds`, every request) and the failed ones by kind and status (`failed`, e.g.
    "HEAD 404": a failed request is counted in both)."""

    kinds: collections.Counter[str]
    failed: collections.Counter[str]

    @property
    def total(self) -> int:
        return sum(self.kinds.values())


class CountingProxy:
    """A ThreadingHTTPServer on 127.0.0.1 forwarding to `upstream` (http://host:port), counting requests."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.counts: collections.Counter[str] = collections.Counter()
        self.failures: collections.Counter[str] = collections.Counter()  # kind + status, e.g. "HEAD 404"
        self._lock = threading.Lock()
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-counting-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def address(self) -> str:
        """host:port, for clients that take the endpoint without its scheme (pyarrow's endpoint_override)."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> CountingProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> CountingProxy:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def snapshot(self) -> Tally:
        with self._lock:
            return Tally(collections.Counter(self.counts), collections.Counter(self.failures))

    @contextlib.contextmanager
    def counting(self) -> Iterator[Tally]:
        """The requests made during the block (filled in when the block ends)."""
        before = self.snapshot()
        out = Tally(collections.Counter(), collections.Counter())
        try:
            yield out
        finally:
            after = self.snapshot()
            out.kinds.update(after.kinds - before.kinds)
            out.failed.update(after.failed - before.failed)

    def record(self, kind: str, status: int) -> None:
        with self._lock:
            self.counts[kind] += 1
            if status >= 400:
                self.failures[f"{kind} {status}"] += 1


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, proxy: CountingProxy) -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    """One client connection (kept alive: HTTP/1.1), with its own upstream connection."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else Nagle + the client's delayed ACK stall small responses ~40 ms
    server: _Server
    upstream: http.client.HTTPConnection | None = None

    def _do(self) -> None:
        body = read_body(self.headers, self.rfile)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body is not None or self.command in ("PUT", "POST"):
            headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
            headers["Content-Length"] = str(len(body or b""))
        kind = classify(self.command, self.path, {k.lower(): v for k, v in headers.items()})
        try:
            response = self._forward(body, headers)
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.server.proxy.record(kind, 502)
            self.send_error(502, f"upstream: {type(exc).__name__}")
            return
        self.server.proxy.record(kind, response.status)
        self._reply(response, data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _do

    def _forward(self, body: bytes | None, headers: dict[str, str]) -> http.client.HTTPResponse:
        proxy = self.server.proxy
        for attempt in (1, 2):  # a kept-alive upstream connection may have been closed: retry once
            if self.upstream is None:
                self.upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
            try:
                self.upstream.request(self.command, self.path, body=body, headers=headers)
                return self.upstream.getresponse()
            except (ConnectionError, http.client.HTTPException):
                self.upstream.close()
                self.upstream = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _reply(self, response: http.client.HTTPResponse, data: bytes) -> None:
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if self.command == "HEAD":
            declared = response.getheader("Content-Length")
            if declared is not None:
                self.send_header("Content-Length", declared)
            data = b""
        elif response.status >= 200 and response.status not in (204, 304):
            self.send_header("Content-Length", str(len(data)))
        # the end of the headers and the body in one write (end_headers' own work, plus the body)
        self.wfile.write(b"".join([*getattr(self, "_headers_buffer", []), b"\r\n", data]))
        self._headers_buffer: list[bytes] = []
        if response.will_close and self.upstream is not None:
            self.upstream.close()
            self.upstream = None

    def finish(self) -> None:
        """The client closed its connection: close the upstream one too."""
        super().finish()
        if self.upstream is not None:
            self.upstream.close()
            self.upstream = None

    def log_message(self, format: str, *args: object) -> None:
        pass


def summary(tallies: Sequence[Tally]) -> str:
    """The mean requests per tally (e.g. per commit) by kind, in KINDS order: "3 PUT object, 1 HEAD (of which
    failed: 1 HEAD 404)"; "none" if there were none."""
    kinds: collections.Counter[str] = collections.Counter()
    failed: collections.Counter[str] = collections.Counter()
    for tally in tallies:
        kinds.update(tally.kinds)
        failed.update(tally.failed)

    def mean(n: int) -> str:
        value = n / max(1, len(tallies))
        return f"{value:g}" if value == int(value) else f"{value:.1f}"

    ordered = [k for k in KINDS if kinds[k]] + sorted(k for k in kinds if k not in KINDS and kinds[k])
    text = ", ".join(f"{mean(kinds[k])} {k}" for k in ordered) or "none"
    if failed:
        text += " (of which failed: " + ", ".join(f"{mean(n)} {k}" for k, n in sorted(failed.items())) + ")"
    return text
