"""The vocabulary every other module speaks (spec M0.2) and the content-hash identity.

Identity is a sha256 over a canonical byte encoding of the *semantic* content only:

* ``MemoryNode``: ``(level, project, query_id, text)``
* ``Chunk``: the ordered record texts with their provenance (source id, offset)

Timestamps, run ids, turn indexes, anchors and parents never enter the hash, so re-running
the same input yields the same identities and ingest stays idempotent.

Canonical encoding (version 1), all integers unsigned big-endian::

    encoding  := TAG field*
    field     := string | optional
    string    := u64(len(utf8)) utf8
    optional  := 0x00                      # absent (None)
               | 0x01 string               # present
    TAG       := b"poimen-memory/node/v1\\x00" | b"poimen-memory/chunk/v1\\x00"

    node      := TAG string(level) string(project) optional(query_id) string(text)
    chunk     := TAG u64(n_records) (string(text) string(source) u64(offset))*

Length prefixes make the encoding injective (no two field tuples share bytes). Changing it
orphans every stored node; ``tests/test_identity.py::test_a4_...`` pins it with literals.
"""

from __future__ import annotations

import enum
import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, TypeVar

__all__ = [
    "Anchor",
    "Chunk",
    "CommitInfo",
    "CommitSha",
    "ContentError",
    "Edge",
    "Level",
    "MemoryNode",
    "ProjectId",
    "Provenance",
    "QueryId",
    "Record",
    "RepoId",
    "Role",
    "RunId",
    "Sha256Hash",
    "TokenCounter",
    "approx_tokens",
    "check_repo_path",
    "parse_timestamp",
]

NODE_TAG: Final = b"poimen-memory/node/v1\x00"
CHUNK_TAG: Final = b"poimen-memory/chunk/v1\x00"

# Postgres `integer` bounds every turn index and offset we store.
_INT4_MAX: Final = 2**31 - 1
_BIGINT_MAX: Final = 2**63 - 1


class ContentError(ValueError):
    """A value that does not satisfy the domain's rules; the message names field and value."""


def _show(value: object, limit: int = 80) -> str:
    """repr() of a value, cut to keep error messages one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        if isinstance(value, str):
            for level in cls:
                if level.value == value:
                    return level
        raise ContentError(f"level: expected 'L0', 'L1' or 'L2', got {_show(value)}")

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
        if isinstance(value, str):
            for role in cls:
                if role.value == value:
                    return role
        spellings = ", ".join(r.value for r in cls)
        raise ContentError(f"role: expected one of {spellings}, got {_show(value)}")


# ---------------------------------------------------------------------------------------------
# Newtypes: validated at construction, no default, no unvalidated conversion.

_IDENT_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]*")
_SHA256_RE: Final = re.compile(r"[0-9a-f]{64}")


def _check_ident(kind: str, value: object, max_len: int) -> str:
    if not isinstance(value, str):
        raise ContentError(f"{kind}: expected a string, got {_show(value)}")
    if not value.strip():
        raise ContentError(f"{kind}: must not be empty or whitespace, got {_show(value)}")
    if len(value) > max_len:
        raise ContentError(f"{kind}: longer than {max_len} characters: {_show(value)}")
    _check_unicode(kind, value)
    if not _IDENT_RE.fullmatch(value):
        raise ContentError(
            f"{kind}: {_show(value)} has characters outside [A-Za-z0-9._:@/+=-] "
            "or does not start with a letter or digit"
        )
    return value


@dataclass(frozen=True, slots=True, order=True)
class ProjectId:
    """The project every row belongs to (the distribution key of the store)."""

    value: str

    def __post_init__(self) -> None:
        _check_ident("project", self.value, 128)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, order=True)
class QueryId:
    """The user query (prompt) an L0/L1 node answers to."""

    value: str

    def __post_init__(self) -> None:
        _check_ident("query_id", self.value, 256)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, order=True)
class RunId:
    """One run of an agent (a session). Never part of an identity."""

    value: str

    def __post_init__(self) -> None:
        _check_ident("run_id", self.value, 256)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, order=True)
class Sha256Hash:
    """A content hash: exactly 64 lowercase hex digits."""

    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not _SHA256_RE.fullmatch(self.value):
            raise ContentError(f"sha256: expected 64 lowercase hex digits, got {_show(self.value)}")

    @classmethod
    def of_bytes(cls, data: bytes) -> Sha256Hash:
        """The sha256 of ``data``."""
        return cls(hashlib.sha256(data).hexdigest())

    def short(self, n: int = 12) -> str:
        """The first ``n`` hex digits, for display."""
        return self.value[:n]

    def __str__(self) -> str:
        return self.value


def _trusted(cls: type[_T], value: str) -> _T:
    """A newtype around a value that was validated when it was stored (no re-check)."""
    obj = object.__new__(cls)
    object.__setattr__(obj, "value", value)
    return obj


_T = TypeVar("_T", ProjectId, QueryId, RunId, Sha256Hash)


# ---------------------------------------------------------------------------------------------
# Canonical encoding


def _enc_str(value: str) -> bytes:
    data = value.encode("utf-8")
    return len(data).to_bytes(8, "big") + data


def _enc_opt(value: str | None) -> bytes:
    return b"\x00" if value is None else b"\x01" + _enc_str(value)


def _enc_u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


# ---------------------------------------------------------------------------------------------
# Values


def parse_timestamp(name: str, value: object) -> datetime:
    """An ISO 8601 timestamp with a UTC offset; naive times are refused (they are ambiguous)."""
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str):
        try:
            ts = datetime.fromisoformat(
                value.replace("Z", "+00:00", 1) if value.endswith("Z") else value
            )
        except ValueError:
            raise ContentError(f"{name}: not an ISO 8601 timestamp: {_show(value)}") from None
    else:
        raise ContentError(f"{name}: expected an ISO 8601 timestamp string, got {_show(value)}")
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise ContentError(f"{name}: timestamp needs a UTC offset (e.g. 'Z'): {_show(value)}")
    return ts


def _format_timestamp(ts: datetime) -> str:
    return ts.isoformat()


def _require_keys(kind: str, obj: object, keys: Iterable[str]) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise ContentError(f"{kind}: expected a JSON object, got {_show(obj)}")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise ContentError(f"{kind}: missing field {missing[0]!r}")
    return obj


def _check_int(name: str, value: object, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContentError(f"{name}: expected an integer, got {_show(value)}")
    if not minimum <= value <= maximum:
        raise ContentError(f"{name}: must be between {minimum} and {maximum}, got {value}")
    return value


def _check_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ContentError(f"{name}: expected a string, got {_show(value)}")
    if "\x00" in value:
        # Postgres text cannot hold NUL; refusing here keeps a batch from failing half-way.
        raise ContentError(f"{name}: contains a NUL character")
    _check_unicode(name, value)
    return value


def _check_unicode(name: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ContentError(f"{name}: not valid Unicode text (lone surrogate)") from None


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a record came from: a source id (a transcript path or URL) and an offset in it."""

    source: str
    offset: int

    def __post_init__(self) -> None:
        _check_text("provenance.source", self.source)
        if not self.source.strip():
            raise ContentError(f"provenance.source: must not be empty, got {_show(self.source)}")
        _check_int("provenance.offset", self.offset, 0, _BIGINT_MAX)

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {"source": self.source, "offset": self.offset}

    @classmethod
    def from_json(cls, obj: object) -> Provenance:
        """Parse the JSON object form; errors name the field."""
        o = _require_keys("provenance", obj, ("source", "offset"))
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
            raise ContentError(f"record.role: expected a Role, got {_show(self.role)}")
        _check_text("record.text", self.text)
        parse_timestamp("record.timestamp", self.timestamp)

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {
            "role": self.role.value,
            "text": self.text,
            "timestamp": _format_timestamp(self.timestamp),
            "provenance": self.provenance.to_json(),
        }

    @classmethod
    def from_json(cls, obj: object) -> Record:
        """Parse the JSON object form; errors name the field."""
        o = _require_keys("record", obj, ("role", "text", "timestamp", "provenance"))
        return cls(
            role=Role.parse(o["role"]),
            text=_check_text("record.text", o["text"]),
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
        _check_int("chunk.t", self.t, 1, _INT4_MAX)
        _check_int("chunk.tokens", self.tokens, 0, _BIGINT_MAX)
        if not isinstance(self.records, tuple) or not self.records:
            raise ContentError("chunk.records: a chunk holds at least one record (as a tuple)")
        object.__setattr__(self, "sha256", self.content_hash())

    def canonical_bytes(self) -> bytes:
        """The canonical encoding of the chunk's identity (see module docstring)."""
        parts = [CHUNK_TAG, _enc_u64(len(self.records))]
        for record in self.records:
            parts.append(_enc_str(record.text))
            parts.append(_enc_str(record.provenance.source))
            parts.append(_enc_u64(record.provenance.offset))
        return b"".join(parts)

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
        o = _require_keys("chunk", obj, ("t", "records", "tokens"))
        records = o["records"]
        if not isinstance(records, list):
            raise ContentError(f"chunk.records: expected a list, got {_show(records)}")
        chunk = cls(
            t=o["t"], records=tuple(Record.from_json(r) for r in records), tokens=o["tokens"]
        )
        _check_claimed_hash("chunk", o.get("sha256"), chunk.sha256)
        return chunk


def _check_claimed_hash(kind: str, claimed: object, actual: Sha256Hash) -> None:
    if claimed is not None and claimed != actual.value:
        raise ContentError(
            f"{kind}.sha256: {_show(claimed)} does not match the content (expected {actual.value})"
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
            raise ContentError(f"level: expected a Level, got {_show(self.level)}")
        for name, value, kind in (
            ("project", self.project, ProjectId),
            ("run_id", self.run_id, RunId),
        ):
            if not isinstance(value, kind):
                raise ContentError(f"{name}: expected {kind.__name__}, got {_show(value)}")
        if self.level is Level.L2 and self.query_id is not None:
            raise ContentError(f"query_id: must be absent at L2, got {_show(self.query_id.value)}")
        if self.level is not Level.L2 and not isinstance(self.query_id, QueryId):
            raise ContentError(
                f"query_id: required at {self.level.value}, got {_show(self.query_id)}"
            )
        _check_int("t", self.t, 0, _INT4_MAX)
        _check_text("text", self.text)
        if not self.text.strip():
            raise ContentError("text: a memory node needs non-empty text")
        parse_timestamp("created_at", self.created_at)
        if not isinstance(self.parents, tuple) or not all(
            isinstance(p, Sha256Hash) for p in self.parents
        ):
            raise ContentError(
                f"parents: expected a tuple of Sha256Hash, got {_show(self.parents)}"
            )
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
        are skipped, but the content hash is recomputed and must equal the stored one."""
        node = object.__new__(cls)
        values = {
            "level": Level(level),
            "project": _trusted(ProjectId, project),
            "query_id": None if query_id is None else _trusted(QueryId, query_id),
            "run_id": _trusted(RunId, run_id),
            "t": t,
            "text": text,
            "created_at": created_at,
            "parents": tuple(_trusted(Sha256Hash, p) for p in sorted(set(parents))),
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
        return node

    def canonical_bytes(self) -> bytes:
        """The canonical encoding of the node's identity (see module docstring)."""
        return b"".join(
            (
                NODE_TAG,
                _enc_str(self.level.value),
                _enc_str(self.project.value),
                _enc_opt(None if self.query_id is None else self.query_id.value),
                _enc_str(self.text),
            )
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
            "created_at": _format_timestamp(self.created_at),
            "parents": [p.value for p in self.parents],
        }

    @classmethod
    def from_json(cls, obj: object) -> MemoryNode:
        """Parse the JSON form; a ``sha256`` that does not match the content is refused."""
        o = _require_keys(
            "memory node", obj, ("level", "project", "run_id", "t", "text", "created_at")
        )
        query_id = o.get("query_id")
        parents = o.get("parents", [])
        if not isinstance(parents, list):
            raise ContentError(f"parents: expected a list, got {_show(parents)}")
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
        o = _require_keys("edge", obj, ("project", "child", "parent"))
        return cls(ProjectId(o["project"]), Sha256Hash(o["child"]), Sha256Hash(o["parent"]))


# ---------------------------------------------------------------------------------------------
# Token counting

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text; pass your model's tokenizer to the chunker to be exact."""


def approx_tokens(text: str) -> int:
    """About one token per four UTF-8 bytes, the usual rule of thumb for BPE tokenizers."""
    return math.ceil(len(text.encode("utf-8")) / 4)


# ---------------------------------------------------------------------------------------------
# Git anchoring values

_COMMIT_RE: Final = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_REPO_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~:@/+-]*")


@dataclass(frozen=True, slots=True, order=True)
class CommitSha:
    """A full git object id: 40 (sha1) or 64 (sha256) lowercase hex digits."""

    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not _COMMIT_RE.fullmatch(self.value):
            raise ContentError(
                f"commit_sha: expected a full commit id (40 or 64 lowercase hex digits), "
                f"got {_show(self.value)}"
            )

    def short(self, n: int = 7) -> str:
        """The abbreviated id, for display."""
        return self.value[:n]

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, order=True)
class RepoId:
    """A normalized repository identity such as ``github.com/org/x`` (see gitio)."""

    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not _REPO_RE.fullmatch(self.value):
            raise ContentError(
                f"repo: expected a repository identity like 'github.com/org/x', "
                f"got {_show(self.value)}"
            )
        if len(self.value) > 512:
            raise ContentError(f"repo: longer than 512 characters: {_show(self.value)}")

    def __str__(self) -> str:
        return self.value


def check_repo_path(name: str, value: object) -> str:
    """A path relative to the repository root, '/'-separated, without '.' or '..' parts."""
    text = _check_text(name, value)
    if not text or text.startswith("/"):
        raise ContentError(
            f"{name}: expected a path relative to the repository root, got {_show(value)}"
        )
    parts = text.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ContentError(
            f"{name}: {_show(value)} must be a normalized relative path (no '', '.' or '..' parts)"
        )
    return text


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """Commit metadata taken from the repository at ingest (mailmap applied to the author)."""

    repo: RepoId
    sha: CommitSha
    message: str
    author_name: str
    author_email: str
    author_date: datetime

    def __post_init__(self) -> None:
        _check_text("commit.message", self.message)
        _check_text("commit.author_name", self.author_name)
        _check_text("commit.author_email", self.author_email)
        parse_timestamp("commit.author_date", self.author_date)

    @property
    def summary(self) -> str:
        """The first line of the message."""
        return self.message.split("\n", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {
            "repo": self.repo.value,
            "sha": self.sha.value,
            "message": self.message,
            "author_name": self.author_name,
            "author_email": self.author_email,
            "author_date": _format_timestamp(self.author_date),
        }

    @classmethod
    def from_json(cls, obj: object) -> CommitInfo:
        """Parse the JSON object form; errors name the field."""
        o = _require_keys(
            "commit", obj, ("repo", "sha", "message", "author_name", "author_email", "author_date")
        )
        return cls(
            repo=RepoId(o["repo"]),
            sha=CommitSha(o["sha"]),
            message=o["message"],
            author_name=o["author_name"],
            author_email=o["author_email"],
            author_date=parse_timestamp("commit.author_date", o["author_date"]),
        )


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where an L0 node's evidence sits: lines of ``file`` in ``commit``'s version of it.

    ``line_start == line_end == 0`` anchors the whole file. Lines are 1-based, inclusive.
    """

    project: ProjectId
    node: Sha256Hash
    repo: RepoId
    commit: CommitSha
    file: str
    line_start: int
    line_end: int

    def __post_init__(self) -> None:
        check_repo_path("file", self.file)
        _check_int("line_start", self.line_start, 0, _INT4_MAX)
        _check_int("line_end", self.line_end, 0, _INT4_MAX)
        if (self.line_start == 0) != (self.line_end == 0):
            raise ContentError(
                f"line_end: whole-file anchors have line_start = line_end = 0, "
                f"got {self.line_start}..{self.line_end}"
            )
        if self.line_end < self.line_start:
            raise ContentError(f"line_end: {self.line_end} is before line_start {self.line_start}")

    def covers(self, line: int) -> bool:
        """Whether ``line`` (1-based, in the anchor's commit) falls in the anchor."""
        return self.line_start == 0 or self.line_start <= line <= self.line_end

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {
            "project": self.project.value,
            "node": self.node.value,
            "repo": self.repo.value,
            "commit_sha": self.commit.value,
            "file": self.file,
            "line_start": self.line_start,
            "line_end": self.line_end,
        }

    @classmethod
    def from_json(cls, obj: object) -> Anchor:
        """Parse the JSON object form; errors name the field."""
        o = _require_keys(
            "anchor",
            obj,
            ("project", "node", "repo", "commit_sha", "file", "line_start", "line_end"),
        )
        return cls(
            project=ProjectId(o["project"]),
            node=Sha256Hash(o["node"]),
            repo=RepoId(o["repo"]),
            commit=CommitSha(o["commit_sha"]),
            file=o["file"],
            line_start=o["line_start"],
            line_end=o["line_end"],
        )
