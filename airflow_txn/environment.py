"""The process environment: the one module of the package that reads it.

Every variable airflow_txn reads is named here, a constant each with what it means; the other modules read
them through the getters below, which refuse a name not listed (so a new variable is named here first).
Which value wins over a variable (an argument, a connection's extra, `[airflow_txn]` configuration) stays the
caller's business: these getters only say what the environment holds. A few modules write variables (for a
library that reads them); tests/architecture/test_environment_owner.py lists them, each with its reason, and fails on
a read anywhere else.

No import of the package: every layer may import this one (the foundation, docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import os
from typing import Final

# -- airflow_txn's own settings (docs/DEPLOYMENT.md) ---------------------------------------------------------
CATALOG: Final = "AIRFLOW_TXN_CATALOG"
"""The catalog's SQLAlchemy URL, when none is passed (default: SQLite in HOME)."""
ROOT: Final = "AIRFLOW_TXN_ROOT"
"""The storage root (a local path or `s3://bucket/prefix`), when none is passed (default: derived from the catalog)."""
ORACLE: Final = "AIRFLOW_TXN_ORACLE"
"""The CSN oracle (`sql`, `zookeeper://...`), when none is passed (default: sql)."""
HOME: Final = "AIRFLOW_TXN_HOME"
"""Where the embedded defaults live (default: ~/.airflow_txn)."""
MANIFESTS: Final = "AIRFLOW_TXN_MANIFESTS"
"""When JSON manifests are written (model/options.Manifests), when not passed (default: off)."""
STORAGE_OPTIONS: Final = "AIRFLOW_TXN_STORAGE_OPTIONS"
"""S3 settings as a JSON object (storage/location.S3_OPTIONS), when none are passed; ignored for a local root."""
CONNECT_TIMEOUT: Final = "AIRFLOW_TXN_CONNECT_TIMEOUT"
"""Seconds an unreachable catalog, object store or Spark Connect server is waited for, when not passed."""
PUBLISH: Final = "AIRFLOW_TXN_PUBLISH"
"""The formats every commit is published to (`iceberg`, `delta`, `iceberg,delta`; `off`), when not passed."""
ICEBERG_CATALOG: Final = "AIRFLOW_TXN_ICEBERG_CATALOG"
"""pyiceberg catalog properties as a JSON object, when `iceberg_catalog` is not passed."""
LOG_FORMAT: Final = "AIRFLOW_TXN_LOG_FORMAT"
"""The engine's log format (`text` or `json`), when telemetry.logs.configure is given none (default: text)."""

# -- test hooks (never set in production) -----------------------------------------------------------------------
CRASH_AT: Final = "AIRFLOW_TXN_CRASH_AT"
"""Tests only: the crash point (core/crashpoints.py) at which this process kills itself."""
FAULT_STORAGE_QUOTA: Final = "AIRFLOW_TXN_FAULT_STORAGE_QUOTA"
"""Tests only: bytes a local storage root may hold before a write fails with ENOSPC (storage/local_root.py)."""

# -- the standard AWS variables, read as every AWS client reads them (an s3:// root) ------------------------------
AWS_ENDPOINT_URL_S3: Final = "AWS_ENDPOINT_URL_S3"
"""The S3 endpoint (an S3-compatible server); wins over AWS_ENDPOINT_URL."""
AWS_ENDPOINT_URL: Final = "AWS_ENDPOINT_URL"
"""The endpoint of every AWS service, S3's included, unless AWS_ENDPOINT_URL_S3 is set."""
AWS_REGION: Final = "AWS_REGION"
"""The AWS region; wins over AWS_DEFAULT_REGION."""
AWS_DEFAULT_REGION: Final = "AWS_DEFAULT_REGION"
"""The AWS region, unless AWS_REGION is set."""
AWS_ACCESS_KEY_ID: Final = "AWS_ACCESS_KEY_ID"
"""Set: the credentials come from the AWS_* variables (read here only to say where credentials come from)."""
AWS_PROFILE: Final = "AWS_PROFILE"
"""The AWS profile whose credentials are used, when no AWS_ACCESS_KEY_ID is set (read only to name it)."""

# -- other programs' variables ----------------------------------------------------------------------------------
COLUMNS: Final = "COLUMNS"
"""The terminal's width as the shell says it; set, rich sizes the CLI's output by it (cli/render.py)."""
AIRFLOW_PROCESS_CONTEXT: Final = "_AIRFLOW_PROCESS_CONTEXT"
"""Airflow 3's process context (`server`: the secrets backends include the metadata database);
cli/airflow_connections.py sets it around a connection lookup unless it is set already."""

NAMES: Final = frozenset({
    CATALOG, ROOT, ORACLE, HOME, MANIFESTS, STORAGE_OPTIONS, CONNECT_TIMEOUT, PUBLISH, ICEBERG_CATALOG, LOG_FORMAT,
    CRASH_AT, FAULT_STORAGE_QUOTA,
    AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS_REGION, AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_PROFILE,
    COLUMNS, AIRFLOW_PROCESS_CONTEXT,
})
"""Every variable the package reads."""


def _known(name: str) -> str:
    if name not in NAMES:
        raise ValueError(f"{name!r} is not a variable airflow_txn reads; name it in airflow_txn/environment.py")
    return name


def text(name: str) -> str | None:
    """The value of variable `name` as set (an empty string included); None when it is not set."""
    return os.environ.get(_known(name))


def given(name: str) -> str | None:
    """The value of variable `name`; None when it is not set or empty (an empty variable means "not given")."""
    return os.environ.get(_known(name)) or None


def is_set(name: str) -> bool:
    """Whether variable `name` is set at all (even to an empty string)."""
    return _known(name) in os.environ


def aws_endpoint() -> str | None:
    """The S3 endpoint of the environment: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL; None: AWS's own."""
    return given(AWS_ENDPOINT_URL_S3) or given(AWS_ENDPOINT_URL)


def aws_region() -> str | None:
    """The AWS region of the environment: AWS_REGION, else AWS_DEFAULT_REGION; None: not set."""
    return given(AWS_REGION) or given(AWS_DEFAULT_REGION)


def crash_point() -> str | None:
    """Tests only: the crash point named by AIRFLOW_TXN_CRASH_AT (None: none)."""
    return os.environ.get(CRASH_AT)


def fault_storage_quota() -> str | None:
    """Tests only: AIRFLOW_TXN_FAULT_STORAGE_QUOTA as set (a number of bytes), None when not set."""
    return os.environ.get(FAULT_STORAGE_QUOTA)
