"""Free loopback ports for the test harnesses' servers (ZooKeeper, PostgreSQL, Airflow's API server)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def dead_port(kind: str) -> Iterator[int]:
    """A loopback port whose server is gone (`kind="refused"`: nothing listens) or hung (`"silent"`: the kernel
    completes the handshakes, nobody ever reads or answers), for the fail-fast tests."""
    if kind == "refused":
        yield free_port()
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])
