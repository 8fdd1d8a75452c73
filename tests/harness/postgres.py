"""A private PostgreSQL cluster for tests that crash and restart the server (like testing/zookeeper.py).

Tests that restart PostgreSQL must never touch the shared server other tests use, so this starts a
cluster of its own: `initdb` from the installed PostgreSQL binaries (/usr/lib/postgresql/<v>/bin)
into a fresh temp directory, listening on its own loopback port (and a unix socket inside its data
directory), trust authentication, started and stopped with `pg_ctl` on that data directory only:

    with private_cluster() as pg:         # pg.url == "postgresql+psycopg://postgres@127.0.0.1:PORT/postgres"
        ...
        pg.restart(mode="immediate")      # a crash: every backend dies at once, WAL recovery on start

PostgreSQL refuses to run as root; when this process is root the server runs as the `postgres` OS user
(Debian's package creates it) and the directory is handed to that user. fsync is off: the tests crash the
server process, never the machine, so everything written reaches the OS page cache and survives.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.ports import free_port

SERVER_SETTINGS = ("-c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off "
                   "-c max_connections=60 -c shared_buffers=16MB")
START_TIMEOUT = 60.0


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries here, or the private cluster could not be initialised or started."""


def bin_dir() -> Path:
    """The newest installed PostgreSQL server's bin directory (holding initdb, pg_ctl, postgres)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise PostgresUnavailable("PostgreSQL server binaries (initdb, pg_ctl) are not installed: "
                              "apt-get install -y postgresql")


@dataclass
class PostgresCluster:
    """One private cluster in `workdir` (created by private_cluster); start / stop / restart by pg_ctl."""

    workdir: Path
    port: int = field(default_factory=free_port)
    bindir: Path = field(default_factory=bin_dir)

    @property
    def data(self) -> Path:
        return self.workdir / "data"

    @property
    def log_file(self) -> Path:
        return self.workdir / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess[str]:
        extra: dict[str, Any] = {}
        if os.geteuid() == 0:
            extra["user"] = "postgres"
        return subprocess.run([str(self.bindir / argv[0]), *argv[1:]], cwd=self.workdir, capture_output=True,
                              text=True, timeout=timeout, check=False, env=_server_env(), **extra)

    def init(self) -> PostgresCluster:
        done = self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                         "--locale=C", "--no-sync")
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return self

    def start(self) -> PostgresCluster:
        options = f"-p {self.port} -k {self.data} {SERVER_SETTINGS}"
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log_file), "-o", options, "-w",
                         "-t", str(int(START_TIMEOUT)), "start")
        if done.returncode != 0:
            raise PostgresUnavailable(f"pg_ctl start failed:\n{done.stderr[-2000:]}\n{self.log_tail()}")
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (clean) or `immediate` (every process killed, recovery at next start)."""
        if not self.running:
            return
        done = self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", str(int(START_TIMEOUT)), "stop")
        if done.returncode != 0 and self.running:
            raise PostgresUnavailable(f"pg_ctl stop -m {mode} failed:\n{done.stderr[-2000:]}")

    def restart(self, mode: str = "immediate", down_seconds: float = 0.0) -> None:
        """Stop (`immediate` = a crash), stay down `down_seconds`, start again (crash recovery runs)."""
        self.stop(mode)
        time.sleep(down_seconds)
        self.start()

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs (from the data directory's postmaster.pid)."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    @property
    def running(self) -> bool:
        return self.pid is not None

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_file.exists():
            return ""
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])


def _server_env() -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TZ")
    return {k: v for k, v in os.environ.items() if k in keep} | {"LC_ALL": "C"}


@contextlib.contextmanager
def private_cluster() -> Iterator[PostgresCluster]:
    """A fresh private cluster, started; stopped (immediate) and its directory removed afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix="airflow_txn-pg-"))
    try:
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(workdir, owner.pw_uid, owner.pw_gid)
    except KeyError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise PostgresUnavailable("running as root but there is no `postgres` OS user to run the server") from exc
    cluster = PostgresCluster(workdir)
    try:
        yield cluster.init().start()
    finally:
        try:
            cluster.stop("immediate")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
