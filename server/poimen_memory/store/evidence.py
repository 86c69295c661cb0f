"""Reads through git: anchors chosen by line, by runs of original lines, by commit, by author
or by node, each with its commit, its L0 node and the nodes above it; stored commits by prefix.

An ``anchors_*`` query chooses the anchors, and the ``evidence`` query takes them back as one
array per column: two statements on one connection, and no query ever inside another.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from psycopg.rows import tuple_row

from poimen_memory.domain import (
    Anchor,
    CommitInfo,
    CommitSha,
    MemoryNode,
    ProjectId,
    RepoId,
    Sha256Hash,
    parse_timestamp,
)
from poimen_memory.store.connector import Connection, Connector
from poimen_memory.store.queries import query
from poimen_memory.store.reads import node_from_row

__all__ = ["MAX_ANCHORS", "Evidence", "EvidenceReads", "Run"]

# Bound on anchors one lookup returns, so one request cannot pull a whole project.
MAX_ANCHORS = 10_000

Run = tuple[CommitSha, str, int, int]
"""A run of original lines: ``(commit, file, first line, last line)``."""

BlameRun = tuple[CommitSha, str, int, int, int]
"""Blamed lines: ``(commit, original file, first original line, first current line, length)``,
consecutive current lines from as many consecutive lines of that file at that commit."""

LensBlock = tuple[
    int,
    int,
    list[int],
    list[str] | None,
    list[str] | None,
    list[str] | None,
    list[int] | None,
    list[int] | None,
]
"""Consecutive current lines with the same memories: ``(first line, last line, memory ids in
order, then nodes, commits, files, line_starts, line_ends)``; those five only in the first
block, each the list of every memory by id (id 1 first), the rest None."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """An anchor with its commit, its L0 node and the nodes above it (nearest first)."""

    anchor: Anchor
    commit: CommitInfo
    node: MemoryNode
    ancestors: tuple[tuple[MemoryNode, int], ...]


class EvidenceReads:
    """The store's reads through git, on its connector."""

    _connector: Connector

    def _evidence(
        self, selector: str, params: dict[str, Any], limit: int = MAX_ANCHORS
    ) -> list[Evidence]:
        """The evidence of the anchors the named ``anchors_*`` query chooses."""
        project: ProjectId = params["project"]
        with self._connector.connection() as conn:
            chosen = conn.execute(query(selector), {**params, "max_anchors": limit}).fetchall()
            return self._evidence_of(project, chosen, conn)

    def _evidence_of(
        self, project: ProjectId, chosen: list[dict[str, Any]], conn: Connection | None = None
    ) -> list[Evidence]:
        """The evidence of chosen anchors (rows named as the ``anchors_*`` queries name them)."""
        if not chosen:
            return []
        # One array per column, named as the selector named the column: what evidence unnests.
        columns = {name: [row[name] for row in chosen] for name in chosen[0]}
        if conn is None:
            with self._connector.connection() as own:
                rows = own.execute(query("evidence"), {**columns, "project": project}).fetchall()
        else:
            rows = conn.execute(query("evidence"), {**columns, "project": project}).fetchall()
        seen: dict[str, MemoryNode] = {}
        return [_evidence_from_row(project, row, seen) for row in rows]

    def evidence_at_line(
        self, project: ProjectId, repo: RepoId, commit: CommitSha, file: str, line: int
    ) -> list[Evidence]:
        """Anchors at ``(repo, commit, file)`` covering ``line`` (in that commit's file)."""
        return self._evidence(
            "anchors_line",
            {"project": project, "repo": repo, "commit_sha": commit, "file": file, "line": line},
        )

    def evidence_for_runs(
        self, project: ProjectId, repo: RepoId, runs: Iterable[Run]
    ) -> list[Evidence]:
        """Anchors overlapping runs ``(commit, file, first line, last line)`` of original lines,
        plus whole-file anchors of those files; exact lines are the caller's to match."""
        params = _runs_params(project, repo, runs)
        return [] if params is None else self._evidence("anchors_runs", params)

    def anchors_for_runs(
        self, project: ProjectId, repo: RepoId, runs: Iterable[Run]
    ) -> tuple[list[tuple[str, str, str, int, int]], dict[str, CommitInfo]]:
        """Like evidence_for_runs, but only anchors and commits (no node text): cheap enough
        for the code lenses of a whole file. Anchors come as plain tuples
        ``(node sha, commit sha, file, line_start, line_end)``, commits once each."""
        params = _runs_params(project, repo, runs)
        if params is None:
            return [], {}
        with self._connector.connection() as conn, conn.transaction():
            conn.execute(query("allow_slow_statements"))
            with conn.cursor(row_factory=tuple_row) as cur:
                chosen = cur.execute(
                    query("anchors_runs"), {**params, "max_anchors": MAX_ANCHORS * 100}
                ).fetchall()
            if not chosen:
                return [], {}
            anchors = [(node, sha, file, start, end) for node, _, sha, file, start, end in chosen]
            shas = list(dict.fromkeys(sha for _, sha, _, _, _ in anchors))
            found = conn.execute(
                query("commits_by_sha"), {"project": project, "repo": repo, "commits": shas}
            ).fetchall()
        by_sha = {r["commit_sha"]: _commit_info(repo, r) for r in found}
        return anchors, {sha: by_sha[sha] for sha in shas}

    def lens_blocks(
        self, project: ProjectId, repo: RepoId, runs: Iterable[BlameRun]
    ) -> tuple[list[LensBlock], dict[str, CommitInfo]]:
        """The code lenses of a blamed file, worked out by the query (``lens_blocks``): one
        row per block of consecutive current lines with the same memories, by id (every
        memory in full in the first); and the memories' commits, once each. No node text."""
        unique = list(dict.fromkeys(runs))
        if not unique:
            return [], {}
        commits, files, orig_starts, starts, lengths = (
            list(part) for part in zip(*unique, strict=True)
        )
        params = {
            "project": project,
            "repo": repo,
            "commits": commits,
            "files": files,
            "orig_starts": orig_starts,
            "starts": starts,
            "lengths": lengths,
        }
        with self._connector.connection() as conn, conn.transaction():
            conn.execute(query("allow_slow_statements"))
            with conn.cursor(row_factory=tuple_row) as cur:
                blocks: list[LensBlock] = cur.execute(query("lens_blocks"), params).fetchall()
            if not blocks:
                return [], {}
            shas = list(dict.fromkeys(blocks[0][4] or ()))
            found = conn.execute(
                query("commits_by_sha"), {"project": project, "repo": repo, "commits": shas}
            ).fetchall()
        by_sha = {r["commit_sha"]: _commit_info(repo, r) for r in found}
        return blocks, {sha: by_sha[sha] for sha in shas}

    def evidence_for_commits(
        self,
        project: ProjectId,
        repo: RepoId | None,
        commits: Iterable[CommitSha],
        limit: int = MAX_ANCHORS,
    ) -> list[Evidence]:
        """Every anchor at any of ``commits`` (in ``repo``, or in any repository)."""
        return self._evidence(
            "anchors_commits",
            {"project": project, "repo": repo, "commits": list(commits)},
            limit,
        )

    def evidence_for_author(
        self,
        project: ProjectId,
        repo: RepoId | None,
        authors: Iterable[str],
        limit: int = MAX_ANCHORS,
    ) -> list[Evidence]:
        """Anchors at commits whose author email or name is one of ``authors`` (any case)."""
        return self._evidence(
            "anchors_author",
            {"project": project, "repo": repo, "authors": sorted({a.lower() for a in authors})},
            limit,
        )

    def evidence_for_nodes(
        self, project: ProjectId, repo: RepoId | None, shas: Iterable[Sha256Hash]
    ) -> list[Evidence]:
        """The anchors of the given L0 nodes (in ``repo``, or in any repository)."""
        return self._evidence(
            "anchors_nodes", {"project": project, "repo": repo, "shas": list(shas)}
        )

    def commits_by_prefix(
        self, project: ProjectId, repo: RepoId | None, prefix: str
    ) -> list[CommitSha]:
        """Stored commits starting with ``prefix`` (at most two: enough to tell ambiguity)."""
        rows = self._connector.fetch_all(
            "commits_by_prefix", {"project": project, "repo": repo, "prefix": prefix}
        )
        return [CommitSha(r["commit_sha"]) for r in rows]


def _runs_params(project: ProjectId, repo: RepoId, runs: Iterable[Run]) -> dict[str, Any] | None:
    """The ``anchors_runs`` parameters: one array per part of the runs (None without runs)."""
    unique = list(dict.fromkeys(runs))
    if not unique:
        return None
    commits, files, starts, ends = (list(part) for part in zip(*unique, strict=True))
    return {
        "project": project,
        "repo": repo,
        "commits": commits,
        "files": files,
        "starts": starts,
        "ends": ends,
    }


def _commit_info(repo: RepoId, row: dict[str, Any]) -> CommitInfo:
    """A row of ``commits_by_sha``."""
    return CommitInfo(
        repo,
        CommitSha(row["commit_sha"]),
        row["message"],
        row["author_name"],
        row["author_email"],
        row["author_date"],
    )


def _evidence_from_row(
    project: ProjectId, row: dict[str, Any], seen: dict[str, MemoryNode]
) -> Evidence:
    """One row of the evidence query; ``seen`` shares the nodes met in earlier rows."""
    repo = RepoId(row["repo"])
    commit = CommitSha(row["commit_sha"])
    node = seen.get(row["sha256"])
    if node is None:
        node = seen[row["sha256"]] = node_from_row({**row, "parents": ()})
    ancestors = []
    for a in row["ancestors"]:
        ancestor = seen.get(a["sha256"])
        if ancestor is None:
            ancestor = seen[a["sha256"]] = node_from_row(
                {
                    **a,
                    "project": row["project"],
                    "parents": (),
                    "created_at": parse_timestamp("created_at", a["created_at"]),
                }
            )
        ancestors.append((ancestor, int(a["depth"])))
    return Evidence(
        anchor=Anchor(
            project, node.sha256, repo, commit, row["file"], row["line_start"], row["line_end"]
        ),
        commit=CommitInfo(
            repo=repo,
            sha=commit,
            message=row["message"],
            author_name=row["author_name"],
            author_email=row["author_email"],
            author_date=row["author_date"],
        ),
        node=node,
        ancestors=tuple(ancestors),
    )
