"""Airflow as it would see airflow-txn installed from THIS tree's pyproject.toml.

The package may be installed from another checkout (an editable install of a sibling tree), whose
entry points and metadata (Project-URL, classifiers) are that tree's. `install()` makes the
`airflow-txn` distribution found by `importlib.metadata` and `importlib_metadata` (Airflow's choice on
Python 3.11) answer with this tree's entry points and project URLs; the rest of its files are the
installed ones. Call it before Airflow reads any entry point (it caches them): in a fresh interpreter,

    python -c "import tests.airflow.declared_install as d; d.install(); ..."

run from the repository root, so `airflow_txn` is imported from this tree too.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NAME = "airflow-txn"


def declared() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]  # type: ignore[no-any-return]


def entry_points_text(project: dict[str, Any]) -> str:
    """entry_points.txt as a build of this pyproject.toml writes it."""
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    return "".join(f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in eps.items()) + "\n"
                   for group, eps in groups.items() if eps)


def metadata_text(installed: str, project: dict[str, Any]) -> str:
    """The installed METADATA with this pyproject.toml's Project-URL and Classifier lines."""
    head, _, body = installed.partition("\n\n")
    kept = [line for line in head.splitlines() if not line.startswith(("Project-URL:", "Classifier:"))]
    ours = [f"Project-URL: {name}, {url}" for name, url in project.get("urls", {}).items()]
    ours += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    return "\n".join(kept + ours) + "\n\n" + body


def _declared_distribution(module: ModuleType, project: dict[str, Any]) -> type:
    class Declared(module.Distribution):  # type: ignore[name-defined,misc]
        def __init__(self, installed: Any) -> None:
            self._installed = installed

        def read_text(self, filename: str) -> str | None:
            if filename == "entry_points.txt":
                return entry_points_text(project)
            text = self._installed.read_text(filename)
            if filename in ("METADATA", "PKG-INFO") and text is not None:
                return metadata_text(text, project)
            return text  # type: ignore[no-any-return]

        def locate_file(self, path: Any) -> Any:
            return self._installed.locate_file(path)

    return Declared


def _patched(module: ModuleType, project: dict[str, Any]) -> Callable[..., Iterator[Any]]:
    installed_distributions = module.distributions
    declared_distribution = _declared_distribution(module, project)

    def distributions(**kwargs: Any) -> Iterator[Any]:
        ours = False
        for dist in installed_distributions(**kwargs):
            if dist.metadata["Name"] != NAME:
                yield dist
            elif not ours:  # once: an editable install may also leave airflow_txn.egg-info in the tree, on sys.path
                ours = True
                yield declared_distribution(dist)

    return distributions


def install() -> None:
    project = declared()
    modules: list[ModuleType] = [importlib.metadata]
    try:
        import importlib_metadata

        modules.append(importlib_metadata)
    except ImportError:  # pragma: no cover - Airflow uses the standard library's on Python 3.12+
        pass
    for module in modules:
        module.distributions = _patched(module, project)  # type: ignore[attr-defined]
