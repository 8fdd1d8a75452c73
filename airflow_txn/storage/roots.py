"""Opening a storage root: the one place a root's kind is chosen (LocalRoot for a `file` location, ObjectStoreRoot
for any other), above the base class and both kinds, so none of them imports another back."""

from __future__ import annotations

import os

from airflow_txn.storage.local_root import LocalRoot
from airflow_txn.storage.location import Location, scheme_of
from airflow_txn.storage.object_root import ObjectStoreRoot
from airflow_txn.storage.root import Storage

__all__ = ["open_storage"]


def open_storage(location: Location | str | os.PathLike[str]) -> Storage:
    """The root at `location` (a resolved Location, or a path or URI), of its own kind."""
    local = location.local is not None if isinstance(location, Location) else scheme_of(location) == "file"
    return LocalRoot(location) if local else ObjectStoreRoot(location)
