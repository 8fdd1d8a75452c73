"""An `airflow_txn` connection's `aws_conn_id`: the S3 credentials, endpoint and region of an Amazon
provider connection (type `aws`), and the pyarrow filesystem of an s3:// root that keeps them fresh.

Credentials are resolved once per process and connection by the provider's AwsBaseHook: a boto3
session whose credentials are botocore's own object. Static keys never change; the credentials of a
role to assume, a web identity, SSO or instance metadata are botocore RefreshableCredentials, which
refresh themselves when read within 15 minutes of their expiry (10 minutes: every reader waits for the
refresh). `refreshing_s3` asks them for their current frozen value before each filesystem call and
rebuilds its pyarrow S3FileSystem when the value changed, so one Warehouse serves a process for as long
as it lives. The Amazon provider is optional: without it `aws_conn_id` raises MissingDependencyError
naming `pip install 'airflow-txn[amazon]'`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow.fs as pafs

from airflow_txn.airflow.version_compat import AirflowNotFoundException, BaseHook
from airflow_txn.core.adapter import s3_filesystem
from airflow_txn.errors import ConnectionNotFoundError, MissingDependencyError, TxnError

CREDENTIAL_OPTIONS = ("access_key_id", "secret_access_key", "session_token")
"""The storage options an `aws_conn_id` supplies (the connection's extra may not set them too)."""
INSTALL = "pip install 'airflow-txn[amazon]'"

Frozen = tuple[str, str, str | None]
"""(access key id, secret access key, session token)."""


class AwsCredentials:
    """The S3 settings of Amazon connection `aws_conn_id`: its credentials (current value: `frozen()`),
    its S3 endpoint (`endpoint_url` of the extra, or of its `service_config.s3`) and region."""

    def __init__(self, aws_conn_id: str, credentials: Any, endpoint_url: str | None = None,
                 region: str | None = None) -> None:
        """`credentials`: botocore's (Credentials, or RefreshableCredentials that renew themselves)."""
        if credentials is None:
            raise TxnError(f"connection {aws_conn_id!r} (type aws) yields no AWS credentials: give it a key, a "
                           "role to assume or a profile, or run where the AWS default chain has some")
        self.aws_conn_id = aws_conn_id
        self.endpoint_url = endpoint_url
        self.region = region
        self._credentials = credentials

    @classmethod
    def of_connection(cls, aws_conn_id: str) -> AwsCredentials:
        """Through the Amazon provider's AwsBaseHook: the connection's session credentials, and the S3
        endpoint and region of its extra. ConnectionNotFoundError when it is not defined (the provider would
        quietly fall back to the AWS default chain)."""
        try:
            from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
        except ImportError as exc:
            raise MissingDependencyError(
                f"the airflow_txn connection's aws_conn_id {aws_conn_id!r} needs Airflow's Amazon provider, "
                f"which is not installed: {INSTALL}") from exc
        try:
            BaseHook.get_connection(aws_conn_id)
        except AirflowNotFoundException:
            raise ConnectionNotFoundError(
                f"the airflow_txn connection's aws_conn_id names connection {aws_conn_id!r}, which is not "
                "defined: define it (type aws) or clear aws_conn_id", conn_id=aws_conn_id) from None
        hook = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="s3")
        region = hook.conn_config.region_name
        return cls(aws_conn_id, hook.get_session(region_name=region).get_credentials(),
                   hook.conn_config.get_service_endpoint_url("s3"), region)

    def frozen(self) -> Frozen:
        """The credentials now (a refreshing set renews itself first when its expiry is near)."""
        now = self._credentials.get_frozen_credentials()
        return str(now.access_key), str(now.secret_key), (str(now.token) if now.token else None)

    def storage_options(self, given: Mapping[str, str]) -> dict[str, str]:
        """The storage options of the root: `given` (the connection's own, which may not hold credentials)
        over the aws connection's endpoint and region, with the credentials' current value."""
        doubled = sorted(k for k in CREDENTIAL_OPTIONS if k in given)
        if doubled:
            raise TxnError(f"the airflow_txn connection sets aws_conn_id {self.aws_conn_id!r} and also {doubled} "
                           "in storage_options: the credentials come from the aws connection; remove them")
        options = {k: v for k, v in (("endpoint_url", self.endpoint_url), ("region", self.region)) if v}
        options.update(given)
        key, secret, token = self.frozen()
        options.update(access_key_id=key, secret_access_key=secret)
        if token:
            options["session_token"] = token
        return options


_CREDENTIALS: dict[str, AwsCredentials] = {}
_LOCK = threading.Lock()


def credentials(aws_conn_id: str) -> AwsCredentials:
    """The credentials of connection `aws_conn_id`, resolved once per process."""
    with _LOCK:
        found = _CREDENTIALS.get(aws_conn_id)
        if found is None:
            found = _CREDENTIALS[aws_conn_id] = AwsCredentials.of_connection(aws_conn_id)
        return found


class RefreshingS3(pafs.FileSystemHandler):  # type: ignore[misc]
    """A pyarrow filesystem handler delegating to an S3FileSystem built from `options` (the root's storage
    options) with the current credentials of `creds`, rebuilt whenever they changed."""

    def __init__(self, options: Mapping[str, str], creds: AwsCredentials,
                 build: Callable[[Mapping[str, str]], pafs.FileSystem] | None = None) -> None:
        self._options = {k: v for k, v in options.items() if k not in CREDENTIAL_OPTIONS}
        self._creds = creds
        self._build = build or _s3
        self._lock = threading.Lock()
        self._frozen: Frozen | None = None
        self._fs: pafs.FileSystem | None = None
        self.rebuilds = 0
        """How many S3FileSystems this handler built (1 until the credentials first changed)."""

    def current(self) -> pafs.FileSystem:
        frozen = self._creds.frozen()
        with self._lock:
            if self._fs is None or frozen != self._frozen:
                key, secret, token = frozen
                options = {**self._options, "access_key_id": key, "secret_access_key": secret}
                if token:
                    options["session_token"] = token
                self._fs, self._frozen = self._build(options), frozen
                self.rebuilds += 1
            return self._fs

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def get_type_name(self) -> str:
        return "airflow_txn-s3"

    def normalize_path(self, path: str) -> str:
        return str(self.current().normalize_path(path))

    def equals(self, other: Any) -> bool:
        return self is other

    def get_file_info(self, paths: list[str]) -> Any:
        return self.current().get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> Any:
        return self.current().get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.current().create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.current().delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.current().delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        self.current().delete_dir_contents("/", accept_root_dir=True)

    def delete_file(self, path: str) -> None:
        self.current().delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.current().move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.current().copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        return self.current().open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        return self.current().open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        return self.current().open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        return self.current().open_append_stream(path, metadata=metadata)


def _s3(options: Mapping[str, str]) -> pafs.FileSystem:
    return s3_filesystem(options)


def refreshing_s3(options: Mapping[str, str], creds: AwsCredentials) -> tuple[pafs.PyFileSystem, RefreshingS3]:
    """The filesystem of an s3:// root reached with `creds` (and the handler behind it)."""
    handler = RefreshingS3(options, creds)
    return pafs.PyFileSystem(handler), handler
