"""Lazy package exports: a package's names are imported on first use, so importing the package (as
pkgutil.walk_packages does) loads no Airflow."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str],
                 before: Callable[[], None] | None = None) -> Callable[[str], Any]:
    """A module `__getattr__` resolving each name of `exports` ({name: module}) on first access
    (after calling `before`, e.g. a check that says what to install)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if before is not None:
            before()
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
