"""Lookups by text: full-text search over the memories of a project, each result cited by
its evidence in a repository when one is named."""

from __future__ import annotations

from poimen_memory.domain import Sha256Hash
from poimen_memory.lookup.core import LookupCore
from poimen_memory.lookup.requests import QueryRequest
from poimen_memory.lookup.results import (
    Citation,
    LookupResult,
    Memory,
    citation_key,
    citation_of,
    nodes_above,
)

__all__ = ["TextSearch"]


class TextSearch:
    """Full-text search, answered as every other lookup is."""

    def __init__(self, core: LookupCore) -> None:
        self._core = core

    def query(self, req: QueryRequest) -> LookupResult:
        """Full-text search, best first; with ``git_repo`` each result is cited by its evidence
        in that repository (for L1/L2: the evidence they were built from). Each result's
        parents are every node above it, in the order every lookup gives them."""
        store = self._core.store
        project = self._core.project_of(req)
        git_repo = self._core.known_repo(project, req.git_repo, "git_repo")
        found = store.search(project, req.query, req.limit + 1)
        truncated = len(found) > req.limit
        nodes = [n for n, _ in found[: req.limit]]
        known = {w.node.sha256: w.node for w in store.walk_up(project, [n.sha256 for n in nodes])}
        known.update((n.sha256, n) for n in nodes)
        citations: dict[Sha256Hash, Citation] = {}
        if git_repo is not None and nodes:
            below = store.evidence_below(project, [n.sha256 for n in nodes])
            l0s = {s for shas in below.values() for s in shas}
            first: dict[Sha256Hash, Citation] = {}
            for row in store.evidence_for_nodes(project, git_repo, l0s):
                c = citation_of(row)
                if row.node.sha256 not in first or citation_key(c) < citation_key(
                    first[row.node.sha256]
                ):
                    first[row.node.sha256] = c
            for n in nodes:
                options = [first[s] for s in below.get(n.sha256, []) if s in first]
                if options:
                    citations[n.sha256] = min(options, key=citation_key)
        memories = []
        for n in nodes:
            citation = citations.get(n.sha256)
            parents = tuple(
                Memory(p, citation) for p in nodes_above(n.parents, known) if p.sha256 != n.sha256
            )
            memories.append(Memory(n, citation, (citation,) if citation else (), parents))
        return LookupResult(git_repo, tuple(memories), truncated=truncated)
