"""The code fences of the Markdown pages (README.md, CHANGELOG.md, docs/, dags/README.md) are balanced and
well formed, so that no section of a page silently renders as code or loses its code: `mkdocs build --strict`
does not notice (a broken fence is still valid Markdown), and GitHub renders what it can.

The rules, stricter than CommonMark on purpose (what CommonMark accepts here is a typing mistake):
- a fence is a line of at least three backticks or tildes, indented by any number of spaces (a fence in a list
  item is indented as the item's text);
- an opening fence's info string is a language and optional attributes: no backtick in it, and no prose;
- a closing fence uses the opener's character, at least as many of them, the opener's indentation, and
  nothing after it (text after a closing fence is no closing fence: CommonMark keeps the code block open);
- every fence opened is closed before the end of the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^(?P<indent> *)(?P<marks>`{3,}|~{3,})(?P<rest>.*)$")
# a language (python, bash, text, mermaid, ...) and, optionally, attributes in braces ({ .python title="x" })
_INFO = re.compile(r"^[A-Za-z0-9_+.#-]*\s*(\{[^`{}]*\})?$")


@dataclass(frozen=True)
class _Open:
    line: int
    indent: int
    marks: str


def markdown_pages() -> list[Path]:
    """Every Markdown page of the repository a user reads (the site's and GitHub's)."""
    pages = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "dags" / "README.md"]
    pages += sorted((REPO / "docs").rglob("*.md"))
    return [p for p in pages if p.is_file()]


def fence_problems(text: str, name: str) -> list[str]:
    """`name:line: what is wrong` for each ill-formed or unbalanced fence of a Markdown text."""
    problems: list[str] = []
    open_: _Open | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if match is None:
            continue
        indent, marks, rest = len(match["indent"]), match["marks"], match["rest"].strip()
        if open_ is None:
            if (marks[0] == "`" and "`" in rest) or not _INFO.match(rest):
                problems.append(f"{name}:{number}: an opening fence followed by text, not a language: {line.strip()!r}")
            open_ = _Open(number, indent, marks)
            continue
        if marks[0] != open_.marks[0] or len(marks) < len(open_.marks):
            continue  # a shorter or other fence inside the code block is code
        if rest:
            problems.append(f"{name}:{number}: text after the fence that should close line {open_.line}'s "
                            f"(CommonMark keeps the block open): {line.strip()!r}")
            continue
        if indent != open_.indent:
            problems.append(f"{name}:{number}: a closing fence indented {indent} spaces, its opener (line "
                            f"{open_.line}) {open_.indent}")
        open_ = None
    if open_ is not None:
        problems.append(f"{name}:{open_.line}: a fence never closed")
    return problems


@pytest.mark.parametrize("page", markdown_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_fences_are_balanced_and_well_formed(page: Path) -> None:
    problems = fence_problems(page.read_text(encoding="utf-8"), str(page.relative_to(REPO)))
    assert not problems, "\n".join(problems)


def test_the_pages_include_the_readmes_and_docs() -> None:
    names = {str(p.relative_to(REPO)) for p in markdown_pages()}
    assert {"README.md", "CHANGELOG.md", "dags/README.md", "docs/README.md", "docs/AIRFLOW.md"} <= names


@pytest.mark.parametrize(("text", "expected"), [
    ("```python\ncode\n```\n", []),
    ("- item\n\n  ```bash\n  ls\n  ```\n", []),
    ("~~~\n```\nnot a fence here\n~~~\n", []),
    ("````markdown\n```python\nx\n```\n````\n", []),
    ("```{ .python title=\"x\" }\ncode\n```\n", []),
    ("```python\ncode\n``` `read()` reads\nprose\n", [
        "p.md:3: text after the fence that should close line 1's (CommonMark keeps the block open): "
        "'``` `read()` reads'", "p.md:1: a fence never closed"]),
    ("``` `read()` reads\n```\n", ["p.md:1: an opening fence followed by text, not a language: '``` `read()` reads'"]),
    ("```python\ncode\n", ["p.md:1: a fence never closed"]),
    ("- item\n  ```bash\n  ls\n```\n", ["p.md:4: a closing fence indented 0 spaces, its opener (line 2) 2"]),
    ("```this is prose\n```\n", ["p.md:1: an opening fence followed by text, not a language: '```this is prose'"]),
])
def test_the_checker_names_file_and_line(text: str, expected: list[str]) -> None:
    assert fence_problems(text, "p.md") == expected
