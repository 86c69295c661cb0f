"""Reads and writes for memories of rewritten commits: anchors found by the text of their
lines, and the commit aliases (old -> new) found once and shared through the store."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from psycopg.rows import tuple_row

from poimen_memory.domain import CommitSha, ProjectId, RepoId, Sha256Hash
from poimen_memory.store.connector import Connector
from poimen_memory.store.evidence import Evidence, EvidenceReads
from poimen_memory.store.queries import query

__all__ = ["ALIAS_KINDS", "Alias", "Candidate", "RewriteReads"]

ALIAS_KINDS = ("same-change", "squash")
# Bound on the candidates one lookup reads (those in the looked-up file first).
MAX_CANDIDATES = 4096


@dataclass(frozen=True, slots=True)
class Candidate:
    """An anchor holding a line of a hash asked for, with what deciding a match needs."""

    node: Sha256Hash
    commit: CommitSha
    file: str
    line_start: int
    line_end: int
    line_hashes: tuple[int | None, ...]
    added_from: int | None
    patch_id: str | None
    author_date: datetime


@dataclass(frozen=True, slots=True)
class Alias:
    """A rewritten commit and the commit its change landed as."""

    old: CommitSha
    new: CommitSha
    how: Literal["same-change", "squash"]


class RewriteReads(EvidenceReads):
    """The store's reads and writes for rewritten commits, on its connector."""

    _connector: Connector

    def rewrite_candidates(
        self,
        project: ProjectId,
        repo: RepoId,
        hashes: Iterable[int],
        exclude: Iterable[CommitSha],
        file: str = "",
    ) -> list[Candidate]:
        """Anchors holding any of ``hashes`` at commits other than ``exclude`` (those in
        ``file`` first, at most MAX_CANDIDATES): one indexed statement."""
        wanted = sorted(set(hashes))
        if not wanted:
            return []
        with (
            self._connector.connection() as conn,
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            rows = cur.execute(
                query("rewrite_candidates"),
                {
                    "project": project,
                    "repo": repo,
                    "hashes": wanted,
                    "exclude": [c.value for c in exclude],
                    "file": file,
                    "max_anchors": MAX_CANDIDATES,
                },
            ).fetchall()
        return [
            Candidate(
                Sha256Hash(node),
                CommitSha(sha),
                file_,
                start,
                end,
                tuple(hashes_ or ()),
                added_from,
                patch_id,
                author_date,
            )
            for node, sha, file_, start, end, hashes_, added_from, patch_id, author_date in rows
        ]

    def candidates_among(
        self,
        known: Sequence[Candidate],
        hashes: Iterable[int],
        exclude: Iterable[CommitSha],
        file: str = "",
    ) -> list[Candidate]:
        """What ``rewrite_candidates`` answers, from ``known``: its answer for a superset of
        ``hashes``, no commit excluded, in the same order, and complete (fewer rows than
        MAX_CANDIDATES; the caller checks). No statement runs."""
        wanted = set(hashes)
        left_out = set(exclude)
        kept = [
            c for c in known if c.commit not in left_out and not wanted.isdisjoint(c.line_hashes)
        ]
        # Ordered as the statement orders them: those in ``file`` first, then as they came.
        return sorted(kept, key=lambda c: c.file != file)

    def record_aliases(self, project: ProjectId, repo: RepoId, aliases: Sequence[Alias]) -> None:
        """Store aliases (known ones are left as they are: the insert is idempotent)."""
        if not aliases:
            return
        with self._connector.connection() as conn:
            conn.execute(
                query("insert_aliases"),
                {
                    "project": project,
                    "repo": repo,
                    "new": [a.new.value for a in aliases],
                    "old": [a.old.value for a in aliases],
                    "how": [a.how for a in aliases],
                },
            )

    def evidence_of(
        self, project: ProjectId, repo: RepoId, anchors: Iterable[Candidate]
    ) -> list[Evidence]:
        """The evidence (commit, node, nodes above) of the given anchors."""
        chosen: list[dict[str, Any]] = [
            {
                "node_sha256": c.node.value,
                "repo": repo.value,
                "commit_sha": c.commit.value,
                "file": c.file,
                "line_start": c.line_start,
                "line_end": c.line_end,
            }
            for c in dict.fromkeys(anchors)
        ]
        return self._evidence_of(project, chosen)
