"""The quick-start demo runs end to end on the embedded default and reports success."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_txn.demo import main


def test_demo_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--catalog", f"sqlite:///{tmp_path / 'c.db'}", "--root", str(tmp_path / "root")]) == 0
    out = capsys.readouterr().out
    assert "DEMO OK" in out
    assert "tables unchanged: True" in out
    assert "customers=20  orders=40  order_items=80" in out  # the retry did not duplicate
