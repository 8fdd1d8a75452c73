"""Lazy package exports: a package's names are imported on first use, so importing the package (as
pkgutil.walk_packages does) loads no Airflow. Which names each package exports: public.py."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def require_airflow() -> None:
    """Raise an ImportError naming the extra to install when Airflow is missing."""
    try:
        importlib.import_module("airflow.sdk")
    except ImportError as exc:
        raise ImportError("airflow_txn.airflow needs Apache Airflow 3: pip install 'airflow-txn[airflow]'") from exc


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
