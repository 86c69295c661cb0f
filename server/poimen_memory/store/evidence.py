"""Reads through git: anchors chosen by line, by runs of original lines, by commit, by author
(a page at a time), by node, or by file and line as stored, each with its commit, its L0 node
and the nodes above it; stored commits by prefix; which repositories a project has.

An ``anchors_*`` query chooses the anchors, and the ``evidence`` query, with that one in it,
reads their commits and nodes: one statement, one round trip per lookup.
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
)
from poimen_memory.domain.ids import trusted
from poimen_memory.store.connector import Connection, Connector
from poimen_memory.store.queries import evidence_query, query
from poimen_memory.store.reads import readable_node

__all__ = [
    "MAX_ANCHORS",
    "Evidence",
    "EvidencePage",
    "EvidenceReads",
    "FileProbe",
    "Run",
    "warm_connection",
]

# Bound on anchors one lookup returns, so one request cannot pull a whole project.
MAX_ANCHORS = 10_000

# Bound on the anchors without usable texts one probe of a file reads (more: the file is
# looked up by blame, as when the store cannot tell).
UNTEXTED_LIMIT = 256

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
class FileProbe:
    """What the store says of a file before any blame: ``may``, a memory can be found on it
    (an anchor at its path, pending there, or one holding a line text of it); ``untexted``,
    the paths where the lines of the anchors whose texts cannot be told (a whole-file anchor,
    lines too short to hash) were when recorded, None when there are too many to list."""

    may: bool
    untexted: frozenset[str] | None


@dataclass(frozen=True, slots=True)
class Evidence:
    """An anchor with its commit, its L0 node and the nodes above it (nearest first, each
    with ``parents``: the nodes directly above it)."""

    anchor: Anchor
    commit: CommitInfo
    node: MemoryNode
    ancestors: tuple[tuple[MemoryNode, int], ...]


# The columns an anchors_* query chooses anchors by (what the evidence query takes back).
_ANCHOR_COLUMNS = ("node_sha256", "repo", "commit_sha", "file", "line_start", "line_end")

# The keyset of a page, as the anchors_* queries that page take it (``after_*``).
_AFTER = ("after_repo", "after_commit", "after_file", "after_start", "after_end", "after_node")


@dataclass(frozen=True, slots=True)
class EvidencePage:
    """A page of evidence: the rows, and (when more anchors follow) the key of the last
    anchor, to pass back as ``after`` for the next page."""

    rows: list[Evidence]
    after: dict[str, Any] | None
    nodes: int = 0
    """How many memories (nodes) the page's anchors hold, read in full or not."""


class EvidenceReads:
    """The store's reads through git, on its connector."""

    _connector: Connector

    def _evidence(
        self, selector: str, params: dict[str, Any], limit: int = MAX_ANCHORS
    ) -> list[Evidence]:
        """The evidence of the anchors the named ``anchors_*`` query chooses."""
        return self._page(selector, params, limit).rows

    def _page(
        self, selector: str, params: dict[str, Any], limit: int, read: int | None = None
    ) -> EvidencePage:
        """The evidence of the first ``limit`` anchors the named ``anchors_*`` query chooses,
        and the key of the last one when there are more: one statement (``evidence``).
        ``read``: only the first that many anchors' evidence is read (the rest counted)."""
        project: ProjectId = params["project"]
        statement = evidence_query(selector)
        values = {**params, "max_anchors": limit + 1, "page": limit if read is None else read}
        rows = self._connector.read(
            lambda conn: conn.execute(statement, values, binary=True).fetchall()
        )
        anchors = [row for row in rows if row["kind"] == 0]
        commits = {
            (row["repo"], row["commit_sha"]): _commit_info(RepoId(row["repo"]), row)
            for row in rows
            if row["kind"] == 2
        }
        after = None
        if len(anchors) > limit:
            last = next((row for row in anchors if row["k"] == limit), None)
            if last is not None:
                after = _key_of(last)
                if selector == "anchors_author":  # pages by date: its commit's
                    after["after_date"] = commits[last["repo"], last["commit_sha"]].author_date
        anchors = [row for row in anchors if row["k"] <= limit]
        l0s = {
            row["sha256"]: readable_node({**row, "parents": ()}) for row in rows if row["kind"] == 3
        }
        ancestors = _ancestors(rows)
        found = []
        for row in anchors:
            if row["k"] > values["page"]:  # counted, not read
                continue
            node = l0s.get(row["node_sha256"])
            commit = commits.get((row["repo"], row["commit_sha"]))
            if node is None or commit is None:  # not stored, or not readable back
                continue
            anchor = Anchor(
                project,
                node.sha256,
                commit.repo,
                commit.sha,
                row["file"],
                row["line_start"],
                row["line_end"],
            )
            found.append(
                (row, Evidence(anchor, commit, node, ancestors.get(node.sha256.value, ())))
            )
        # Newest memory first, then by place and the selector's order.
        found.sort(key=lambda pair: (pair[0]["file"], pair[0]["line_start"], pair[0]["k"]))
        found.sort(key=lambda pair: pair[1].node.sha256.value)
        found.sort(key=lambda pair: pair[1].node.created_at, reverse=True)
        nodes = len({row["node_sha256"] for row in anchors})
        return EvidencePage([evidence for _, evidence in found], after, nodes)

    def _evidence_of(self, project: ProjectId, chosen: list[dict[str, Any]]) -> list[Evidence]:
        """The evidence of chosen anchors (rows named as the ``anchors_*`` queries name them)."""
        if not chosen:
            return []
        # One array per column, named as the selector named the column: what it unnests.
        columns = {name: [row[name] for row in chosen] for name in _ANCHOR_COLUMNS}
        return self._page("anchors_given", {**columns, "project": project}, len(chosen)).rows

    def evidence_at_line(
        self, project: ProjectId, repo: RepoId, commit: CommitSha, file: str, line: int
    ) -> list[Evidence]:
        """Anchors at ``(repo, commit, file)`` covering ``line`` (in that commit's file)."""
        return self.newest_at_line(project, repo, commit, file, line).rows

    def newest_at_line(
        self,
        project: ProjectId,
        repo: RepoId,
        commit: CommitSha,
        file: str,
        line: int,
        read: int | None = None,
    ) -> EvidencePage:
        """``evidence_at_line``'s anchors, newest memory first; with ``read``, only the first
        that many anchors' evidence is read (node, commit, the nodes above), and ``nodes``
        counts the memories of all."""
        params = {"project": project, "repo": repo, "commit_sha": commit, "file": file}
        params |= {"line": line, "newest": read is not None}
        return self._page("anchors_line", params, MAX_ANCHORS, read)

    def evidence_for_runs(
        self, project: ProjectId, repo: RepoId, runs: Iterable[Run]
    ) -> list[Evidence]:
        """Anchors overlapping runs ``(commit, file, first line, last line)`` of original lines,
        plus whole-file anchors of those files; exact lines are the caller's to match."""
        return self.runs_page(project, repo, runs).rows

    def runs_page(
        self, project: ProjectId, repo: RepoId, runs: Iterable[Run], limit: int = MAX_ANCHORS
    ) -> EvidencePage:
        """evidence_for_runs, saying whether anchors beyond ``limit`` were left out (``after``
        is then set; these anchors are not paged)."""
        params = _runs_params(project, repo, runs)
        if params is None:
            return EvidencePage([], None)
        return self._page("anchors_runs", params, limit)

    def anchors_for_runs(
        self, project: ProjectId, repo: RepoId, runs: Iterable[Run]
    ) -> tuple[list[tuple[str, str, str, int, int]], dict[str, CommitInfo]]:
        """Like evidence_for_runs, but only anchors and commits (no node text): cheap enough
        for the code lenses of a whole file. Anchors come as plain tuples
        ``(node sha, commit sha, file, line_start, line_end)``, commits once each."""
        params = _runs_params(project, repo, runs)
        if params is None:
            return [], {}
        with self._connector.connection(read=True) as conn, conn.transaction():
            conn.execute(query("allow_slow_statements"))
            with conn.cursor(row_factory=tuple_row) as cur:
                chosen = cur.execute(
                    query("anchors_runs"), {**params, "max_anchors": MAX_ANCHORS * 100}
                ).fetchall()
        if not chosen:
            return [], {}
        anchors = [(node, sha, file, start, end) for node, _, sha, file, start, end in chosen]
        shas = list(dict.fromkeys(sha for _, sha, _, _, _ in anchors))
        by_sha = self.commits_by_sha(project, repo, shas)
        return anchors, {sha: by_sha[sha] for sha in shas}

    def lens_blocks(
        self, project: ProjectId, repo: RepoId, runs: Iterable[BlameRun]
    ) -> list[LensBlock]:
        """The code lenses of blamed lines, worked out by the query (``lens_blocks``): one
        row per block of consecutive current lines with the same memories, by id (every
        memory in full in the first). No node text, no commits (``commits_by_sha``). Runs
        may come a part at a time: each block holds lines of the runs it was given."""
        unique = list(dict.fromkeys(runs))
        if not unique:
            return []
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
        with self._connector.connection(read=True) as conn, conn.transaction():
            conn.execute(query("allow_slow_statements"))
            with conn.cursor(row_factory=tuple_row, binary=True) as cur:
                blocks: list[LensBlock] = cur.execute(query("lens_blocks"), params).fetchall()
        return blocks

    def commits_by_sha(
        self, project: ProjectId, repo: RepoId, shas: Iterable[str]
    ) -> dict[str, CommitInfo]:
        """The stored commits among ``shas`` of ``repo`` (who and when: what lenses show)."""
        wanted = list(dict.fromkeys(shas))
        if not wanted:
            return {}
        params = {"project": project, "repo": repo, "commits": wanted}
        found = self._connector.fetch_all("commits_by_sha", params)
        return {r["commit_sha"]: _commit_info(repo, r) for r in found}

    def evidence_for_commits(
        self,
        project: ProjectId,
        repo: RepoId | None,
        commits: Iterable[CommitSha],
        limit: int = MAX_ANCHORS,
    ) -> list[Evidence]:
        """Every anchor at any of ``commits`` (in ``repo``, or in any repository)."""
        return self.commit_page(project, repo, commits, limit).rows

    def commit_page(
        self,
        project: ProjectId,
        repo: RepoId | None,
        commits: Iterable[CommitSha],
        limit: int = MAX_ANCHORS,
        after: dict[str, Any] | None = None,
    ) -> EvidencePage:
        """A page of the anchors at any of ``commits`` (in ``repo``, or in any repository),
        by (repo, commit, file, lines, node): the first ``limit`` after ``after`` (the key a
        previous page gave)."""
        params = {"project": project, "repo": repo, "commits": list(commits)}
        return self._page("anchors_commits", {**params, **_after(after)}, limit)

    def evidence_for_author(
        self,
        project: ProjectId,
        repo: RepoId | None,
        authors: Iterable[str],
        limit: int = MAX_ANCHORS,
    ) -> list[Evidence]:
        """Anchors at commits whose author email or name is one of ``authors`` (any case)."""
        return self.author_page(project, repo, authors, limit).rows

    def author_page(
        self,
        project: ProjectId,
        repo: RepoId | None,
        authors: Iterable[str],
        limit: int = MAX_ANCHORS,
        after: dict[str, Any] | None = None,
    ) -> EvidencePage:
        """A page of the anchors at commits whose author email or name is one of ``authors``
        (any case), newest commit first: the first ``limit`` after ``after`` (the key a
        previous page gave)."""
        params = {
            "project": project,
            "repo": repo,
            "authors": sorted({a.lower() for a in authors}),
            "after_date": None if after is None else after["after_date"],
        }
        return self._page("anchors_author", {**params, **_after(after)}, limit)

    def evidence_at_file_lines(
        self,
        project: ProjectId,
        repo: RepoId | None,
        file: str,
        first: int,
        last: int,
        limit: int = MAX_ANCHORS,
    ) -> EvidencePage:
        """Anchors of ``file`` as stored, covering lines ``first``..``last`` (0: the whole
        file) in any commit (of ``repo``, or of any repository), newest commit first."""
        params = {
            "project": project,
            "repo": repo,
            "file": file,
            "first": first,
            "last": last,
        }
        return self._page("anchors_file_lines", params, limit)

    def file_may_have_memories(
        self, project: ProjectId, repo: RepoId, file: str, hashes: Iterable[int] | None
    ) -> FileProbe:
        """Whether any memory of ``project`` could be found on a line of ``file`` whose line
        texts hash to ``hashes`` (``file_may_have_memories``; None: leave the texts out, a
        first look that needs no hashing), and where the anchors are whose texts cannot
        tell: false, with none of those, lets a lookup answer "none" without blaming it."""
        texts = None if hashes is None else sorted(set(hashes))
        params = {
            "project": project, "repo": repo, "file": file, "hashes": texts,
            "limit": UNTEXTED_LIMIT,
        }  # fmt: skip
        rows = self._connector.fetch_all("file_may_have_memories", params)
        if not rows:
            return FileProbe(may=True, untexted=None)
        files = rows[0]["untexted"] or []
        untexted = None if len(files) > UNTEXTED_LIMIT else frozenset(files)
        return FileProbe(may=bool(rows[0]["may"]), untexted=untexted)

    def repo_known(self, project: ProjectId, repo: RepoId) -> bool:
        """Whether ``project`` has memories anchored in ``repo``."""
        rows = self._connector.fetch_all("repo_known", {"project": project, "repo": repo})
        return bool(rows and rows[0]["known"])

    def project_repos(self, project: ProjectId, limit: int = 20) -> list[RepoId]:
        """Up to ``limit`` repositories ``project`` has memories in, by name."""
        rows = self._connector.fetch_all("project_repos", {"project": project, "limit": limit})
        return [RepoId(r["repo"]) for r in rows]

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


def warm_connection(conn: Connection) -> None:
    """Run the statements of hovers and code lenses once on a new connection, asking for
    what cannot exist (a project named ''), with the same types of parameters as a lookup:
    prepared, and the server's caches of the schema filled, before a request needs them."""
    nobody = trusted(ProjectId, "")
    where = {"project": nobody, "repo": RepoId("none.invalid/none"), "file": ""}
    commit = CommitSha("0" * 40)
    line = {**where, "commit_sha": commit, "line": 1, "max_anchors": 2, "page": 1, "newest": True}
    conn.execute(evidence_query("anchors_line"), line, prepare=True).fetchall()
    probe = {**where, "hashes": None, "limit": UNTEXTED_LIMIT}
    conn.execute(query("file_may_have_memories"), probe, prepare=True)
    conn.execute(query("pending_files"), where, prepare=True).fetchall()
    runs = {"commits": [commit], "files": [""], "orig_starts": [1], "starts": [1], "lengths": [1]}
    conn.execute(query("lens_blocks"), {**where, **runs}, prepare=True).fetchall()
    conn.execute(query("commits_by_sha"), {**where, "commits": [commit]}, prepare=True)
    shared = {**where, "path": "-", "fingerprint": "0" * 32, "blob_id": commit, "line": 1}
    conn.execute(query("blame_line"), {**shared, "touch_after_s": 60}, prepare=True).fetchall()


def _key_of(row: dict[str, Any]) -> dict[str, Any]:
    """The keyset of a chosen anchor."""
    return {
        "after_repo": row["repo"],
        "after_commit": row["commit_sha"],
        "after_file": row["file"],
        "after_start": row["line_start"],
        "after_end": row["line_end"],
        "after_node": row["node_sha256"],
    }


def _after(after: dict[str, Any] | None) -> dict[str, Any]:
    """The ``after_*`` parameters of a page query (all None: the first page)."""
    return {name: None if after is None else after[name] for name in _AFTER}


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


def _ancestors(rows: list[dict[str, Any]]) -> dict[str, tuple[tuple[MemoryNode, int], ...]]:
    """The nodes above each L0 node, as the evidence query sends them (rows of kind 1):
    nearest first, then newest, then by sha; a node that cannot be read back is left out
    (``readable_node``)."""
    by_origin: dict[str, list[tuple[MemoryNode, int]]] = {}
    for row in rows:
        if row["kind"] != 1:
            continue
        node = readable_node({**row, "parents": row["parents"] or ()})
        if node is None:
            continue
        for origin, depth in zip(row["origins"], row["depths"], strict=True):
            by_origin.setdefault(origin, []).append((node, depth))
    out = {}
    for origin, found in by_origin.items():
        found.sort(key=lambda pair: pair[0].sha256.value)
        found.sort(key=lambda pair: pair[0].created_at, reverse=True)
        found.sort(key=lambda pair: pair[1])
        out[origin] = tuple(found)
    return out
