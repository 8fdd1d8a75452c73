"""Recording a history: one JSON line per event, appended to a per-process file, and the recorded
transaction handle the workload and the driver use so every operation and its outcome land in it.

Lines are written with one os.write on an O_APPEND descriptor, so a SIGKILL loses at most the line
being written (the checker ignores a torn last line). Every line carries the worker (`w`) and the
system-wide monotonic clock (`t`, seconds), so events of different processes can be ordered in real
time. Rows are recorded as [rid, tok, val, grp]: the row id, the token of the transaction that last
wrote the row, a value and a group (the partition of hist.events). A merge is recorded with its source rows,
its key columns and its clause by name (MERGES); checker.py computes what it does from those.

hist.wide (issue 32) also changes: its columns beyond (rid, tok, val, grp), the extras, are added, renamed,
widened, made nullable or not, and dropped by transactions (the table changes of the public API), while others
write it. Its rows are recorded as [rid, tok, val, grp, {column id: value}], every read of it with the schema it
was read under ([[column id, name, type, nullable], ...]: t.schema, wh.schema(table, csn=...)), and every change
with its arguments and the schema after it.

Tables of NAMESPACE (hist.t0..t3, none at the start) are created, renamed and dropped (`create_table`,
`rename_table` with `new`, `drop_table` statements) and appended to; a snapshot read records them as
`named`: {name: rows} for every name `wh.tables(csn=)` lists there.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn import Transaction, Warehouse
from airflow_txn.errors import LeaseExpiredError, SerializationError, TransactionClosedError

SCHEMA = pa.schema([("rid", pa.string()), ("tok", pa.string()), ("val", pa.int64()), ("grp", pa.string())])
ITEMS = "hist.items"  # unpartitioned: appends, updates, deletes, whole-table compaction
EVENTS = "hist.events"  # partitioned by grp: appends and partition rewrites (overwrite)
ACCOUNTS = "hist.accounts"  # four one-row parts: withdrawals and deposits (the write-skew pattern)
WIDE = "hist.wide"  # partitioned by grp: appends, updates and deletes beside changes of its extra columns
PARTITION_BY = {ITEMS: [], EVENTS: ["grp"], ACCOUNTS: [], WIDE: ["grp"]}
TABLES = list(PARTITION_BY)
GROUPS = ["g0", "g1", "g2", "g3"]
NAMESPACE = [f"hist.t{n}" for n in range(4)]
"""Names tables are created, renamed and dropped under (unpartitioned, SCHEMA; none at the start): readers list
them with wh.tables(csn=) and read them at their snapshot."""
# Two pairs of accounts whose sum must stay >= 0: only serializable transactions touch the "ser"
# pair (the engine must keep its sum >= 0), only snapshot ones the "si" pair (write skew is allowed).
CONSTRAINTS: list[dict[str, Any]] = [
    {"table": ACCOUNTS, "rids": ["ser-a", "ser-b"], "min_sum": 0, "enforced": True, "isolation": "serializable"},
    {"table": ACCOUNTS, "rids": ["si-a", "si-b"], "min_sum": 0, "enforced": False, "isolation": "snapshot"},
]
START_BALANCE = 100
LEASE_SECONDS = 4.0
EXPECTED_ERRORS = ("SerializationError", "LeaseExpiredError", "TransactionClosedError")
"""What a transaction may legitimately fail with under concurrency and lease expiry, by family (a
subclass such as MergedAwayError, a SerializationError, is recorded under its family's name and its
own in `cls`); anything else is recorded as an unexpected error, which the checker reports."""
_FAMILIES = {"SerializationError": SerializationError, "LeaseExpiredError": LeaseExpiredError,
             "TransactionClosedError": TransactionClosedError}


def error_name(exc: BaseException) -> str:
    """The expected family `exc` belongs to, else its own class name (which the checker flags)."""
    for name, family in _FAMILIES.items():
        if isinstance(exc, family):
            return name
    return type(exc).__name__


def expected(exc: BaseException) -> bool:
    return error_name(exc) in EXPECTED_ERRORS

Row = list[Any]
MERGES = ("upsert", "add", "guarded", "delete", "sync")
"""The merges the workload runs (checker.py models each by name)."""


def merge_clauses(clause: str, tok: str) -> dict[str, object]:
    """Transaction.merge's clauses for the merge named `clause`, run by transaction `tok`: "upsert" (update every
    column from the source, insert the rest), "add" (add the source's val, no insert), "guarded" (take the source
    row only where its val is greater; insert the rest), "delete" (delete the matched rows), "sync" (upsert and
    delete every row the source lacks). A row it sets carries `tok`, as every row a transaction writes."""
    greater = pc.field("source", "val") > pc.field("val")
    return {
        "upsert": {},
        "add": {"when_matched": {"val": pc.field("val") + pc.field("source", "val"), "tok": tok},
                "when_not_matched": "ignore"},
        "guarded": {"when_matched": {"val": pc.if_else(greater, pc.field("source", "val"), pc.field("val")),
                                     "tok": pc.if_else(greater, pc.field("source", "tok"), pc.field("tok"))}},
        "delete": {"when_matched": "delete", "when_not_matched": "ignore"},
        "sync": {"when_not_matched_by_source": "delete"},
    }[clause]


Cols = list[list[Any]]
"""A schema as recorded: [[column id, name, type, nullable], ...]."""


def cols_of(schema: pa.Schema) -> Cols:
    return [[int((f.metadata or {})[b"PARQUET:field_id"]), f.name, str(f.type), f.nullable] for f in schema]


def extras(cols: Cols) -> Cols:
    """The columns beyond (rid, tok, val, grp)."""
    return [c for c in cols if c[1] not in SCHEMA.names]


def rows_of(table: pa.Table, cols: Cols | None = None) -> list[Row]:
    """Rows as recorded; with the schema `cols` they were read under, each with {column id: value} of its extras."""
    more = [] if cols is None else [(c[0], c[1]) for c in extras(cols)]
    tail: Any = (lambda r: [{cid: r.get(name) for cid, name in more}]) if cols is not None else (lambda r: [])
    return sorted([[r["rid"], r["tok"], r["val"], r["grp"], *tail(r)] for r in table.to_pylist()], key=lambda r: r[0])


def arrow(rows: list[Row], schema: pa.Schema = SCHEMA) -> pa.Table:
    """Rows as a table of `schema` (a row's extras by column id: `schema`'s fields carry the ids)."""
    ids = {f.name: int((f.metadata or {}).get(b"PARQUET:field_id", -1)) for f in schema}
    data = {name: [r[i] for r in rows] for i, name in enumerate(SCHEMA.names)}
    for name in schema.names[len(SCHEMA.names):]:
        data[name] = [r[4].get(ids[name]) for r in rows]
    return pa.table(data, schema=pa.schema([f.remove_metadata() for f in schema]))


def snapshot_read(wh: Warehouse, csn: int) -> dict[str, Any]:
    """Every table at `csn`: its rows, and for hist.wide the schema of `csn` and the columns the read gave."""
    tables, schemas, columns = {}, {}, {}
    for name in TABLES:
        table = wh.read(name, csn=csn)
        if name == WIDE:
            schemas[name] = cols_of(wh.schema(name, csn=csn))
            columns[name] = [[f.name, str(f.type)] for f in table.schema]
            tables[name] = rows_of(table, schemas[name])
        else:
            tables[name] = rows_of(table)
    named = {name: rows_of(wh.read(name, csn=csn)) for name in wh.tables(csn=csn) if name in NAMESPACE}
    return {"tables": tables, "schemas": schemas, "columns": columns, "named": named}


class Recorder:
    """Appends events of one worker to its history file."""

    def __init__(self, path: Path, worker: str) -> None:
        self.worker = worker
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def emit(self, ev: str, **fields: Any) -> None:
        line = json.dumps({"ev": ev, "w": self.worker, "t": time.monotonic(), **fields}, default=str)
        os.write(self._fd, (line + "\n").encode())

    def close(self) -> None:
        os.close(self._fd)


class RecordedTxn:
    """A Transaction whose every statement is recorded with its result (or its error class)."""

    def __init__(self, rec: Recorder, wh: Warehouse, tok: str, isolation: str) -> None:
        self.rec, self.tok = rec, tok
        self.rids = 0
        t0 = time.monotonic()
        self.t: Transaction = wh.begin(label=tok, isolation=isolation, lease_seconds=LEASE_SECONDS)
        rec.emit("begin", tok=tok, tid=self.t.tid, snap=self.t.snapshot_csn, iso=isolation, t0=t0)

    def new_rid(self) -> str:
        self.rids += 1
        return f"{self.tok}.{self.rids}"

    def _op(self, op: str, table: str, call: Any, **fields: Any) -> int:
        try:
            n = int(call())
        except Exception as exc:
            self.rec.emit("op_error", tok=self.tok, op=op, table=table, err=error_name(exc), cls=type(exc).__name__,
                      msg=str(exc)[:300])
            raise
        self.rec.emit("op", tok=self.tok, op=op, table=table, n=n, **fields)
        return n

    def append(self, table: str, rows: list[Row], schema: pa.Schema = SCHEMA) -> int:
        """Append rows (hist.wide's with their extras by column id, as a table of `schema`: the one it sees)."""
        return self._op("append", table, lambda: self.t.append(table, arrow(rows, schema)), rows=rows)

    def schema(self, table: str) -> pa.Schema:
        """The table's schema as this transaction sees it (recorded: the checker compares it with its model)."""
        got = self.t.schema(table)
        self.rec.emit("schema", tok=self.tok, table=table, schema=cols_of(got))
        return got

    def _change(self, op: str, table: str, call: Any, **fields: Any) -> pa.Schema:
        """A table change, recorded with its arguments and the schema the transaction sees after it."""
        try:
            call()
            after = self.t.schema(table)
        except Exception as exc:
            self.rec.emit("op_error", tok=self.tok, op=op, table=table, err=error_name(exc), cls=type(exc).__name__,
                          msg=str(exc)[:300])
            raise
        cols = cols_of(after)
        if op == "add_column":
            added = fields.pop("name")
            fields["column"] = next(c for c in cols if c[1] == added)
        self.rec.emit("op", tok=self.tok, op=op, table=table, n=0, schema=cols, **fields)
        return after

    def add_column(self, table: str, name: str, type_: pa.DataType, nullable: bool, default: int | None) -> pa.Schema:
        field = pa.field(name, type_, nullable=nullable)
        return self._change("add_column", table, lambda: self.t.add_column(table, field, default=default),
                            name=name, default=default)

    def rename_column(self, table: str, old: str, new: str) -> pa.Schema:
        return self._change("rename_column", table, lambda: self.t.rename_column(table, old, new), old=old, new=new)

    def drop_column(self, table: str, name: str) -> pa.Schema:
        return self._change("drop_column", table, lambda: self.t.drop_column(table, name), name=name)

    def alter_column(self, table: str, name: str, type_: pa.DataType) -> pa.Schema:
        return self._change("alter_column", table, lambda: self.t.alter_column(table, name, type_), name=name,
                            type=str(type_))

    def set_nullable(self, table: str, name: str, nullable: bool) -> pa.Schema:
        return self._change("set_nullable", table, lambda: self.t.set_nullable(table, name, nullable), name=name,
                            nullable=nullable)

    def create_table(self, table: str) -> int:
        return self._op("create_table", table, lambda: self.t.create_table(table, SCHEMA) or 0)

    def rename_table(self, table: str, new: str) -> int:
        return self._op("rename_table", table, lambda: self.t.rename_table(table, new) or 0, new=new)

    def drop_table(self, table: str) -> int:
        return self._op("drop_table", table, lambda: self.t.drop_table(table) or 0)

    def update(self, table: str, rid: str, val: int) -> int:
        """Set row `rid` to `val` (and tok to this transaction's token) if this transaction sees it."""
        return self._op("update", table, lambda: self.t.update(table, pc.field("rid") == rid,
                                                              {"val": val, "tok": self.tok}),
                        rid=rid, set={"val": val, "tok": self.tok})

    def delete(self, table: str, rids: list[str]) -> int:
        return self._op("delete", table, lambda: self.t.delete(table, pc.field("rid").isin(rids)), rids=rids)

    def overwrite(self, table: str, rows: list[Row], grp: str | None = None) -> int:
        """Replace the rows this transaction sees in `table` (only group `grp`, a partition, if given)."""
        partitions = None if grp is None else [{"grp": grp}]
        return self._op("overwrite", table, lambda: self.t.overwrite(table, arrow(rows), partitions=partitions),
                        rows=rows, grp=grp)

    def merge(self, table: str, source: list[Row], on: list[str], clause: str) -> list[int]:
        """MERGE `source` into `table` by the key columns `on` with the named clauses (MERGES); recorded with its
        source, keys and clause, and its result as [updated, inserted, deleted]."""
        def call() -> list[int]:
            counts = self.t.merge(table, arrow(source), on, **merge_clauses(clause, self.tok))  # type: ignore[arg-type]
            return [counts["updated"], counts["inserted"], counts["deleted"]]
        try:
            n = call()
        except Exception as exc:
            self.rec.emit("op_error", tok=self.tok, op="merge", table=table, err=error_name(exc),
                          cls=type(exc).__name__, msg=str(exc)[:300])
            raise
        self.rec.emit("op", tok=self.tok, op="merge", table=table, n=n, source=source, on=on, clause=clause)
        return n

    def read(self, table: str, grp: str | None = None) -> list[Row]:
        """The rows this transaction sees (hist.wide's with their extras, and the schema they were read under)."""
        extra: dict[str, Any] = {}
        try:
            if table == WIDE:
                extra["schema"] = cols_of(self.t.schema(table))
            got = rows_of(self.t.read(table, filter=None if grp is None else pc.field("grp") == grp),
                          extra.get("schema"))
        except Exception as exc:
            self.rec.emit("op_error", tok=self.tok, op="read", table=table, err=error_name(exc),
                          cls=type(exc).__name__, msg=str(exc)[:300])
            raise
        self.rec.emit("read", tok=self.tok, table=table, grp=grp, rows=got, **extra)
        return got

    def commit(self) -> int | None:
        """Commit; the CSN, or None when it failed (recorded as aborted with the error class)."""
        t0 = time.monotonic()
        self.rec.emit("commit_start", tok=self.tok)
        try:
            csn = self.t.commit()
        except Exception as exc:
            self.rec.emit("end", tok=self.tok, outcome="aborted", err=error_name(exc), cls=type(exc).__name__,
                      msg=str(exc)[:300])
            self._ensure_rolled_back()
            if not expected(exc):
                raise
            return None
        self.rec.emit("end", tok=self.tok, outcome="committed", csn=csn, t0=t0)
        return csn

    def abort(self, exc: BaseException | None = None) -> None:
        """Roll back (after a failed statement, or by choice when `exc` is None) and record it."""
        self._ensure_rolled_back()
        if exc is None:
            self.rec.emit("end", tok=self.tok, outcome="rolled_back")
        else:
            self.rec.emit("end", tok=self.tok, outcome="aborted", err=error_name(exc), cls=type(exc).__name__,
                      msg=str(exc)[:300])

    def _ensure_rolled_back(self) -> None:
        if self.t.state == "active":
            self.t.rollback(reason=f"history workload {self.tok}")
