"""Evidence records for docs/RELIABILITY.md: tests append one JSON line per checked case.

When AIRFLOW_TXN_EVIDENCE_DIR is set (scripts/reliability.py sets it), `record(suite, case, passed, **details)`
appends `{"suite", "case", "passed", "details", "at"}` to `<dir>/<suite>.jsonl`; otherwise it does nothing.
A test records a case only after its assertions ran, with passed=True, or records passed=False just before
re-raising the failure, so the report counts exactly what was checked.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

ENV_VAR = "AIRFLOW_TXN_EVIDENCE_DIR"


def record(suite: str, case: str, passed: bool, **details: Any) -> None:
    directory = os.environ.get(ENV_VAR)
    if not directory:
        return
    path = Path(directory) / f"{suite}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"suite": suite, "case": case, "passed": passed, "details": details, "at": time.time()},
                      default=str)
    with path.open("a", encoding="utf-8") as fh:  # one write per line: safe from several processes
        fh.write(line + "\n")
