"""Every kind of CSN oracle, by the scheme of its spec: the one list that make_oracle, the
configuration, `airflow-txn doctor` and the commit metric go through. A new oracle is its module
(an OracleKind and its CsnOracle) plus one entry in KINDS; `airflow-txn --help` names its form from the CLI's
copy (cli/commands/options.py, ORACLE_FORMS: --help loads no catalog), which tests/core/test_cli_structure.py
holds to KINDS."""

from __future__ import annotations

from airflow_txn.catalog import Catalog
from airflow_txn.errors import TxnError
from airflow_txn.model.secrets import mask_secrets
from airflow_txn.oracle.base import CsnOracle, OracleKind
from airflow_txn.oracle.sql import SQL
from airflow_txn.oracle.zookeeper import ZOOKEEPER

KINDS: tuple[OracleKind, ...] = (SQL, ZOOKEEPER)


def forms() -> str:
    """Every known form of spec, as messages and help texts name them: `'sql' or 'zookeeper://...'`."""
    return " or ".join(repr(kind.form) for kind in KINDS)


def kind_of(spec: str) -> OracleKind:
    """The kind `spec` names; TxnError listing every known form otherwise."""
    for kind in KINDS:
        if kind.accepts(spec):
            return kind
    raise TxnError(f"unknown oracle {mask_secrets(spec)!r}: use {forms()}")


def make_oracle(spec: str, catalog: Catalog) -> CsnOracle:
    """The oracle `spec` describes, e.g. `sql` or `zookeeper://host:port[,...]/chroot`."""
    return kind_of(spec).open(spec, catalog)
