"""The ZooKeeper oracle's spec (no kazoo here): parsing `zookeeper://host:port[,host:port...]/chroot[?option=value&...]`
into a frozen config. Its registry entry is kind.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from airflow_txn.errors import TxnError
from airflow_txn.model.secrets import mask_secrets

NAME = "zookeeper"
"""The kind's name: the spec's scheme, the `oracle` metric tag (ZooKeeperKind.name, ZooKeeperOracle.name)."""
DEFAULT_CHROOT = "/airflow_txn"
_HOST = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):\d{1,5}")
_COMPONENT = re.compile(r"[A-Za-z0-9_.-]{1,100}")


@dataclass(frozen=True, slots=True)
class ZooKeeperSpec:
    """Where the log lives and how patient the client is.

    hosts            `h1:2181,h2:2181` (an ensemble: kazoo fails over between them)
    chroot           the warehouse's own subtree, e.g. `/airflow_txn/prod` (one per warehouse)
    timeout          seconds one oracle operation may take, retries included, before
                     OracleUnavailableError (option `timeout`, default 10)
    session_timeout  the ZooKeeper session timeout in seconds (option `session_timeout`, default 10)
    segment_size     records per log segment before it is sealed and a new one opens; sealed, applied
                     segments are what compaction removes (option `segment_size`, default 1000)
    group_commit     share one ZooKeeper round trip among the concurrent commits of a process
                     (option `group_commit`, 1 or 0, default 1)
    max_batch        most records one group commit writes (option `max_batch`, default 64)
    """

    hosts: str
    chroot: str = DEFAULT_CHROOT
    timeout: float = 10.0
    session_timeout: float = 10.0
    segment_size: int = 1000
    group_commit: bool = True
    max_batch: int = 64

    @classmethod
    def parse(cls, spec: str) -> ZooKeeperSpec:
        parts = urlsplit(spec.strip())
        if parts.scheme != "zookeeper" or not parts.netloc:
            raise TxnError(f"bad oracle {mask_secrets(spec)!r}: expected 'zookeeper://host:port[,host:port...]/chroot'")
        hosts = parts.netloc.split(",")
        bad = [h for h in hosts if not _HOST.fullmatch(h)]
        if bad:
            shown = bad[0].rpartition("@")[2] + (" (credentials never go in the oracle spec)" if "@" in bad[0] else "")
            raise TxnError(f"bad ZooKeeper host {shown!r} in {mask_secrets(spec)!r}: expected host:port")
        options: dict[str, Any] = _options(parts.query, spec)
        return cls(hosts=",".join(hosts), chroot=_chroot(parts.path, spec), **options)

    @property
    def url(self) -> str:
        return f"zookeeper://{self.hosts}{self.chroot}"


def _chroot(path: str, spec: str) -> str:
    components = [c for c in path.split("/") if c]
    if not components:
        return DEFAULT_CHROOT
    bad = [c for c in components if not _COMPONENT.fullmatch(c) or c in (".", "..")]
    if bad:
        raise TxnError(f"bad chroot component {bad[0]!r} in {mask_secrets(spec)!r}: use letters, digits, '_', '-', '.'")
    return "/" + "/".join(components)


def _options(query: str, spec: str) -> dict[str, float | int | bool]:
    out: dict[str, float | int | bool] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        try:
            if key in ("timeout", "session_timeout"):
                out[key] = float(value)
                ok = 0 < float(value) <= 3600
            elif key in ("segment_size", "max_batch"):
                out[key] = int(value)
                ok = 1 <= int(value) <= 1_000_000
            elif key == "group_commit":
                out[key] = value not in ("0", "false", "no")
                ok = value in ("0", "1", "true", "false", "yes", "no")
            else:
                raise TxnError(f"unknown option {key!r} in oracle {mask_secrets(spec)!r}: known are timeout, "
                               "session_timeout, segment_size, group_commit, max_batch")
        except ValueError:
            ok = False
        if not ok:
            raise TxnError(f"bad value {value!r} for option {key!r} in oracle {mask_secrets(spec)!r}")
    return out
