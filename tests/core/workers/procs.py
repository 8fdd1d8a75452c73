"""Starting txn_worker processes (never forked: a fresh interpreter each) and talking to them by JSON lines."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_txn.core import crashpoints

REPO = Path(__file__).resolve().parents[3]


class Child:
    """One worker process; its stdout JSON lines arrive on a queue, its stderr is kept for messages."""

    def __init__(self, mode: str, catalog: str, root: Path, *args: object, crash_at: str | None = None,
                 interactive: bool = False) -> None:
        env = {k: v for k, v in os.environ.items() if k != crashpoints.ENV_VAR}
        if crash_at is not None:
            env[crashpoints.ENV_VAR] = crash_at
        self.mode = mode
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.core.workers.txn_worker", mode, catalog, str(root), *map(str, args)],
            cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if interactive else subprocess.DEVNULL,
        )
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._stderr: list[str] = []
        self._threads = [threading.Thread(target=self._pump_stdout, daemon=True),
                         threading.Thread(target=self._pump_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._lines.put(json.loads(line))
            except ValueError:
                self._lines.put({"garbage": line})
        self.proc.stdout.close()

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)
        self.proc.stderr.close()

    @property
    def stderr(self) -> str:
        return "".join(self._stderr[-40:])

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def next(self, timeout: float) -> dict[str, Any]:
        """The next JSON line, or an AssertionError (with the child's stderr) after `timeout` seconds."""
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"{self.mode} worker (pid {self.proc.pid}, exit {self.proc.poll()}) sent nothing for "
                f"{timeout}s; stderr:\n{self.stderr}"
            ) from None

    def wait(self, timeout: float) -> int:
        """Wait for the exit (bounded) and for its output to be read; return the exit code."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.mode} worker (pid {self.proc.pid}) still ran after {timeout}s; "
                                 f"stderr:\n{self.stderr}") from None
        for thread in self._threads:
            thread.join(timeout=10)
        return code

    def messages(self) -> list[dict[str, Any]]:
        """Every line received and not yet taken (call after wait)."""
        out = []
        while True:
            try:
                out.append(self._lines.get_nowait())
            except queue.Empty:
                return out

    def kill(self) -> None:
        """SIGKILL this worker (by its own pid) if it still runs, then release its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for thread in self._threads:
            thread.join(timeout=10)
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()


Spawn = Callable[..., Child]
"""spawn(mode, *args, **kwargs) -> a started worker on the test's warehouse (the `spawn` fixture)."""
