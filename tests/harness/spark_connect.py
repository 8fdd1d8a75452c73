"""A real Spark Connect server for tests: the installed pyspark's own `sbin/start-connect-server.sh`, never a mock.

One server process (local[2], its own JVM) listens on a free loopback port; its pid file and logs go to a
directory of its own. It is ready when its `.out` log says "Spark Connect server started" (~5 s here); a
client attaches with `SparkSession.builder.remote(server.url)` in about half a second. Its Python workers
(the data source's code runs there) use this interpreter, so they import airflow_txn from this checkout.

    with server(tmp_dir) as connect:            # connect.url == "sc://127.0.0.1:PORT"
        spark = SparkSession.builder.remote(connect.url).getOrCreate()
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.harness.ports import free_port

HOST = "127.0.0.1"
READY = "Spark Connect server started"
CONF = {
    "spark.connect.grpc.binding.address": HOST,  # the default binds every interface
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": HOST,
    "spark.driver.bindAddress": HOST,
    "spark.python.worker.reuse": "true",
}


class SparkConnectUnavailable(RuntimeError):
    """The server did not start (no Java, a port clash, no "started" line within the deadline)."""


@dataclass(frozen=True)
class ConnectServer:
    url: str
    """`sc://127.0.0.1:PORT`, what SparkSession.builder.remote takes."""
    workdir: Path

    @property
    def log(self) -> str:
        """The server's `.out` log so far (for a failure message)."""
        return "\n".join(p.read_text(errors="replace") for p in sorted((self.workdir / "logs").glob("*.out")))


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _env(workdir: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_PID_DIR": str(workdir),
            "SPARK_LOG_DIR": str(workdir / "logs"), "SPARK_LOCAL_IP": HOST, "PYSPARK_PYTHON": sys.executable,
            "SPARK_IDENT_STRING": f"airflow_txn-{workdir.name}"}


@contextlib.contextmanager
def server(workdir: Path, timeout: float = 120.0, conf: dict[str, str] | None = None) -> Iterator[ConnectServer]:
    """A started Spark Connect server for the block, stopped after it."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = [str(spark_home() / "sbin" / "start-connect-server.sh"), "--master", "local[2]",
            "--conf", f"spark.connect.grpc.binding.port={port}"]
    for key, value in {**CONF, **(conf or {})}.items():
        args += ["--conf", f"{key}={value}"]
    env = _env(workdir)
    started = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    connect = ConnectServer(f"sc://{HOST}:{port}", workdir)
    try:
        if started.returncode != 0:
            raise SparkConnectUnavailable(f"start-connect-server.sh failed: {started.stdout}{started.stderr}")
        deadline = time.monotonic() + timeout
        while READY not in connect.log:
            if time.monotonic() > deadline:
                raise SparkConnectUnavailable(f"no {READY!r} within {timeout:.0f} s:\n{connect.log[-3000:]}")
            time.sleep(0.25)
        yield connect
    finally:
        subprocess.run([str(spark_home() / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True,
                       timeout=60)
