"""What adapters produce: node drafts with anchor requests, before git and the store see them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from poimen_memory.domain import MemoryNode

__all__ = [
    "AnchorRequest",
    "BadRecord",
    "Draft",
    "IngestError",
    "IngestResponse",
    "LinesAtCommit",
    "LinesAtHead",
    "Parsed",
    "SourceRef",
    "TextAtHead",
    "TraceRange",
    "WholeFile",
    "WrittenOut",
]


class IngestError(Exception):
    """Input that cannot be ingested as a whole (unreadable file, unknown format)."""


@dataclass(frozen=True, slots=True)
class SourceRef:
    """Where a record came from: input file and 1-based line."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A record that was not ingested, and why."""

    source: SourceRef
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


@dataclass(frozen=True, slots=True)
class LinesAtCommit:
    """Lines ``start..end`` of ``file`` as they are in ``commit`` (0..0: the whole file)."""

    file: str
    start: int
    end: int
    commit: str


@dataclass(frozen=True, slots=True)
class LinesAtHead:
    """Lines of ``file`` at HEAD, mapped through blame to where they came from."""

    file: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class WholeFile:
    """The whole of ``file``, at ``commit`` or at the last commit that touched it."""

    file: str
    commit: str | None = None


@dataclass(frozen=True, slots=True)
class TextAtHead:
    """The lines an edit produced: ``text`` located once in ``file`` at HEAD, kept only where
    blame says they were committed no earlier than the edit (``not_before``). When HEAD does
    not hold ``text`` yet (the edit is not committed), the blocks of lines the edit ``added``
    (all of ``text``'s lines when none are given) wait for a commit as pending anchors."""

    file: str
    text: str
    not_before: datetime
    added: tuple[tuple[str, ...], ...] = ()

    def added_blocks(self) -> tuple[tuple[str, ...], ...]:
        """The runs of consecutive lines the edit added, each non-empty."""
        blocks = self.added or (tuple(self.text.strip("\n").split("\n")),)
        return tuple(b for b in blocks if any(line.strip() for line in b))


@dataclass(frozen=True, slots=True)
class TraceRange:
    """An Agent Trace range: lines ``start..end`` of ``file`` at ``revision``, as the spec
    describes them (the revision that last touched them) or as its reference hook writes them
    (positions in the edited work tree on top of ``revision``, committed later). Optionally
    with the range text's hash (``sha256:<hex>``)."""

    file: str
    start: int
    end: int
    revision: str
    content_hash: str | None = None
    recorded_at: datetime | None = None  # the record's timestamp


AnchorRequest = LinesAtCommit | LinesAtHead | WholeFile | TextAtHead | TraceRange


@dataclass(slots=True)
class Draft:
    """A node ready but for its anchors; ``parents`` are local ids or sha256 values."""

    local_id: str
    node: MemoryNode
    source: SourceRef
    parents: list[str] = field(default_factory=list)
    anchors: list[AnchorRequest] = field(default_factory=list)


@dataclass(slots=True)
class Parsed:
    """An adapter's output for one input file."""

    drafts: list[Draft] = field(default_factory=list)
    edges: list[tuple[str, str, SourceRef]] = field(default_factory=list)  # child, parent refs
    bad: list[BadRecord] = field(default_factory=list)
    incomplete: list[SourceRef] = field(default_factory=list)  # a torn last line, skipped
    noop_edits: int = 0  # edits that changed nothing: not anchored, and not looked for


class WrittenOut(BaseModel):
    """What an ingest added to the store (the rest was there already)."""

    nodes: Annotated[int, Field(description="New nodes.")]
    edges: Annotated[int, Field(description="New edges.")]
    anchors: Annotated[int, Field(description="New anchors.")]
    commits: Annotated[int, Field(description="New commits.")]


class IngestResponse(BaseModel):
    """What ``mem ingest`` read and wrote (``--json``)."""

    repo: Annotated[str, Field(description="The repository's identity.")]
    files: Annotated[int, Field(description="Files read.")]
    nodes: Annotated[dict[str, int], Field(description="Nodes read, by level.")]
    edges: Annotated[int, Field(description="Edges read.")]
    anchors: Annotated[int, Field(description="Anchors placed.")]
    unanchored_edits: Annotated[
        int, Field(description="Edits and trace ranges not placed with certainty.")
    ]
    noop_edits: Annotated[int, Field(description="Edits that changed nothing.")]
    pending_edits: Annotated[
        int,
        Field(
            description="Edits whose lines are not committed yet: they wait for a commit as "
            "pending anchors (placed on the next lookup of the file, `mem db resolve-pending` "
            "or the git post-commit hook)."
        ),
    ] = 0
    written: Annotated[WrittenOut, Field(description="What was new to the store.")]
    skipped: Annotated[list[str], Field(description="Records skipped, and why.")]
    batches: Annotated[int, Field(description="Transactions written.")]
    redacted: Annotated[dict[str, int], Field(description="Secrets redacted, by kind.")]
    incomplete_last_lines: Annotated[
        list[str], Field(description="Files whose last line was incomplete (skipped).")
    ]
