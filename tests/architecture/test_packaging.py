"""What the distribution declares (pyproject.toml): the license and its file, the classifiers Airflow's
provider registry and PyPI read, the project URLs, the changelog. The build itself needs setuptools 77
(an SPDX license expression with license files), which a test that builds a wheel would need to
download: these checks read the declarations instead."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[2]

# The sections of the Apache License 2.0 in order: the whole text, not a header or a pointer to it.
APACHE_2_SECTIONS = ["Definitions.", "Grant of Copyright License.", "Grant of Patent License.", "Redistribution.",
                     "Submission of Contributions.", "Trademarks.", "Disclaimer of Warranty.",
                     "Limitation of Liability.", "Accepting Warranty or Additional Liability."]
KEEP_A_CHANGELOG_KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def project() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_the_license_file_is_the_whole_apache_2_text() -> None:
    meta = project()["project"]
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    positions = [text.find(f"{n}. {title}") for n, title in enumerate(APACHE_2_SECTIONS, start=1)]
    assert -1 not in positions and positions == sorted(positions), dict(zip(APACHE_2_SECTIONS, positions, strict=True))
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text


def test_classifiers_name_the_airflow_provider_and_the_declared_python() -> None:
    build, meta = project()["build-system"], project()["project"]
    classifiers = meta["classifiers"]
    for wanted in ("Framework :: Apache Airflow", "Framework :: Apache Airflow :: Provider",
                   "Programming Language :: Python :: 3.11"):
        assert wanted in classifiers, wanted
    # An SPDX `license` expression and a "License ::" classifier together fail the build (setuptools >= 77
    # raises InvalidConfigError, as PEP 639 requires): the license is declared once, by the expression.
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert any(re.fullmatch(r"setuptools>=(7[7-9]|[89]\d)(\.\d+)*", r) for r in build["requires"]), build["requires"]
    python = r"Programming Language :: Python :: 3\.\d+"
    declared = [c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(python, c)]
    assert declared == ["3.11", "3.12", "3.13"] and meta["requires-python"] == ">=3.11"
    # 3.11 is tested; docs/TESTING.md says how the others were checked without an interpreter
    testing = " ".join((REPO / "docs" / "TESTING.md").read_text(encoding="utf-8").split())
    assert "declares 3.11, 3.12 and 3.13" in testing and "Only 3.11 is tested here" in testing


def test_project_urls_live_under_one_organisation_and_point_at_what_exists() -> None:
    urls = project()["project"]["urls"]
    assert {"Homepage", "Documentation", "Source", "Changelog"} <= set(urls)
    parts = {name: urlsplit(url) for name, url in urls.items()}
    assert {p.scheme for p in parts.values()} == {"https"}
    code = [p for name, p in parts.items() if name != "Documentation"]
    assert len({(p.netloc, p.path.split("/")[1]) for p in code}) == 1, urls  # one host, one organisation
    changelog = parts["Changelog"].path.split("/blob/main/", 1)[1]  # .../blob/main/<path in this repository>
    assert (REPO / changelog).is_file(), f"Changelog points at {changelog}, which this repository does not have"
    # the documentation site, as the organisation's GitHub Pages publishes it, is what mkdocs.yml builds
    organisation, repository = parts["Source"].path.strip("/").split("/")
    assert urls["Documentation"] == f"https://{organisation}.github.io/{repository}/"
    mkdocs = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(rf"^site_url: {re.escape(urls['Documentation'])}$", mkdocs, flags=re.MULTILINE)
    assert re.search(rf"^repo_url: {re.escape(urls['Source'])}$", mkdocs, flags=re.MULTILINE)


def test_changelog_keeps_a_changelog() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    releases = re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)
    assert releases and releases[0] == "Unreleased"
    kinds = set(re.findall(r"^### (\w+)", text, flags=re.MULTILINE))
    assert kinds and kinds <= KEEP_A_CHANGELOG_KINDS, kinds - KEEP_A_CHANGELOG_KINDS
    for release in releases:  # every heading's link is defined at the bottom
        assert re.search(rf"^\[{re.escape(release)}\]: https://", text, flags=re.MULTILINE), release
    for layer in ("Engine", "Spark layer", "data source", "Spark Connect", "Airflow provider", "CLI",
                  "Transactions page", "Compaction", "Object storage"):
        assert layer.lower() in text.lower(), f"the changelog does not mention the {layer}"
