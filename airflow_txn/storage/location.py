"""Where a warehouse's files live: a storage root URI resolved to a `pyarrow.fs` filesystem and a base path.

    root                          filesystem                     base
    /data/wh, ~/wh, file:///wh    pyarrow LocalFileSystem        /data/wh (absolute)
    s3://bucket/prefix            pyarrow S3FileSystem           bucket/prefix
    gs://, abfs(s)://, hdfs://    pyarrow.fs.FileSystem.from_uri what pyarrow says

A root with any other `scheme://` is refused (before anything is created): `s3:/b` or `ftp://h/p` is never
taken for a relative local path. S3 settings come, in this order, from `storage_options` (the
`Warehouse.open` argument, an Airflow connection's extra, `[airflow_txn] storage_options` or
`$AIRFLOW_TXN_STORAGE_OPTIONS`, read by core/config.py, all JSON objects of S3_OPTIONS), then from the
standard AWS environment:
AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_REGION / AWS_DEFAULT_REGION, and the credential chain of the AWS
SDK (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws files, instance metadata).
Secrets never appear in a repr, a log line or an error: `Location.describe()` names where they came from.

An S3 endpoint that does not answer fails a call within about the configuration's `connect_timeout`
(core/config.py, default 20 s): S3_ATTEMPTS attempts, each connecting and waiting for an answer at most a
sixth of it (but never less than the AWS SDK's own 1 s and 3 s); the Storage methods raise StorageError
naming the root and its endpoint.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow.fs as pafs

from airflow_txn import environment
from airflow_txn.errors import InvalidArgumentError
from airflow_txn.model.secrets import mask_secrets
from airflow_txn.model.timeouts import connect_timeout_seconds

OBJECT_STORE_SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")
"""Schemes of roots on a filesystem pyarrow reaches that no local path names (object stores, HDFS)."""
S3_OPTIONS = ("endpoint_url", "region", "access_key_id", "secret_access_key", "session_token",
              "force_virtual_addressing")
"""The keys `storage_options` may hold (they are S3's: other schemes use pyarrow's own defaults)."""
SECRET_OPTIONS = frozenset({"secret_access_key", "session_token"})
_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
S3_ATTEMPTS = 3
"""Attempts of one S3 request (pyarrow's AwsStandardS3RetryStrategy) before it fails."""
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class Location:
    """A resolved storage root: `filesystem` with every path below `base` (no trailing slash)."""

    uri: str
    """The root as users name it: an absolute local path, or `scheme://...` (never holds a secret)."""
    scheme: str
    """"file" for a local root, else the URI's scheme."""
    filesystem: pafs.FileSystem = field(repr=False, compare=False)
    base: str = ""
    credentials: str = field(default="", compare=False)
    """Where an object store's settings and credentials come from, for `airflow-txn doctor`."""

    @property
    def local(self) -> Path | None:
        """The root as a local directory (None on an object store or HDFS)."""
        return Path(self.base) if self.scheme == "file" else None

    def path(self, relative: str) -> str:
        """The filesystem path of `relative` (already checked by the caller) below the root."""
        return f"{self.base}/{relative}" if relative else self.base

    def uri_of(self, relative: str) -> str:
        """What another engine opens `relative` with: a local absolute path, or `scheme://base/relative`."""
        full = self.path(relative)
        return full if self.scheme == "file" else f"{self.scheme}://{full}"

    def describe(self) -> str:
        return self.uri if not self.credentials else f"{self.uri} ({self.credentials})"


def scheme_of(root: str | os.PathLike[str]) -> str:
    """"file" for a local path, else the lower-cased scheme of a `scheme://` root."""
    uri = _URI.match(os.fspath(root))
    return "file" if uri is None else uri.group("scheme").lower()


def normalize_root(root: str | os.PathLike[str]) -> str:
    """The root as stored in a configuration: a local path made absolute (`~` expanded, `file://` taken off),
    or a supported `scheme://` URI without a trailing slash. InvalidArgumentError for anything else."""
    text = os.fspath(root)
    scheme = scheme_of(text)
    shown = _redacted(text)  # what a message may repeat of it
    if scheme == "file" and _URI.match(text) is None:
        return str(Path(text).expanduser().absolute())
    if scheme == "file":
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgumentError(f"storage root {shown!r}: a file:// URI names a path on this machine "
                                       f"(file:///path), not on host {parts.netloc!r}")
        return str(Path(unquote(parts.path)).absolute())
    if scheme not in OBJECT_STORE_SCHEMES:
        hint = " (s3a:// is Hadoop's name for it: give s3://)" if scheme in ("s3a", "s3n") else ""
        known = ", ".join(f"{s}://" for s in OBJECT_STORE_SCHEMES)
        raise InvalidArgumentError(
            f"storage root {shown!r}: the {scheme}:// scheme is not supported; give a local or shared filesystem "
            f"path (e.g. /mnt/warehouse), a file:// URI, or one of {known}{hint}")
    parts = urlsplit(text)
    if parts.query or parts.fragment:
        raise InvalidArgumentError(f"storage root {shown!r}: settings go in storage_options, not in the URI")
    if scheme == "s3" and not parts.netloc:
        raise InvalidArgumentError(f"storage root {shown!r}: name a bucket, e.g. s3://my-bucket/warehouse")
    if parts.password is not None or (scheme in ("s3", "gs", "gcs") and "@" in parts.netloc):
        raise InvalidArgumentError(f"storage root {shown!r}: credentials go in storage_options or the "
                                   "environment, never in the root")
    return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def parse_storage_options(value: str | Mapping[str, Any] | None, source: str) -> dict[str, str]:
    """`storage_options` from a mapping or a JSON object text, checked: known keys (S3_OPTIONS), text values.
    `source` names where they came from in an error (never their values)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"{source}: storage_options must be a JSON object ({exc.msg})") from None
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{source}: storage_options must be a JSON object, got a {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in S3_OPTIONS)
    if unknown:
        raise InvalidArgumentError(f"{source}: unknown storage option(s) {unknown}; known: {list(S3_OPTIONS)}")
    options: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            item = "true" if item else "false"
        if not isinstance(item, str | int | float):
            raise InvalidArgumentError(f"{source}: storage option {key!r} must be a string")
        options[str(key)] = str(item)
    return options


def resolve(root: str, options: Mapping[str, str], connect_timeout: float | None = None) -> Location:
    """The Location of a normalized root (normalize_root) with its checked storage options; an object store's
    client gives up on an unreachable endpoint after about `connect_timeout` seconds (None: the configuration's,
    model/timeouts.connect_timeout_seconds)."""
    scheme = scheme_of(root)
    if scheme == "file":
        if options:
            raise InvalidArgumentError(f"storage_options apply to an s3:// root, not to the local root {root!r}")
        return Location(root, "file", pafs.LocalFileSystem(), root)
    if scheme == "s3":
        if connect_timeout is None:
            connect_timeout = connect_timeout_seconds()
        filesystem, credentials = _s3_filesystem(options, connect_timeout)
        return Location(root, "s3", filesystem, root[len("s3://"):], credentials)
    if options:
        raise InvalidArgumentError(f"storage_options apply to s3:// roots; a {scheme}:// root takes its settings "
                                   "from that filesystem's own environment")
    try:
        filesystem, base = pafs.FileSystem.from_uri(root)
    except (OSError, ValueError, ImportError) as exc:
        raise InvalidArgumentError(f"storage root {root!r}: pyarrow cannot open it: {exc}") from exc
    return Location(root, scheme, filesystem, base.rstrip("/"), f"{scheme} settings of the environment")


def _s3_filesystem(options: Mapping[str, str], connect_timeout: float) -> tuple[pafs.S3FileSystem, str]:
    """An S3FileSystem for `options` (else the AWS environment), and where its credentials come from.
    One PUT per object written (allow_delayed_open: a small object is uploaded whole when it is closed);
    S3_ATTEMPTS attempts of one request, each bounded to a sixth of `connect_timeout` (module docstring)."""
    endpoint = options.get("endpoint_url") or environment.aws_endpoint()
    region = options.get("region") or environment.aws_region()
    share = connect_timeout / (2 * S3_ATTEMPTS)
    kwargs: dict[str, Any] = {"allow_delayed_open": True, "region": region or None,
                              "connect_timeout": max(1.0, share), "request_timeout": max(3.0, share),
                              "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=S3_ATTEMPTS)}
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidArgumentError(f"S3 endpoint {mask_secrets(endpoint)!r} is not an http(s)://host[:port] URL")
        kwargs.update(endpoint_override=parts.netloc + parts.path.rstrip("/"), scheme=parts.scheme)
    key_id, secret = options.get("access_key_id"), options.get("secret_access_key")
    if (key_id is None) != (secret is None):
        raise InvalidArgumentError("storage_options: access_key_id and secret_access_key go together")
    if key_id is not None:
        kwargs.update(access_key=key_id, secret_key=secret, session_token=options.get("session_token"))
        credentials = "credentials from storage_options"
    elif environment.given(environment.AWS_ACCESS_KEY_ID):
        credentials = "credentials from AWS_ACCESS_KEY_ID"
    elif profile := environment.given(environment.AWS_PROFILE):
        credentials = f"credentials of AWS profile {profile!r}"
    else:
        credentials = "credentials of the AWS default chain (~/.aws files, instance metadata)"
    virtual = options.get("force_virtual_addressing", "false").lower()
    if virtual not in _TRUE + _FALSE:
        raise InvalidArgumentError(f"storage option force_virtual_addressing must be true or false, got {virtual!r}")
    kwargs["force_virtual_addressing"] = virtual in _TRUE
    where = f"endpoint {mask_secrets(endpoint)}" if endpoint else "AWS endpoint"  # userinfo, ?token= masked
    return pafs.S3FileSystem(**kwargs), f"{where}, region {region or 'from the AWS SDK'}, {credentials}"


def _redacted(text: str) -> str:
    """A root for a message: without its userinfo (a bare access key among it), its other secrets masked."""
    netloc = urlsplit(text).netloc if "://" in text else ""
    return mask_secrets(text.replace(netloc, netloc.rpartition("@")[2]) if "@" in netloc else text)
