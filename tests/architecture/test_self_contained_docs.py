"""The repository explains itself: docs/DESIGN.md numbers the thirteen invariants the code cites, and no code
or doc points outside the repository (a sibling design folder, a contract file, source-document files)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCANNED = ["airflow_txn", "tests", "docs", "scripts", "dags", "benchmarks", "plugins", "docker", ".ci", "README.md",
           "pyproject.toml"]
SKIPPED_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}

# Written so that this file's own source does not match them.
OUTSIDE_REFERENCES = {
    "a path into the sibling shared folder": re.compile(r"\.\./shared|/work/shared"),
    "the contract file": re.compile(r"\bCONTRACT\.md"),
    "a source-document file name": re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt"),
    "a numbered source document": re.compile(r"\bseeds? 0\d\d\b|\bseeds[/]", re.IGNORECASE),
}


def _text_files() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        top = REPO / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        found += [p for p in candidates if p.is_file() and not SKIPPED_DIRS & set(p.relative_to(REPO).parts)]
    return found


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # images and other binary files
        return None


def test_nothing_points_outside_the_repository() -> None:
    offences = []
    for path in _text_files():
        if path == Path(__file__).resolve():
            continue
        text = _read_text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for what, pattern in OUTSIDE_REFERENCES.items():
                if pattern.search(line):
                    offences.append(f"{path.relative_to(REPO)}:{number}: {what}: {line.strip()[:120]}")
    assert not offences, "cite docs/DESIGN.md (a section or 'invariant N') instead:\n" + "\n".join(offences)


def test_design_numbers_the_thirteen_invariants() -> None:
    design = (REPO / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    section = design.split("\n## The invariants", 1)[1].split("\n## ", 1)[0]
    numbers = [int(m) for m in re.findall(r"^(\d+)\. \*\*", section, flags=re.MULTILINE)]
    assert numbers == list(range(1, 14))


def test_the_docs_lists_name_the_design() -> None:
    for page in ("README.md", "docs/ARCHITECTURE.md"):
        assert "DESIGN.md" in (REPO / page).read_text(encoding="utf-8"), f"{page} does not list docs/DESIGN.md"
