"""Debian's headless Chromium for the tests that render the plugin page (driven by Playwright with
`executable_path=CHROMIUM`: no browser download).

Installs the `chromium` and `chromium-driver` packages when missing (apt-get as root, once, under a
file lock): `python -c "from tests.harness.chromium import ensure_installed; ensure_installed()"`.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
PACKAGES = ("chromium", "chromium-driver")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_INSTALL_LOCK = Path("/tmp/airflow_txn-chromium-install.lock")


class ChromiumUnavailable(RuntimeError):
    """Chromium is missing and cannot be installed here (no apt-get, not root, or the install failed)."""


def ensure_installed() -> str:
    """The path of Debian's Chromium, installing it first if needed (idempotent, safe across processes)."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if not Path("/usr/bin/apt-get").exists() or os.geteuid() != 0:
        raise ChromiumUnavailable(f"Chromium is not installed: run `apt-get install -y {' '.join(PACKAGES)}` as root")
    with open(_INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if Path(CHROMIUM).exists():
            return CHROMIUM
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *PACKAGES]):
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
            if done.returncode != 0 and command[1] == "install":
                raise ChromiumUnavailable(f"apt-get install {' '.join(PACKAGES)} failed:\n{done.stderr[-2000:]}")
    if not Path(CHROMIUM).exists():
        raise ChromiumUnavailable(f"the chromium package did not provide {CHROMIUM}")
    return CHROMIUM


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG image; ValueError when `data` is not one."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)
