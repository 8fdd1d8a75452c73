"""Which commit protocol a transaction's commit runs: the catalog's record (commit.py, the SQL oracle) or
the external log's (commit_external.py, ZooKeeper). Here, above both, so that neither imports the other's
caller: commit_external reuses commit's steps, and commit does not know commit_external."""

from __future__ import annotations

from airflow_txn.core import commit as in_catalog
from airflow_txn.core import tags
from airflow_txn.core.commit_external import commit_external
from airflow_txn.core.runtime import Runtime


def commit(rt: Runtime, tid: str, tag: tags.CommitTag | None = None) -> int:
    """Commit `tid`; return its CSN (a read-only transaction returns its snapshot CSN). With `tag`, the
    commit and its tag stand or fall together (TagExistsError: nothing committed): the SQL oracle writes the
    tag in the commit's catalog transaction, ZooKeeper claims the name in the commit's multi-op and the
    record's mirror makes the tag (docs/DESIGN.md D18)."""
    external = rt.oracle.external_log
    if external is not None:  # ZooKeeper: the record lives outside the catalog (commit_external.py)
        if tag is not None:
            tags.require_free(rt, tag.name)  # the common refusal, while the transaction is still active
        return commit_external(rt, tid, external, tag)
    return in_catalog.commit(rt, tid, tag)
