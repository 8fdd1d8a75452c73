"""The `airflow-txn` command line: inspect and maintain a warehouse (tables, transactions, recovery, vacuum).

Every command takes --catalog/--root/--oracle (else the AIRFLOW_TXN_* environment, else the embedded
default) and --json for machine-readable output. Exit codes: 0 ok, 1 a transaction error (message on
stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from airflow_txn import Warehouse
from airflow_txn.config import DEFAULT_RETENTION_SECONDS
from airflow_txn.errors import TxnError

Handler = Callable[[Warehouse, argparse.Namespace], Any]


def _init(wh: Warehouse, _args: argparse.Namespace) -> Any:
    return {"catalog": wh.config.catalog_url, "root": str(wh.config.root), "oracle": wh.config.oracle,
            "readable_csn": wh.readable_csn()}


def _tables(wh: Warehouse, _args: argparse.Namespace) -> Any:
    return [{"table": t, "last_commit_csn": wh.last_commit_csn(t), "partition_by": list(wh.partition_by(t))}
            for t in wh.tables()]


def _list(wh: Warehouse, args: argparse.Namespace) -> Any:
    return wh.transactions(state=args.state, limit=args.limit)


def _show(wh: Warehouse, args: argparse.Namespace) -> Any:
    return wh.transaction_info(args.tid)


def _rollback(wh: Warehouse, args: argparse.Namespace) -> Any:
    wh.attach(args.tid).rollback()
    return {"tid": args.tid, "state": wh.transaction_info(args.tid)["state"]}


def _recover(wh: Warehouse, _args: argparse.Namespace) -> Any:
    return wh.recover()


def _vacuum(wh: Warehouse, args: argparse.Namespace) -> Any:
    return wh.vacuum(retention_seconds=args.retention)


def _read(wh: Warehouse, args: argparse.Namespace) -> Any:
    table = wh.read(args.table, csn=args.csn)
    return table.slice(0, args.limit).to_pylist()


def _watermark(wh: Warehouse, _args: argparse.Namespace) -> Any:
    return {"readable_csn": wh.readable_csn()}


def _manifest(wh: Warehouse, args: argparse.Namespace) -> Any:
    return wh.write_manifest(csn=args.csn, tables=args.table or None)


def _log(wh: Warehouse, args: argparse.Namespace) -> Any:
    return wh.commit_log(limit=args.limit)


def _common_options() -> argparse.ArgumentParser:
    """Options accepted before or after the command name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--catalog", default=argparse.SUPPRESS, help="catalog SQLAlchemy URL (env AIRFLOW_TXN_CATALOG)")
    common.add_argument("--root", default=argparse.SUPPRESS, help="storage root (env AIRFLOW_TXN_ROOT)")
    common.add_argument("--oracle", default=argparse.SUPPRESS, help="'sql' or 'zookeeper://...' (AIRFLOW_TXN_ORACLE)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common_options()
    parser = argparse.ArgumentParser(prog="airflow-txn", parents=[common],
                                     description="Inspect and maintain an airflow_txn warehouse.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_commands(sub, common)
    return parser


def _add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    def command(name: str, fn: Handler, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, parents=[common])
        p.set_defaults(fn=fn)
        return p

    command("init", _init, "create the catalog and storage root if needed")
    command("tables", _tables, "list tables")
    p = command("list", _list, "list transactions")
    p.add_argument("--state", choices=["active", "committed", "rolled_back"])
    p.add_argument("--limit", type=int, default=50)
    command("show", _show, "show one transaction").add_argument("tid")
    command("rollback", _rollback, "roll back an active transaction").add_argument("tid")
    command("recover", _recover, "roll forward committed records, roll back expired transactions")
    p = command("vacuum", _vacuum, "delete files no snapshot can see")
    p.add_argument("--retention", type=float, default=DEFAULT_RETENTION_SECONDS, help="seconds of time travel kept")
    p = command("read", _read, "print rows of a table at a snapshot")
    p.add_argument("table")
    p.add_argument("--csn", type=int)
    p.add_argument("--limit", type=int, default=20)
    command("watermark", _watermark, "print the readable CSN")
    command("log", _log, "recent commits").add_argument("--limit", type=int, default=20)
    p = command("manifest", _manifest, "write JSON manifests of a snapshot for other engines (docs/MANIFESTS.md)")
    p.add_argument("--csn", type=int)
    p.add_argument("--table", action="append", help="only this table (repeatable)")


def _print(result: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    elif isinstance(result, list):
        for item in result:
            print(item if not isinstance(item, dict) else "  ".join(f"{k}={v}" for k, v in item.items()))
    elif isinstance(result, dict):
        for key, value in result.items():
            print(f"{key}: {value}")
    else:
        print(result)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    options = {name: getattr(args, name, None) for name in ("catalog", "root", "oracle")}
    try:
        with Warehouse.open(**options) as wh:
            _print(args.fn(wh, args), getattr(args, "json", False))
    except TxnError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
