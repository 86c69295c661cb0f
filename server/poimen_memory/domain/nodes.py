"""Levels, records, chunks, memory nodes and the edges between them (spec M0.2)."""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from cachetools import LRUCache

from poimen_memory.domain.checks import (
    BIGINT_MAX,
    INT4_MAX,
    ContentError,
    check_int,
    check_text,
    format_timestamp,
    parse_timestamp,
    parse_wire,
    require_keys,
    show,
)
from poimen_memory.domain.encoding import chunk_encoding, node_encoding
from poimen_memory.domain.ids import ProjectId, QueryId, RunId, Sha256Hash, trusted

# Rows of memory_node already read (and their content hash checked) in this process, with
# the node each gave: the same row read again is not hashed or made again.
_READ: LRUCache[tuple[Any, ...], MemoryNode] = LRUCache(8192)
_READ_LOCK = threading.Lock()

# The most UTF-8 bytes of text one node may hold: 1 MiB. A node is shown whole in a hover and
# sent whole by every surface; an L0 chunk is some 8 KB (2048 tokens), so this is over a
# hundred chunks' worth, past anything a reader takes in, and it bounds what one row costs.
MAX_TEXT_BYTES: Final = 1 << 20


def check_text_size(text: str) -> None:
    """Refuse a text over MAX_TEXT_BYTES: ``text too long (N bytes, max M)``."""
    if len(text) * 4 <= MAX_TEXT_BYTES:  # UTF-8 takes at most 4 bytes a character
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        raise ContentError(f"text too long ({size} bytes, max {MAX_TEXT_BYTES})")


# ---------------------------------------------------------------------------------------------
# Closed enums


class Level(enum.Enum):
    """L0 evidence, L1 per-query memory, L2 project synthesis. Wire spelling is exact."""

    L0 = "L0"
    L1 = "L1"
    L2 = "L2"

    @classmethod
    def parse(cls, value: object) -> Level:
        """The level spelled exactly ``"L0"``, ``"L1"`` or ``"L2"``; anything else is refused."""
        return parse_wire(cls, "level", "'L0', 'L1' or 'L2'", value)

    @property
    def rank(self) -> int:
        """0, 1, 2: edges point from a lower rank to a higher one."""
        return int(self.value[1])


class Role(enum.Enum):
    """Who produced a record."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    SYSTEM = "system"

    @classmethod
    def parse(cls, value: object) -> Role:
        """The role by its wire spelling: user, assistant, tool_result or system."""
        spellings = ", ".join(r.value for r in cls)
        return parse_wire(cls, "role", f"one of {spellings}", value)


# ---------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a record came from: a source id (a transcript path or URL) and an offset in it."""

    source: str
    offset: int

    def __post_init__(self) -> None:
        check_text("provenance.source", self.source)
        if not self.source.strip():
            raise ContentError(f"provenance.source: must not be empty, got {show(self.source)}")
        check_int("provenance.offset", self.offset, 0, BIGINT_MAX)

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {"source": self.source, "offset": self.offset}

    @classmethod
    def from_json(cls, obj: object) -> Provenance:
        """Parse the JSON object form; errors name the field."""
        o = require_keys("provenance", obj, ("source", "offset"))
        return cls(source=o["source"], offset=o["offset"])


@dataclass(frozen=True, slots=True)
class Record:
    """A normalised unit from any source; nothing downstream learns which adapter made it."""

    role: Role
    text: str
    timestamp: datetime
    provenance: Provenance

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role):
            raise ContentError(f"record.role: expected a Role, got {show(self.role)}")
        check_text("record.text", self.text)
        parse_timestamp("record.timestamp", self.timestamp)

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {
            "role": self.role.value,
            "text": self.text,
            "timestamp": format_timestamp(self.timestamp),
            "provenance": self.provenance.to_json(),
        }

    @classmethod
    def from_json(cls, obj: object) -> Record:
        """Parse the JSON object form; errors name the field."""
        o = require_keys("record", obj, ("role", "text", "timestamp", "provenance"))
        return cls(
            role=Role.parse(o["role"]),
            text=check_text("record.text", o["text"]),
            timestamp=parse_timestamp("record.timestamp", o["timestamp"]),
            provenance=Provenance.from_json(o["provenance"]),
        )


@dataclass(frozen=True, slots=True)
class Chunk:
    """One or more whole records under a token budget; ``t`` is the 1-based turn in its run."""

    t: int
    records: tuple[Record, ...]
    tokens: int
    sha256: Sha256Hash = field(init=False, compare=False)

    def __post_init__(self) -> None:
        check_int("chunk.t", self.t, 1, INT4_MAX)
        check_int("chunk.tokens", self.tokens, 0, BIGINT_MAX)
        if not isinstance(self.records, tuple) or not self.records:
            raise ContentError("chunk.records: a chunk holds at least one record (as a tuple)")
        object.__setattr__(self, "sha256", self.content_hash())

    def canonical_bytes(self) -> bytes:
        """The canonical encoding of the chunk's identity (see ``domain.encoding``)."""
        return chunk_encoding(
            [(r.text, r.provenance.source, r.provenance.offset) for r in self.records]
        )

    def content_hash(self) -> Sha256Hash:
        """sha256 of record texts and provenance; timestamps and turn index excluded."""
        return Sha256Hash.of_bytes(self.canonical_bytes())

    @property
    def text(self) -> str:
        """The records' texts, one after another, as stored in an L0 node."""
        return "\n\n".join(r.text for r in self.records)

    def to_json(self) -> dict[str, Any]:
        """The JSON object form (``sha256`` included for readers; checked on the way back)."""
        return {
            "t": self.t,
            "records": [r.to_json() for r in self.records],
            "tokens": self.tokens,
            "sha256": self.sha256.value,
        }

    @classmethod
    def from_json(cls, obj: object) -> Chunk:
        """Parse the JSON form; a ``sha256`` that does not match the content is refused."""
        o = require_keys("chunk", obj, ("t", "records", "tokens"))
        records = o["records"]
        if not isinstance(records, list):
            raise ContentError(f"chunk.records: expected a list, got {show(records)}")
        chunk = cls(
            t=o["t"], records=tuple(Record.from_json(r) for r in records), tokens=o["tokens"]
        )
        _check_claimed_hash("chunk", o.get("sha256"), chunk.sha256)
        return chunk


def _check_claimed_hash(kind: str, claimed: object, actual: Sha256Hash) -> None:
    if claimed is not None and claimed != actual.value:
        raise ContentError(
            f"{kind}.sha256: {show(claimed)} does not match the content (expected {actual.value})"
        )


@dataclass(frozen=True, slots=True)
class MemoryNode:
    """A memory at one level. ``query_id`` is required at L0/L1 and absent at L2.

    ``parents`` are the shas of the nodes above this one (edges point up). ``run_id``,
    ``t``, ``created_at`` and ``parents`` are attributes, not identity.
    """

    level: Level
    project: ProjectId
    query_id: QueryId | None
    run_id: RunId
    t: int
    text: str
    created_at: datetime
    parents: tuple[Sha256Hash, ...] = ()
    sha256: Sha256Hash = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.level, Level):
            raise ContentError(f"level: expected a Level, got {show(self.level)}")
        for name, value, kind in (
            ("project", self.project, ProjectId),
            ("run_id", self.run_id, RunId),
        ):
            if not isinstance(value, kind):
                raise ContentError(f"{name}: expected {kind.__name__}, got {show(value)}")
        if self.level is Level.L2 and self.query_id is not None:
            raise ContentError(f"query_id: must be absent at L2, got {show(self.query_id.value)}")
        if self.level is not Level.L2 and not isinstance(self.query_id, QueryId):
            raise ContentError(
                f"query_id: required at {self.level.value}, got {show(self.query_id)}"
            )
        check_int("t", self.t, 0, INT4_MAX)
        check_text("text", self.text)
        if not self.text.strip():
            raise ContentError("text: a memory node needs non-empty text")
        parse_timestamp("created_at", self.created_at)
        if not isinstance(self.parents, tuple) or not all(
            isinstance(p, Sha256Hash) for p in self.parents
        ):
            raise ContentError(f"parents: expected a tuple of Sha256Hash, got {show(self.parents)}")
        # Parents are a set: keep them sorted and unique so equal nodes compare equal.
        object.__setattr__(self, "parents", tuple(sorted(set(self.parents))))
        object.__setattr__(self, "sha256", self.content_hash())
        if self.sha256 in self.parents:
            raise ContentError(f"parents: a node cannot be its own parent ({self.sha256.value})")

    @classmethod
    def from_store(
        cls,
        level: str,
        project: str,
        query_id: str | None,
        run_id: str,
        t: int,
        text: str,
        created_at: datetime,
        sha256: str,
        parents: tuple[str, ...] = (),
    ) -> MemoryNode:
        """A node read back from the store, which validated it on the way in: the field checks
        are skipped, but the content hash is recomputed and must equal the stored one (once
        per row in a process: the same row read again gives back the node made from it,
        nodes being immutable; a row changed in any column is a new one, checked again)."""
        row = (sha256, level, project, query_id, run_id, t, text, created_at, tuple(parents))
        with _READ_LOCK:
            made = _READ.get(row)
        if made is not None:
            return made
        node = object.__new__(cls)
        values = {
            "level": Level._value2member_map_[level],
            "project": trusted(ProjectId, project),
            "query_id": None if query_id is None else trusted(QueryId, query_id),
            "run_id": trusted(RunId, run_id),
            "t": t,
            "text": text,
            "created_at": created_at,
            "parents": tuple(trusted(Sha256Hash, p) for p in sorted(set(parents))),
        }
        for name, value in values.items():
            object.__setattr__(node, name, value)
        actual = node.content_hash()
        if actual.value != sha256:
            raise ContentError(
                f"sha256: stored node {sha256} hashes to {actual.value}; "
                "the row was changed outside poimen-memory"
            )
        object.__setattr__(node, "sha256", actual)
        with _READ_LOCK:
            _READ[row] = node
        return node

    def canonical_bytes(self) -> bytes:
        """The canonical encoding of the node's identity (see ``domain.encoding``)."""
        return node_encoding(
            self.level.value,
            self.project.value,
            None if self.query_id is None else self.query_id.value,
            self.text,
        )

    def content_hash(self) -> Sha256Hash:
        """sha256 over (level, project, query_id, text); never timestamps or run ids."""
        return Sha256Hash.of_bytes(self.canonical_bytes())

    @property
    def brief(self) -> str:
        """The first line of the text, cut to 80 characters: what a lens or a list shows."""
        first = next((line.strip() for line in self.text.splitlines() if line.strip()), "")
        return first if len(first) <= 80 else first[:79].rstrip() + "…"

    def to_json(self) -> dict[str, Any]:
        """The JSON object form (``sha256`` included for readers; checked on the way back)."""
        return {
            "sha256": self.sha256.value,
            "level": self.level.value,
            "project": self.project.value,
            "query_id": None if self.query_id is None else self.query_id.value,
            "run_id": self.run_id.value,
            "t": self.t,
            "text": self.text,
            "created_at": format_timestamp(self.created_at),
            "parents": [p.value for p in self.parents],
        }

    @classmethod
    def from_json(cls, obj: object) -> MemoryNode:
        """Parse the JSON form; a ``sha256`` that does not match the content is refused."""
        o = require_keys(
            "memory node", obj, ("level", "project", "run_id", "t", "text", "created_at")
        )
        query_id = o.get("query_id")
        parents = o.get("parents", [])
        if not isinstance(parents, list):
            raise ContentError(f"parents: expected a list, got {show(parents)}")
        node = cls(
            level=Level.parse(o["level"]),
            project=ProjectId(o["project"]),
            query_id=None if query_id is None else QueryId(query_id),
            run_id=RunId(o["run_id"]),
            t=o["t"],
            text=o["text"],
            created_at=parse_timestamp("created_at", o["created_at"]),
            parents=tuple(Sha256Hash(p) for p in parents),
        )
        _check_claimed_hash("node", o.get("sha256"), node.sha256)
        return node


@dataclass(frozen=True, slots=True)
class Edge:
    """``child`` is derived from or summarised by ``parent`` (L0 -> L1, L1 -> L2)."""

    project: ProjectId
    child: Sha256Hash
    parent: Sha256Hash

    def __post_init__(self) -> None:
        if self.child == self.parent:
            raise ContentError(f"edge: child and parent are the same node ({self.child.value})")

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {
            "project": self.project.value,
            "child": self.child.value,
            "parent": self.parent.value,
        }

    @classmethod
    def from_json(cls, obj: object) -> Edge:
        """Parse the JSON object form; errors name the field."""
        o = require_keys("edge", obj, ("project", "child", "parent"))
        return cls(ProjectId(o["project"]), Sha256Hash(o["child"]), Sha256Hash(o["parent"]))
