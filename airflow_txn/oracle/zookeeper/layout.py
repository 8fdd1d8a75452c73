"""Where the ZooKeeper commit log keeps what, under the warehouse's chroot, and how its nodes are encoded (no kazoo).

  /meta                  {"warehouse_id": ...}: the catalog this log belongs to (checked at connect)
  /head                  its data version grows with every append; serializable commits append only
                         if it did not move since they validated (a versioned set_data in the multi)
  /decisions/<tid>       "commit" | "abort": at most one ever exists per transaction
  /aborts/<tid>          index of the abort decisions, for their clean-up
  /log/seg-<k>           a segment {"base": CSN of its first slot, "sealed": bool}; data version 0 = open
  /log/seg-<k>/r-<seq>   a commit record {"tid", "tables", "at", "tag"?}; its CSN is base + seq
  /tags/<name>           {"tid", "at"}: the tag name is claimed, by the commit of tid (created in its commit
                         multi-op) or by Warehouse.tag (tid null); untag deletes it after the catalog's tag

/log, /decisions, /aborts, /tags and /head are created once and never deleted: a recreated parent of
sequential nodes would restart its counter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

COMMIT = b"commit"
ABORT = b"abort"
META_KEY = "warehouse_id"
SEGMENT_PREFIX = "seg-"
RECORD_PREFIX = "r-"


@dataclass(frozen=True, slots=True)
class Segment:
    """A segment of the log: records base, base + 1, ...; once sealed, no record is ever added."""

    index: int
    base: int
    sealed: bool

    @property
    def name(self) -> str:
        return f"{SEGMENT_PREFIX}{self.index:010d}"

    def encode(self) -> bytes:
        return json.dumps({"base": self.base, "sealed": self.sealed}).encode()

    @classmethod
    def decode(cls, index: int, data: bytes) -> Segment:
        raw = json.loads(data.decode())
        return cls(index, int(raw["base"]), bool(raw["sealed"]))

    @classmethod
    def index_of(cls, name: str) -> int:
        return int(name[len(SEGMENT_PREFIX):])


def record_seq(name: str) -> int:
    """The sequence number ZooKeeper gave a record (`r-0000000007` -> 7): its CSN is the segment's base + it."""
    return int(name.rsplit("-", 1)[1])


@dataclass(frozen=True, slots=True)
class Layout:
    """The paths of one warehouse's log, under its chroot."""

    chroot: str

    def path(self, *parts: str) -> str:
        return "/".join([self.chroot, *parts])

    @property
    def meta(self) -> str:
        return self.path("meta")

    @property
    def head(self) -> str:
        return self.path("head")

    @property
    def log(self) -> str:
        return self.path("log")

    @property
    def parents(self) -> tuple[str, ...]:
        """The nodes created once and never deleted."""
        return self.path("decisions"), self.path("aborts"), self.path("tags"), self.log

    @property
    def aborts(self) -> str:
        return self.path("aborts")

    def decision(self, tid: str) -> str:
        return self.path("decisions", tid)

    def tag(self, name: str) -> str:
        """The claim of tag name `name` (tag names are checked: no '/', check_tag_name)."""
        return self.path("tags", name)

    def abort_index(self, tid: str) -> str:
        return self.path("aborts", tid)

    def segment(self, segment: Segment) -> str:
        return self.path("log", segment.name)

    def record(self, segment: Segment, name: str = RECORD_PREFIX) -> str:
        """A record of `segment` (with the bare prefix: the path a sequential create appends to)."""
        return self.path("log", segment.name, name)
