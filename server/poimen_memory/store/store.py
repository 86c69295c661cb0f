"""The store API over Postgres: idempotent batched writes, reads by identity, edge walks.

Every write is one transaction per batch with ``ON CONFLICT DO NOTHING``: re-inserting a batch
changes no row, and a failure leaves nothing of the batch behind. Large batches go through
``COPY`` into temporary staging tables and one ``INSERT ... SELECT`` per table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import ConnectionPool

from poimen_memory.domain import (
    Anchor,
    CommitInfo,
    CommitSha,
    ContentError,
    Edge,
    Level,
    MemoryNode,
    ProjectId,
    RepoId,
    Sha256Hash,
    parse_timestamp,
)
from poimen_memory.store.connection import (
    CONNECT_TIMEOUT_S,
    StoreUnavailable,
    connect,
    describe_target,
)
from poimen_memory.store.queries import query

__all__ = ["Batch", "Evidence", "InsertCounts", "Store", "StoreStatus", "WalkedNode"]

# Bound on anchors one lookup returns, so one request cannot pull a whole project.
MAX_ANCHORS = 10_000

# Above this many rows a batch is loaded with COPY (temp-table setup costs ~ms, COPY wins soon).
COPY_THRESHOLD = 500


@dataclass(frozen=True, slots=True)
class Batch:
    """What one ingest transaction writes. ``nodes``' own ``parents`` become edges too."""

    nodes: Sequence[MemoryNode] = ()
    edges: Sequence[Edge] = ()
    commits: Sequence[CommitInfo] = ()
    anchors: Sequence[Anchor] = ()

    def all_edges(self) -> list[Edge]:
        """Explicit edges plus those implied by each node's ``parents``, without duplicates."""
        seen: dict[tuple[str, str, str], Edge] = {}
        for edge in self.edges:
            seen.setdefault((edge.project.value, edge.child.value, edge.parent.value), edge)
        for node in self.nodes:
            for parent in node.parents:
                edge = Edge(node.project, node.sha256, parent)
                seen.setdefault((edge.project.value, edge.child.value, edge.parent.value), edge)
        return list(seen.values())

    @property
    def size(self) -> int:
        """Rows the batch may write."""
        return len(self.nodes) + len(self.all_edges()) + len(self.commits) + len(self.anchors)


@dataclass(frozen=True, slots=True)
class InsertCounts:
    """Rows a batch actually added (0 everywhere when it was already stored)."""

    nodes: int = 0
    edges: int = 0
    commits: int = 0
    anchors: int = 0


@dataclass(frozen=True, slots=True)
class WalkedNode:
    """A node above the starting ones: the depth it was first reached at and from which ones."""

    node: MemoryNode
    depth: int
    origins: tuple[Sha256Hash, ...]


@dataclass(frozen=True, slots=True)
class Evidence:
    """An anchor with its commit, its L0 node and the nodes above it (nearest first)."""

    anchor: Anchor
    commit: CommitInfo
    node: MemoryNode
    ancestors: tuple[tuple[MemoryNode, int], ...]


@dataclass(frozen=True, slots=True)
class StoreStatus:
    """What ``mem db status`` reports."""

    schema_version: int
    latest_version: int
    nodes_by_level: dict[str, int] = field(default_factory=dict)
    edges: int = 0
    anchors: int = 0
    commits: int = 0
    projects: int = 0


def _node_params(node: MemoryNode) -> dict[str, Any]:
    return {
        "project": node.project.value,
        "sha256": node.sha256.value,
        "level": node.level.value,
        "query_id": None if node.query_id is None else node.query_id.value,
        "run_id": node.run_id.value,
        "t": node.t,
        "text": node.text,
        "created_at": node.created_at,
    }


def _commit_params(project: ProjectId, commit: CommitInfo) -> dict[str, Any]:
    return {
        "project": project.value,
        "repo": commit.repo.value,
        "commit_sha": commit.sha.value,
        "message": commit.message,
        "author_name": commit.author_name,
        "author_email": commit.author_email,
        "author_date": commit.author_date,
    }


def _anchor_params(anchor: Anchor) -> dict[str, Any]:
    return {
        "project": anchor.project.value,
        "node": anchor.node.value,
        "repo": anchor.repo.value,
        "commit_sha": anchor.commit.value,
        "file": anchor.file,
        "line_start": anchor.line_start,
        "line_end": anchor.line_end,
    }


def node_from_row(row: dict[str, Any]) -> MemoryNode:
    """A stored row back into a node; a row whose content no longer matches its sha is refused."""
    return MemoryNode.from_store(
        row["level"],
        row["project"],
        row["query_id"],
        row["run_id"],
        row["t"],
        row["text"],
        row["created_at"],
        row["sha256"],
        tuple(row["parents"]),
    )


class Store:
    """A connection pool over one Postgres database holding the poimen-memory schema."""

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int = 4,
        timeout: float = CONNECT_TIMEOUT_S,
        statement_timeout_ms: int | None = None,
        lazy: bool = False,
        retry_interval: float = 1.0,
    ) -> None:
        """Connect (failing within ``timeout`` seconds with StoreUnavailable, unless ``lazy``).

        A lost server is not fatal: the pool is dropped, and the next use at least
        ``retry_interval`` seconds later connects afresh, so the store comes back by itself.
        A statement timeout bounds every query, for callers that must answer quickly.
        """
        self.dsn = dsn
        self.timeout = timeout
        self.max_size = max_size
        self.retry_interval = retry_interval
        self._kwargs: dict[str, Any] = {
            "connect_timeout": max(2, int(timeout)),
            "row_factory": dict_row,
        }
        if statement_timeout_ms is not None:
            self._kwargs["options"] = f"-c statement_timeout={int(statement_timeout_ms)}"
        self._pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] | None = None
        self._pool_lock = threading.Lock()
        self._last_attempt = float("-inf")
        self._last_error = f"memory store unreachable at {describe_target(dsn)}"
        self._closed = False
        if not lazy:
            with self._pool_lock:
                self._open()

    def _open(self) -> None:
        self._last_attempt = time.monotonic()
        try:
            # Fail fast and clearly when nothing answers, before a pool retries in the background.
            connect(self.dsn, timeout=int(self._kwargs["connect_timeout"])).close()
            pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
                self.dsn,
                min_size=1,
                max_size=self.max_size,
                timeout=self.timeout,
                kwargs=self._kwargs,
                check=ConnectionPool.check_connection,
                open=False,
                name="poimen-memory",
            )
            try:
                pool.open(wait=True, timeout=max(self.timeout, 1.0))
            except psycopg.OperationalError as exc:
                pool.close()
                raise StoreUnavailable(f"Postgres at {describe_target(self.dsn)}: {exc}") from None
        except StoreUnavailable as exc:
            self._last_error = str(exc)
            raise
        self._pool = pool

    def warm_up(self) -> bool:
        """Open the pool now (a server does this at start, off the request path); False if
        the store does not answer."""
        try:
            with self._conn() as conn:
                conn.execute("SELECT 1")
            return True
        except StoreUnavailable:
            return False

    def close(self) -> None:
        """Close every pooled connection."""
        with self._pool_lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drop(self, pool: ConnectionPool[psycopg.Connection[dict[str, Any]]]) -> None:
        with self._pool_lock:
            if self._pool is pool:
                self._pool = None
        # Closing waits for the pool's workers; do it off the request's path.
        threading.Thread(target=pool.close, kwargs={"timeout": 1.0}, daemon=True).start()

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A pooled connection; a lost or unreachable server surfaces as StoreUnavailable."""
        with self._pool_lock:
            if self._closed:
                raise StoreUnavailable("the store was closed")
            if self._pool is None:
                if time.monotonic() - self._last_attempt < self.retry_interval:
                    raise StoreUnavailable(self._last_error)
                self._open()
            pool = self._pool
            assert pool is not None
        try:
            with pool.connection(timeout=self.timeout) as conn:
                yield conn
        except psycopg.errors.QueryCanceled:
            raise StoreUnavailable(
                f"memory store at {describe_target(self.dsn)} did not answer in time"
            ) from None
        except psycopg.OperationalError as exc:
            self._drop(pool)
            reason = " ".join(str(exc).split()) or type(exc).__name__
            self._last_error = f"memory store unreachable at {describe_target(self.dsn)}: {reason}"
            raise StoreUnavailable(self._last_error) from None

    # -- writes ---------------------------------------------------------------------------

    def insert_batch(
        self,
        batch: Batch,
        *,
        use_copy: bool | None = None,
        notify: tuple[str, str] | None = None,
    ) -> InsertCounts:
        """Write a batch in one transaction; idempotent. ``use_copy`` forces a path (tests).

        ``notify`` is a ``(channel, payload)`` sent with ``pg_notify`` in the same
        transaction, so listeners hear of the batch exactly when it becomes visible.
        """
        edges = batch.all_edges()
        projects = (
            {n.project for n in batch.nodes}
            | {e.project for e in edges}
            | {a.project for a in batch.anchors}
        )
        if batch.commits and len(projects) != 1:
            raise ContentError(
                "batch: commits are stored per project, so a batch with commits must hold "
                f"exactly one project, got {sorted(p.value for p in projects)}"
            )
        commit_project = next(iter(projects)) if projects else None
        copy = batch.size >= COPY_THRESHOLD if use_copy is None else use_copy
        with self._conn() as conn, conn.transaction():
            if copy:
                counts = self._write_by_copy(conn, batch, edges, commit_project)
            else:
                counts = self._write_by_rows(conn, batch, edges, commit_project)
            self._check_edge_levels(conn, edges)
            if notify is not None:
                conn.execute("SELECT pg_notify(%s, %s)", notify)
        return counts

    def _write_by_rows(
        self,
        conn: psycopg.Connection[Any],
        batch: Batch,
        edges: list[Edge],
        project: ProjectId | None,
    ) -> InsertCounts:
        def run(name: str, params: list[dict[str, Any]]) -> int:
            if not params:
                return 0
            with conn.cursor() as cur:
                cur.executemany(query(name), params)
                return max(cur.rowcount, 0)

        return InsertCounts(
            nodes=run("insert_node", [_node_params(n) for n in batch.nodes]),
            commits=run(
                "insert_commit",
                [_commit_params(project, c) for c in batch.commits] if project else [],
            ),
            edges=run(
                "insert_edge",
                [
                    {"project": e.project.value, "child": e.child.value, "parent": e.parent.value}
                    for e in edges
                ],
            ),
            anchors=run("insert_anchor", [_anchor_params(a) for a in batch.anchors]),
        )

    def _write_by_copy(
        self,
        conn: psycopg.Connection[Any],
        batch: Batch,
        edges: list[Edge],
        project: ProjectId | None,
    ) -> InsertCounts:
        conn.execute(query("create_staging"))
        with conn.cursor() as cur:
            with cur.copy(query("copy_node")) as copy:
                for n in batch.nodes:
                    p = _node_params(n)
                    copy.write_row(
                        (
                            p["project"],
                            p["sha256"],
                            p["level"],
                            p["query_id"],
                            p["run_id"],
                            p["t"],
                            p["text"],
                            p["created_at"],
                        )
                    )
            with cur.copy(query("copy_commit")) as copy:
                for c in batch.commits if project else ():
                    assert project is not None
                    p = _commit_params(project, c)
                    copy.write_row(
                        (
                            p["project"],
                            p["repo"],
                            p["commit_sha"],
                            p["message"],
                            p["author_name"],
                            p["author_email"],
                            p["author_date"],
                        )
                    )
            with cur.copy(query("copy_edge")) as copy:
                for e in edges:
                    copy.write_row((e.project.value, e.child.value, e.parent.value))
            with cur.copy(query("copy_anchor")) as copy:
                for a in batch.anchors:
                    copy.write_row(
                        (
                            a.project.value,
                            a.node.value,
                            a.repo.value,
                            a.commit.value,
                            a.file,
                            a.line_start,
                            a.line_end,
                        )
                    )
            counts = {}
            for table in ("node", "commit", "edge", "anchor"):
                cur.execute(query(f"merge_{table}"))
                counts[table] = max(cur.rowcount, 0)
        return InsertCounts(
            nodes=counts["node"],
            commits=counts["commit"],
            edges=counts["edge"],
            anchors=counts["anchor"],
        )

    def _check_edge_levels(self, conn: psycopg.Connection[Any], edges: list[Edge]) -> None:
        by_project: dict[ProjectId, list[Edge]] = {}
        for edge in edges:
            by_project.setdefault(edge.project, []).append(edge)
        for project, group in by_project.items():
            row = conn.execute(
                query("edges_against_levels"),
                {
                    "project": project.value,
                    "children": [e.child.value for e in group],
                    "parents": [e.parent.value for e in group],
                },
            ).fetchone()
            if row is not None:
                raise ContentError(
                    f"edge: {row['child']} ({row['child_level']}) -> {row['parent']} "
                    f"({row['parent_level']}) does not point up; edges go L0 -> L1 -> L2"
                )

    # -- reads ----------------------------------------------------------------------------

    def get_nodes(self, project: ProjectId, shas: Iterable[Sha256Hash]) -> list[MemoryNode]:
        """The stored nodes among ``shas`` (missing ones are simply absent), in input order."""
        wanted = [s.value for s in shas]
        if not wanted:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                query("nodes_by_sha"), {"project": project.value, "shas": wanted}
            ).fetchall()
        by_sha = {row["sha256"]: node_from_row(row) for row in rows}
        return [by_sha[s] for s in dict.fromkeys(wanted) if s in by_sha]

    def node_levels(
        self, project: ProjectId, shas: Iterable[Sha256Hash]
    ) -> dict[Sha256Hash, Level]:
        """The level of each stored node among ``shas`` (missing ones absent)."""
        wanted = [s.value for s in shas]
        if not wanted:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                query("node_levels"), {"project": project.value, "shas": wanted}
            ).fetchall()
        return {Sha256Hash(r["sha256"]): Level.parse(r["level"]) for r in rows}

    def walk_up(self, project: ProjectId, shas: Iterable[Sha256Hash]) -> list[WalkedNode]:
        """Every node above ``shas`` along edges, each once, nearest first."""
        start = [s.value for s in shas]
        if not start:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                query("walk_up"), {"project": project.value, "shas": start}
            ).fetchall()
        return [
            WalkedNode(
                node=node_from_row(row),
                depth=row["depth"],
                origins=tuple(Sha256Hash(o) for o in row["origins"]),
            )
            for row in rows
        ]

    # -- lookups ----------------------------------------------------------------------------

    def _evidence(
        self, chosen: str, params: dict[str, Any], limit: int = MAX_ANCHORS
    ) -> list[Evidence]:
        statement = sql.SQL(query("evidence")).format(chosen=sql.SQL(query(chosen)))
        with self._conn() as conn:
            rows = conn.execute(statement, {**params, "max_anchors": limit}).fetchall()
        seen: dict[str, MemoryNode] = {}
        return [_evidence_from_row(row, seen) for row in rows]

    def evidence_at_line(
        self, project: ProjectId, repo: RepoId, commit: CommitSha, file: str, line: int
    ) -> list[Evidence]:
        """Anchors at ``(repo, commit, file)`` covering ``line`` (in that commit's file)."""
        return self._evidence(
            "anchors_line",
            {
                "project": project.value,
                "repo": repo.value,
                "commit_sha": commit.value,
                "file": file,
                "line": line,
            },
        )

    def evidence_for_runs(
        self, project: ProjectId, repo: RepoId, runs: Iterable[tuple[CommitSha, str, int, int]]
    ) -> list[Evidence]:
        """Anchors overlapping runs ``(commit, file, first line, last line)`` of original lines,
        plus whole-file anchors of those files; exact lines are the caller's to match."""
        unique = list(dict.fromkeys(runs))
        if not unique:
            return []
        return self._evidence(
            "anchors_runs",
            {
                "project": project.value,
                "repo": repo.value,
                "commits": [c.value for c, _, _, _ in unique],
                "files": [f for _, f, _, _ in unique],
                "starts": [s for _, _, s, _ in unique],
                "ends": [e for _, _, _, e in unique],
            },
        )

    def anchors_for_runs(
        self, project: ProjectId, repo: RepoId, runs: Iterable[tuple[CommitSha, str, int, int]]
    ) -> tuple[list[tuple[str, str, str, int, int]], dict[str, CommitInfo]]:
        """Like evidence_for_runs, but only anchors and commits (no node text): cheap enough
        for the code lenses of a whole file. Anchors come as plain tuples
        ``(node sha, commit sha, file, line_start, line_end)``, commits once each."""
        unique = list(dict.fromkeys(runs))
        if not unique:
            return [], {}
        statement = sql.SQL(query("anchor_commits")).format(chosen=sql.SQL(query("anchors_runs")))
        params = {
            "project": project.value,
            "repo": repo.value,
            "commits": [c.value for c, _, _, _ in unique],
            "files": [f for _, f, _, _ in unique],
            "starts": [s for _, _, s, _ in unique],
            "ends": [e for _, _, _, e in unique],
            "max_anchors": MAX_ANCHORS * 100,
        }
        with self._conn() as conn, conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            # A whole file's anchors may legitimately take longer than the quick-answer bound.
            cur.execute("SET LOCAL statement_timeout = 30000")
            rows = cur.execute(statement, params).fetchall()
        commits: dict[str, CommitInfo] = {}
        anchors = []
        for node, _repo, sha, file, start, end, message, name, email, date in rows:
            if sha not in commits:
                commits[sha] = CommitInfo(repo, CommitSha(sha), message, name, email, date)
            anchors.append((node, sha, file, start, end))
        return anchors, commits

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
            {
                "project": project.value,
                "repo": None if repo is None else repo.value,
                "commits": [c.value for c in commits],
            },
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
            {
                "project": project.value,
                "repo": None if repo is None else repo.value,
                "authors": sorted({a.lower() for a in authors}),
            },
            limit,
        )

    def evidence_for_nodes(
        self, project: ProjectId, repo: RepoId | None, shas: Iterable[Sha256Hash]
    ) -> list[Evidence]:
        """The anchors of the given L0 nodes (in ``repo``, or in any repository)."""
        return self._evidence(
            "anchors_nodes",
            {
                "project": project.value,
                "repo": None if repo is None else repo.value,
                "shas": [s.value for s in shas],
            },
        )

    def commits_by_prefix(
        self, project: ProjectId, repo: RepoId | None, prefix: str
    ) -> list[CommitSha]:
        """Stored commits starting with ``prefix`` (at most two: enough to tell ambiguity)."""
        with self._conn() as conn:
            rows = conn.execute(
                query("commits_by_prefix"),
                {
                    "project": project.value,
                    "repo": None if repo is None else repo.value,
                    "prefix": prefix,
                },
            ).fetchall()
        return [CommitSha(r["commit_sha"]) for r in rows]

    def search(self, project: ProjectId, text: str, limit: int) -> list[tuple[MemoryNode, float]]:
        """Nodes whose text matches ``text`` (web-search syntax), best first, with their rank."""
        with self._conn() as conn:
            rows = conn.execute(
                query("search"), {"project": project.value, "query": text, "limit": limit}
            ).fetchall()
        return [(node_from_row(r), float(r["rank"])) for r in rows]

    def evidence_below(
        self, project: ProjectId, shas: Iterable[Sha256Hash]
    ) -> dict[Sha256Hash, list[Sha256Hash]]:
        """For each node, the L0 nodes at or below it."""
        wanted = [s.value for s in shas]
        if not wanted:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                query("evidence_below"), {"project": project.value, "shas": wanted}
            ).fetchall()
        out: dict[Sha256Hash, list[Sha256Hash]] = {}
        for r in rows:
            out.setdefault(Sha256Hash(r["top"]), []).append(Sha256Hash(r["sha256"]))
        return out

    def status(self) -> StoreStatus:
        """Schema version and row counts."""
        from poimen_memory.store.migrations import applied_versions, available

        latest = len(available())
        with self._conn() as conn:
            versions = applied_versions(conn)
            if not versions:
                return StoreStatus(schema_version=0, latest_version=latest)
            levels = {
                row["level"]: int(row["n"])
                for row in conn.execute(query("status_levels")).fetchall()
            }
            counts = conn.execute(query("status_counts")).fetchone()
        assert counts is not None
        return StoreStatus(
            schema_version=max(versions),
            latest_version=latest,
            nodes_by_level={lvl.value: levels.get(lvl.value, 0) for lvl in Level},
            edges=int(counts["edges"]),
            anchors=int(counts["anchors"]),
            commits=int(counts["commits"]),
            projects=int(counts["projects"]),
        )


def _evidence_from_row(row: dict[str, Any], seen: dict[str, MemoryNode]) -> Evidence:
    project = ProjectId(row["project"])
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
