"""A real ZooKeeper for tests, benchmarks and local runs (like kazoo's own testing harness).

Installs Debian's `zookeeper` package when it is missing (apt-get, once, under a file lock), then
starts servers as plain `java ... QuorumPeerMain zoo.cfg` processes with their config and data in a
directory of their own, on loopback ports only, and stops them by pid:

    with standalone(tmp_dir) as server:          # one server; server.hosts == "127.0.0.1:PORT"
        ...
    with ensemble(tmp_dir, size=3) as cluster:   # three servers electing a leader
        cluster.servers[0].kill()                 # SIGKILL one member; cluster.servers[0].start() again

`python -m tests.harness.zookeeper start DIR` starts a standalone server in the background and
prints its oracle spec; `... stop DIR` stops it (scripts/start_zookeeper.sh wraps both).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.ports import free_port

JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
JVM_FLAGS = ("-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
TICK_MS = 500  # sessions may then last 1 s .. 10 s (2 .. 20 ticks)
_INSTALL_LOCK = Path("/tmp/airflow_txn-zookeeper-install.lock")


class ZooKeeperUnavailable(RuntimeError):
    """ZooKeeper cannot be installed or started here (no Java, no apt-get as root, a port clash)."""


def ensure_installed() -> None:
    """Install Debian's zookeeper package if its jars are missing (idempotent, safe across processes)."""
    if all(Path(j).exists() for j in JARS):
        return
    if not Path("/usr/bin/apt-get").exists() or os.geteuid() != 0:
        raise ZooKeeperUnavailable("ZooKeeper is not installed: run `apt-get install -y zookeeper` as root")
    with open(_INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(Path(j).exists() for j in JARS):
            return
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "zookeeper"]):
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
            if done.returncode != 0 and command[1] == "install":
                raise ZooKeeperUnavailable(f"apt-get install zookeeper failed:\n{done.stderr[-2000:]}")
    if not all(Path(j).exists() for j in JARS):
        raise ZooKeeperUnavailable(f"the zookeeper package did not provide {JARS}")


def four_letter(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter command (ruok, srvr, stat, mntr); '' when nothing answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while True:
                data = sock.recv(4096)
                if not data:
                    break
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


@dataclass
class ZooKeeperServer:
    """One server: standalone, or member `myid` of an ensemble described by `peers`."""

    workdir: Path
    client_port: int = field(default_factory=free_port)
    myid: int = 0
    peers: tuple[tuple[int, int, int], ...] = ()  # (myid, quorum port, election port)
    force_sync: bool = True
    proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def mode(self) -> str:
        """standalone | leader | follower, or '' while not serving."""
        for line in four_letter(self.client_port, "srvr").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def _write_config(self) -> Path:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={TICK_MS}", "initLimit=20", "syncLimit=10", f"dataDir={data}",
            f"clientPort={self.client_port}", "clientPortAddress=127.0.0.1", "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr", "maxClientCnxns=0",
            f"forceSync={'yes' if self.force_sync else 'no'}", "autopurge.purgeInterval=0",
        ]
        for myid, quorum, election in self.peers:
            lines.append(f"server.{myid}=127.0.0.1:{quorum}:{election}")
        if self.peers:
            (data / "myid").write_text(f"{self.myid}\n")
        (self.workdir / "zoo.cfg").write_text("\n".join(lines) + "\n")
        (self.workdir / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.workdir / 'zookeeper.log'}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n"
        )
        return self.workdir / "zoo.cfg"

    def start(self, wait: bool = True, timeout: float = 30.0) -> ZooKeeperServer:
        ensure_installed()
        if self.proc is not None and self.proc.poll() is None:
            return self
        config = self._write_config()
        classpath = ":".join([str(self.workdir), *JARS])
        with open(self.workdir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                ["java", *JVM_FLAGS, "-cp", classpath, MAIN, str(config)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        if wait:
            self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ZooKeeperUnavailable(f"ZooKeeper exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.mode:
                return
            time.sleep(0.05)
        raise ZooKeeperUnavailable(f"ZooKeeper on port {self.client_port} not serving after {timeout}s:\n"
                                   f"{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for name in ("stdout.log", "zookeeper.log"):
            path = self.workdir / name
            if path.exists():
                out += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)

    def kill(self) -> None:
        """SIGKILL (a crash): its data directory stays, so start() brings it back with its state."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass
class ZooKeeperEnsemble:
    servers: list[ZooKeeperServer]

    @property
    def hosts(self) -> str:
        return ",".join(s.hosts for s in self.servers)

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        for server in self.servers:
            server.start(wait=False)
        for server in self.servers:
            server.wait_serving(timeout)
        return self

    def leader(self) -> ZooKeeperServer | None:
        return next((s for s in self.servers if s.mode == "leader"), None)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@contextlib.contextmanager
def standalone(workdir: Path, force_sync: bool = True) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(Path(workdir), force_sync=force_sync)
    server.workdir.mkdir(parents=True, exist_ok=True)
    try:
        yield server.start()
    finally:
        server.stop()


@contextlib.contextmanager
def ensemble(workdir: Path, size: int = 3) -> Iterator[ZooKeeperEnsemble]:
    peers = tuple((i + 1, free_port(), free_port()) for i in range(size))
    servers = [ZooKeeperServer(Path(workdir) / f"zk{i + 1}", myid=i + 1, peers=peers) for i in range(size)]
    for server in servers:
        server.workdir.mkdir(parents=True, exist_ok=True)
    cluster = ZooKeeperEnsemble(servers)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def _main(argv: list[str]) -> int:
    """`start DIR` -> prints the oracle spec of a background standalone server; `stop DIR` stops it."""
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.harness.zookeeper start|stop DIR", file=sys.stderr)
        return 2
    workdir = Path(argv[1]).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    pid_file, port_file = workdir / "zookeeper.pid", workdir / "zookeeper.port"
    if argv[0] == "stop":
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            pid_file.unlink()
        return 0
    if pid_file.exists() and port_file.exists() and four_letter(int(port_file.read_text()), "ruok") == "imok":
        print(f"zookeeper://127.0.0.1:{port_file.read_text().strip()}/airflow_txn")
        return 0
    server = ZooKeeperServer(workdir).start()
    assert server.proc is not None
    pid_file.write_text(str(server.proc.pid))
    port_file.write_text(str(server.client_port))
    print(f"zookeeper://{server.hosts}/airflow_txn")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
