"""What lookups answer: memories with their citations, and the one JSON form of it.

``LookupResult`` is what the service computes; ``LookupResponse`` is the response model every
surface returns (the seed's node objects), published in the HTTP API's schema.

One rule for ``parents``, in every lookup: a node's parents are every node above it along
edges (its parents, theirs, and so on), each once, ordered by level (L1 before L2), then
newest first, then by sha256; each parent is cited as the node it is listed under. A node
with nothing above it has ``"parents": []``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from poimen_memory.domain import CommitInfo, CommitSha, Level, MemoryNode, RepoId, Sha256Hash
from poimen_memory.domain.checks import format_utc
from poimen_memory.lookup.responses import (
    EarlierOut,
    GitCommitOut,
    GitContextOut,
    How,
    LandedOut,
    LookupResponse,
    NodeOut,
    PendingOut,
    PlacedOut,
    RememberResponse,
    RepoOut,
)
from poimen_memory.store import Evidence

__all__ = [
    "HOVER_SHOWN",
    "Citation",
    "DocumentMemories",
    "Earlier",
    "EarlierOut",
    "GitCommitOut",
    "GitContextOut",
    "How",
    "Landed",
    "LandedOut",
    "LineMemory",
    "LookupResponse",
    "LookupResult",
    "Memory",
    "NodeOut",
    "PendingOut",
    "PlacedOut",
    "RememberResponse",
    "RepoOut",
    "assemble",
    "citation_key",
    "citation_of",
    "nodes_above",
    "parents_order",
]


# git_commit's keys as git_context names them.
_CONTEXT_NAMES = {"sha": "commit_sha", "message": "commit_msg", "date": "author_date"}


@dataclass(frozen=True, slots=True)
class Citation:
    """A place in code that a memory's evidence is anchored to, with its commit."""

    repo: RepoId
    file: str
    line_start: int
    line_end: int
    commit: CommitInfo

    @property
    def git_ref(self) -> str:
        """``file:line``, ``file:start-end`` or ``file`` (whole file): ready to cite."""
        if self.line_start == 0:
            return self.file
        if self.line_start == self.line_end:
            return f"{self.file}:{self.line_start}"
        return f"{self.file}:{self.line_start}-{self.line_end}"

    def cite(self) -> str:
        """``src/kong/buffer.rs:42 (commit abc1234)``."""
        return f"{self.git_ref} (commit {self.commit.sha.short()})"

    def git_commit(self) -> GitCommitOut:
        """The seed's ``git_commit`` object."""
        c = self.commit
        return GitCommitOut(
            sha=c.sha.value,
            message=c.message,
            author=c.author_email,
            author_name=c.author_name,
            date=format_utc(c.author_date),
        )

    def git_context(self) -> GitContextOut:
        """The seed's ``git_context`` object: the place, and the commit's fields renamed."""
        commit = self.git_commit().model_dump()
        return GitContextOut(
            repo=self.repo.value,
            file=self.file,
            line=self.line_start,
            line_end=self.line_end,
            **{_CONTEXT_NAMES.get(k, k): v for k, v in commit.items()},
        )


@dataclass(frozen=True, slots=True)
class Landed:
    """A memory recorded on a rewritten commit, found on the commit its change landed as."""

    recorded: CommitSha
    landed: CommitSha
    how: How

    def response(self) -> LandedOut:
        """The JSON form."""
        return LandedOut(
            recorded_commit=self.recorded.value, landed_commit=self.landed.value, how=self.how
        )


@dataclass(frozen=True, slots=True)
class Earlier:
    """A memory about an earlier version of a line: replaced by ``replaced_by``."""

    replaced_by: CommitInfo
    depth: int

    def response(self) -> EarlierOut:
        """The JSON form."""
        return EarlierOut(
            replaced_by=self.replaced_by.sha.value,
            replaced_at=format_utc(self.replaced_by.author_date),
            depth=self.depth,
        )


@dataclass(frozen=True, slots=True)
class Memory:
    """A node as a lookup returns it: cited by its evidence (for L1/L2: the evidence below
    it), with the nodes above it, each carrying the same citation."""

    node: MemoryNode
    citation: Citation | None
    citations: tuple[Citation, ...] = ()
    parents: tuple[Memory, ...] = ()
    lines: tuple[int, ...] = ()  # current lines of the looked-up file it is attached to
    landed: Landed | None = None  # found through a rewritten commit
    earlier: Earlier | None = None  # about an earlier version of the line

    def response(self, with_parents: bool = True) -> NodeOut:
        """The seed's node object."""
        c, n = self.citation, self.node
        return NodeOut(
            sha256=n.sha256.value,
            level=n.level.value,
            brief=n.brief,
            text=n.text,
            created_at=format_utc(n.created_at),
            query_id=None if n.query_id is None else n.query_id.value,
            run_id=n.run_id.value,
            git_ref=None if c is None else c.git_ref,
            git_commit=None if c is None else c.git_commit(),
            git_context=None if c is None else c.git_context(),
            anchors=[a.git_context() for a in self.citations] or None,
            lines=list(self.lines) or None,
            parents=[p.response(with_parents=False) for p in self.parents]
            if with_parents
            else None,
            landed=None if self.landed is None else self.landed.response(),
            earlier_version=None if self.earlier is None else self.earlier.response(),
        )


HOVER_SHOWN = 8
"""Pieces of evidence (and syntheses) a hover shows; the rest are counted (the code lens and
``mem why`` show every one)."""


@dataclass(frozen=True, slots=True)
class LookupResult:
    """The answer to any lookup: L0 evidence first (newest first), then the nodes above it.
    ``repo``: the repository the lookup was scoped to (None: any); ``mapped``: by-git only,
    whether the lines were mapped through blame; ``truncated``: more exists than was
    answered, and ``cursor`` fetches it (by-commit, by-author)."""

    repo: RepoId | None
    memories: tuple[Memory, ...]
    mapped: bool | None = None
    truncated: bool = False
    cursor: str | None = None
    evidence_total: int | None = None
    """A hover's: how many pieces of evidence the line has in all, where only the newest
    ``HOVER_SHOWN`` (and the memories above them) were read; None: all were."""

    @property
    def repos(self) -> list[RepoId]:
        """The repositories the memories are cited in, sorted."""
        cited = {c.repo for m in self.memories for c in (m.citation, *m.citations) if c is not None}
        return sorted(cited)

    def named_repo(self) -> RepoOut:
        """The response's ``repo``: the scope, else the one repository cited, else the list."""
        if self.repo is not None:
            return self.repo.value
        repos = [r.value for r in self.repos]
        return repos[0] if len(repos) == 1 else repos

    def response(self) -> LookupResponse:
        """The response model every surface returns."""
        return LookupResponse(
            repo=self.named_repo(),
            nodes=[m.response() for m in self.memories],
            mapped=self.mapped,
            truncated=self.truncated,
            cursor=self.cursor,
        )

    def to_json(self) -> dict[str, Any]:
        """The one JSON form every surface returns."""
        return self.response().model_dump(mode="json")

    @property
    def evidence(self) -> list[Memory]:
        """The L0 memories."""
        return [m for m in self.memories if m.node.level is Level.L0]


LineMemory = tuple[str, str, int, int, str]
"""A memory on a line, as code lens needs it: ``(node, file, line_start, line_end, commit)``,
which node (its sha256), cited where and at which commit (its full id: the document's
``commits`` has its details); no text. A plain tuple of plain values, read by the indexes
below: a whole file's memories are tens of thousands, and once a collection has seen one
the collector tracks it no more, nor the tuples and maps that hold only such (an object of a
class, a named tuple too, it walks at every full collection)."""
# Indexes of a LineMemory's parts.
NODE: Final = 0
FILE: Final = 1
LINE_START: Final = 2
LINE_END: Final = 3
COMMIT: Final = 4


@dataclass(frozen=True, slots=True)
class DocumentMemories:
    """Every memory of a file, by current line (1-based), for code lens; the commits its
    memories are cited at, by id."""

    repo: RepoId
    path: str
    by_line: dict[int, tuple[LineMemory, ...]]
    commits: Mapping[str, CommitInfo] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Distinct L0 memories in the file."""
        distinct = {id(ms): ms for ms in self.by_line.values()}  # lines often share a tuple
        return len({m[NODE] for ms in distinct.values() for m in ms})

    def citation(self, memory: LineMemory) -> Citation:
        """Where ``memory`` (one of this document's) is cited, with its commit."""
        _, file, start, end, commit = memory
        return Citation(self.repo, file, start, end, self.commits[commit])


def citation_of(e: Evidence) -> Citation:
    return Citation(e.anchor.repo, e.anchor.file, e.anchor.line_start, e.anchor.line_end, e.commit)


def citation_key(c: Citation) -> tuple[str, str, str, int, int]:
    return (c.repo.value, c.commit.sha.value, c.file, c.line_start, c.line_end)


def parents_order(node: MemoryNode) -> tuple[int, float, str]:
    """The order of ``parents``: by level (L1 before L2), then newest first, then sha256."""
    return (node.level.rank, -node.created_at.timestamp(), node.sha256.value)


def nodes_above(
    start: Iterable[Sha256Hash], known: Mapping[Sha256Hash, MemoryNode]
) -> list[MemoryNode]:
    """The nodes ``start`` names and every node above them, along the parents of ``known``
    nodes (others are not followed), each once, in the order of ``parents``."""
    found: dict[Sha256Hash, MemoryNode] = {}
    todo = list(start)
    while todo:
        sha = todo.pop()
        node = known.get(sha)
        if node is None or sha in found:
            continue
        found[sha] = node
        todo.extend(node.parents)
    return sorted(found.values(), key=parents_order)


def assemble(
    repo: RepoId | None,
    rows: Iterable[Evidence],
    lines_of: Mapping[Sha256Hash, Iterable[int]] | None = None,
    landed_of: Mapping[Sha256Hash, Landed] | None = None,
    earlier_of: Mapping[Sha256Hash, Earlier] | None = None,
) -> LookupResult:
    """Evidence rows -> one Memory per L0 node (its matched anchors as citations) followed by
    each node above them once, cited by the first evidence that reached it. Newest first.
    Every node's parents follow the one rule (see the module). ``landed_of`` and
    ``earlier_of`` say which L0 nodes were found through a rewritten commit or on an earlier
    version of the line."""
    by_node: dict[Sha256Hash, list[Evidence]] = {}
    for row in rows:
        by_node.setdefault(row.node.sha256, []).append(row)
    known: dict[Sha256Hash, MemoryNode] = {}
    for group in by_node.values():
        known.update((node.sha256, node) for node, _ in group[0].ancestors)
    l0s: list[Memory] = []
    above: dict[Sha256Hash, tuple[MemoryNode, int, Citation]] = {}
    for sha, group in by_node.items():
        citations = sorted(
            {citation_key(c): c for c in map(citation_of, group)}.values(), key=citation_key
        )
        primary = citations[0]
        ancestors = group[0].ancestors
        over = sorted((node for node, _ in ancestors), key=parents_order)
        parents = tuple(Memory(node, primary) for node in over)
        lines = tuple(sorted(set(lines_of.get(sha, ()) if lines_of else ())))
        landed = landed_of.get(sha) if landed_of else None
        earlier = earlier_of.get(sha) if earlier_of else None
        l0s.append(
            Memory(group[0].node, primary, tuple(citations), parents, lines, landed, earlier)
        )
        for node, depth in ancestors:
            if node.sha256 not in above or depth < above[node.sha256][1]:
                above[node.sha256] = (node, depth, primary)
    l0s.sort(key=lambda m: (m.node.created_at, m.node.sha256.value), reverse=True)
    uppers = sorted(
        above.values(),
        key=lambda t: (-t[0].level.rank, -t[0].created_at.timestamp(), t[0].sha256.value),
    )
    up_memories = [
        Memory(
            node,
            citation,
            parents=tuple(
                Memory(p, citation)
                for p in nodes_above(node.parents, known)
                if p.sha256 != node.sha256
            ),
        )
        for node, _, citation in uppers
    ]
    # L1 before L2 in the flat list: evidence, then what was learned from it, then synthesis.
    up_memories.sort(key=lambda m: (m.node.level.rank, -m.node.created_at.timestamp()))
    return LookupResult(repo, tuple(l0s + up_memories))
