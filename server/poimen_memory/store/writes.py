"""Idempotent batched writes: one transaction per batch, ``ON CONFLICT DO NOTHING``.

Re-inserting a batch changes no row, and a failure leaves nothing of the batch behind: what
the domain can check (the size of a node's text) is checked before the transaction opens. Large
batches go through a text ``COPY``: of nodes none of which is stored (one probe says), the
nodes, their edges and their anchors straight into their tables; otherwise, and for commits,
into temporary staging tables and one ``INSERT ... SELECT`` per table. Each table's columns
are named once, in its ``Table``: the rows and every statement that writes them are built
from that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from psycopg import Cursor, sql
from psycopg.errors import FeatureNotSupported, UniqueViolation

from poimen_memory.domain import (
    Anchor,
    CommitInfo,
    ContentError,
    Edge,
    MemoryNode,
    PendingAnchor,
    ProjectId,
    RepoId,
    Sha256Hash,
)
from poimen_memory.domain.nodes import check_text_size
from poimen_memory.store.connector import Connection, Connector
from poimen_memory.store.queries import query

__all__ = [
    "ANCHORS",
    "COMMITS",
    "EDGES",
    "NODES",
    "PENDING",
    "Batch",
    "BatchWrites",
    "InsertCounts",
    "Settled",
    "Table",
]

# Above this many rows a batch is loaded with COPY (temp-table setup costs ~ms, COPY wins soon).
COPY_THRESHOLD = 500


@dataclass(frozen=True, slots=True)
class Table:
    """A table a batch writes: each column with the attribute of the value it is read from
    (dotted for a nested one), in the order the statements list them."""

    name: str
    columns: tuple[tuple[str, str], ...]

    def rows(self, values: Iterable[object]) -> list[tuple[Any, ...]]:
        """One parameter tuple per value, in column order."""
        # Over two or more attributes (every table has several columns) attrgetter gives tuples.
        row = attrgetter(*(attribute for _, attribute in self.columns))
        return [row(value) for value in values]

    def statement(self, name: str) -> sql.Composed:
        """The named write query with this table's name, staging table, columns and
        placeholders composed in (as identifiers and placeholders, never as text)."""
        return sql.SQL(query(name)).format(
            table=sql.Identifier(self.name),
            stage=sql.Identifier(f"stage_{self.name}"),
            columns=sql.SQL(", ").join(sql.Identifier(column) for column, _ in self.columns),
            values=sql.SQL(", ").join(sql.Placeholder() * len(self.columns)),
        )


@dataclass(frozen=True, slots=True)
class StoredAnchor:
    """An anchor as stored: its line hashes as a list (a Postgres array)."""

    anchor: Anchor

    @property
    def line_hashes(self) -> list[int | None] | None:
        """The hashes of the anchored lines, or None when they cannot tell the lines apart
        (unknown, or every line too short to hash)."""
        hashes = self.anchor.line_hashes
        if hashes is None or all(h is None for h in hashes):
            return None
        return list(hashes)


@dataclass(frozen=True, slots=True)
class StoredPending:
    """A pending anchor as stored: no base is '' (a column of the key cannot be NULL)."""

    pending: PendingAnchor

    @property
    def base(self) -> str:
        """The base commit, or '' in a repository with no commit yet."""
        return "" if self.pending.base is None else self.pending.base.value

    @property
    def line_hashes(self) -> list[int]:
        """The hashes of the lines, as a Postgres array."""
        return list(self.pending.line_hashes)


@dataclass(frozen=True, slots=True)
class Settled:
    """A pending anchor of ``node`` in ``file`` whose lines were found in a commit: the one
    of ``line_hashes`` (None: every one of the node in the file)."""

    project: ProjectId
    repo: RepoId
    node: Sha256Hash
    file: str
    line_hashes: tuple[int, ...] | None = None

    @property
    def hashes_key(self) -> str | None:
        """The line hashes as the query compares them (None: any)."""
        return None if self.line_hashes is None else ",".join(map(str, self.line_hashes))


@dataclass(frozen=True, slots=True)
class StoredCommit:
    """A commit as stored: commit metadata belongs to a project like every other row."""

    project: ProjectId
    commit: CommitInfo


NODES = Table(
    "memory_node",
    (
        ("project", "project"),
        ("sha256", "sha256"),
        ("level", "level"),
        ("query_id", "query_id"),
        ("run_id", "run_id"),
        ("t", "t"),
        ("text", "text"),
        ("created_at", "created_at"),
    ),
)
COMMITS = Table(
    "git_commit",
    (
        ("project", "project"),
        ("repo", "commit.repo"),
        ("commit_sha", "commit.sha"),
        ("message", "commit.message"),
        ("author_name", "commit.author_name"),
        ("author_email", "commit.author_email"),
        ("author_date", "commit.author_date"),
        ("patch_id", "commit.patch_id"),
    ),
)
EDGES = Table(
    "memory_edge",
    (("project", "project"), ("child_sha256", "child"), ("parent_sha256", "parent")),
)
ANCHORS = Table(
    "git_anchor",
    (
        ("project", "anchor.project"),
        ("node_sha256", "anchor.node"),
        ("repo", "anchor.repo"),
        ("commit_sha", "anchor.commit"),
        ("file", "anchor.file"),
        ("line_start", "anchor.line_start"),
        ("line_end", "anchor.line_end"),
        ("line_hashes", "line_hashes"),
        ("added_from", "anchor.added_from"),
        ("found_in", "anchor.found_in"),
    ),
)
PENDING = Table(
    "pending_anchor",
    (
        ("project", "pending.project"),
        ("node_sha256", "pending.node"),
        ("repo", "pending.repo"),
        ("file", "pending.file"),
        ("base_commit", "base"),
        ("line_start", "pending.line_start"),
        ("line_hashes", "line_hashes"),
        ("recorded_at", "pending.recorded_at"),
        ("expires_at", "pending.expires_at"),
    ),
)

# What a batch of new nodes alone writes: rows keyed by those nodes, new with them.
_OWN_ROWS = (NODES, EDGES, ANCHORS)


@dataclass(frozen=True, slots=True)
class Batch:
    """What one ingest transaction writes. ``nodes``' own ``parents`` become edges too."""

    nodes: Sequence[MemoryNode] = ()
    edges: Sequence[Edge] = ()
    commits: Sequence[CommitInfo] = ()
    anchors: Sequence[Anchor] = ()
    # Nodes waiting for their lines to be committed, and those whose lines were found.
    pending: Sequence[PendingAnchor] = ()
    settled: Sequence[Settled] = ()

    def all_edges(self) -> list[Edge]:
        """Explicit edges plus those implied by each node's ``parents``, without duplicates."""
        implied = (Edge(n.project, n.sha256, parent) for n in self.nodes for parent in n.parents)
        return list(dict.fromkeys((*self.edges, *implied)))

    @property
    def size(self) -> int:
        """Rows the batch may write."""
        return (
            len(self.nodes)
            + len(self.all_edges())
            + len(self.commits)
            + len(self.anchors)
            + len(self.pending)
        )


@dataclass(frozen=True, slots=True)
class InsertCounts:
    """Rows a batch actually added (0 everywhere when it was already stored)."""

    nodes: int = 0
    edges: int = 0
    commits: int = 0
    anchors: int = 0
    pending: int = 0
    settled: int = 0


class BatchWrites:
    """The store's writes, on its connector."""

    _connector: Connector

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
        for node in batch.nodes:
            try:
                check_text_size(node.text)
            except ContentError as exc:
                raise ContentError(f"node {node.sha256}: {exc}") from None
        edges = batch.all_edges()
        projects = (
            {n.project for n in batch.nodes}
            | {e.project for e in edges}
            | {a.project for a in batch.anchors}
            | {p.project for p in batch.pending}
        )
        commits: list[StoredCommit] = []
        if batch.commits:
            if len(projects) != 1:
                raise ContentError(
                    "batch: commits are stored per project, so a batch with commits must hold "
                    f"exactly one project, got {sorted(str(p) for p in projects)}"
                )
            unique = {(c.repo, c.sha): c for c in reversed(batch.commits)}  # first of each
            commits = [StoredCommit(next(iter(projects)), c) for c in reversed(unique.values())]
        # A row may be written once per statement: one of each anchor (the first given).
        anchors = [StoredAnchor(a) for a in dict.fromkeys(batch.anchors)]
        # Parents before children: nodes and commits before the edges and anchors naming them.
        writes = [
            ("nodes", NODES, NODES.rows(batch.nodes)),
            ("commits", COMMITS, COMMITS.rows(commits)),
            ("edges", EDGES, EDGES.rows(edges)),
            ("anchors", ANCHORS, ANCHORS.rows(anchors)),
            ("pending", PENDING, PENDING.rows(StoredPending(p) for p in batch.pending)),
        ]
        if use_copy is None:  # Batch.size, counted from the rows without building edges again
            use_copy = sum(len(rows) for _, _, rows in writes) >= COPY_THRESHOLD
        with self._connector.connection() as conn:  # one transaction
            if use_copy:
                # New nodes: their edges up and their anchors are new too, so those three
                # tables are copied into straight (commits are shared: through a stage).
                own = {(n.project, n.sha256) for n in batch.nodes}
                fresh = (
                    bool(own)
                    and all((e.project, e.child) in own for e in edges)
                    and all((a.project, a.node) in own for a in batch.anchors)
                    and _all_new(conn, batch.nodes)
                )
                added = {
                    count: _copy_rows(conn, table, rows, direct=fresh and table in _OWN_ROWS)
                    for count, table, rows in writes
                }
                added["settled"] = _count(_settle(conn, batch.settled))
                _refuse_downward(_edge_levels(conn, edges))
                _notify(conn, notify)
            else:
                # A small batch's statements go out together: one round trip, not one each
                # (the check of the edges' levels reads the rows written before it; a batch
                # it refuses is rolled back, its notification with it).
                with conn.pipeline():
                    sent = {count: _write_rows(conn, table, rows) for count, table, rows in writes}
                    settling = _settle(conn, batch.settled)
                    levels = _edge_levels(conn, edges)
                    _notify(conn, notify)
                added = {count: _count(cursors) for count, cursors in sent.items()}
                added["settled"] = _count(settling)
                _refuse_downward(levels)
        return InsertCounts(**added)

    def refresh_statistics(self) -> None:
        """Bring the planner's statistics of anchors and commits up to date (after a large
        ingest: the lookups of rewritten commits need them to use their index)."""
        with self._connector.connection() as conn:
            conn.execute(query("analyze_anchors"))


def _count(cursors: Sequence[Cursor[Any]]) -> int:
    """The rows ``cursors``' statements wrote (read once their results are in); the cursors
    are closed."""
    total = 0
    for cur in cursors:
        total += max(cur.rowcount, 0)
        cur.close()
    return total


def _write_rows(conn: Connection, table: Table, rows: list[tuple[Any, ...]]) -> list[Cursor[Any]]:
    """Insert ``rows`` into ``table`` row by row (in a pipeline: sent, not yet answered);
    the cursor counts the new ones."""
    if not rows:
        return []
    cur = conn.cursor()
    cur.executemany(table.statement("insert_rows"), rows)
    return [cur]


def _all_new(conn: Connection, nodes: Sequence[MemoryNode]) -> bool:
    """Whether none of ``nodes`` is stored and this role may COPY into the tables (no
    row-level security applies to it): an indexed probe per project."""
    by_project: dict[ProjectId, list[Sha256Hash]] = {}
    for node in nodes:
        by_project.setdefault(node.project, []).append(node.sha256)
    for project, shas in by_project.items():
        row = conn.execute(query("nodes_stored"), {"project": project, "shas": shas}).fetchone()
        if row is None or row["stored"] or row["secured"]:
            return False
    return True


def _copy_rows(
    conn: Connection, table: Table, rows: list[tuple[Any, ...]], *, direct: bool = False
) -> int:
    """Insert ``rows`` into ``table`` by COPY; how many were new. Through a staging table
    merged into the table, skipping the rows stored already; ``direct``, rows expected new
    are copied into the table itself, and only if one is stored after all (written since
    by another ingest), or the COPY is refused, is that COPY undone (a savepoint) and the
    staging table used."""
    if not rows:
        return 0
    with conn.cursor() as cur:
        if direct:
            try:
                with conn.transaction(), cur.copy(table.statement("copy_table")) as copy:
                    for row in rows:
                        copy.write_row(row)
                return len(rows)
            except (UniqueViolation, FeatureNotSupported):
                pass
        cur.execute(table.statement("create_stage"))
        with cur.copy(table.statement("copy_stage")) as stage:
            for row in rows:
                stage.write_row(row)
        cur.execute(table.statement("merge_stage"))
        return max(cur.rowcount, 0)


def _settle(conn: Connection, settled: Sequence[Settled]) -> list[Cursor[Any]]:
    """Delete the pending anchors of nodes whose lines were found; the cursors count how
    many went."""
    by_scope: dict[tuple[ProjectId, RepoId], list[Settled]] = {}
    for s in dict.fromkeys(settled):
        by_scope.setdefault((s.project, s.repo), []).append(s)
    cursors = []
    for (project, repo), group in by_scope.items():
        cur = conn.cursor()
        cur.execute(
            query("settle_pending"),
            {
                "project": project,
                "repo": repo,
                "nodes": [s.node for s in group],
                "files": [s.file for s in group],
                "hashes": [s.hashes_key for s in group],
            },
        )
        cursors.append(cur)
    return cursors


def _edge_levels(conn: Connection, edges: list[Edge]) -> list[Cursor[Any]]:
    """Look for an edge that does not point up (L0 -> L1 -> L2), one statement per project
    (in a pipeline: sent, not yet answered); ``_refuse_downward`` reads the answers."""
    by_project: dict[ProjectId, list[Edge]] = {}
    for edge in edges:
        by_project.setdefault(edge.project, []).append(edge)
    cursors = []
    for project, group in by_project.items():
        cur = conn.cursor()
        cur.execute(
            query("edges_against_levels"),
            {
                "project": project,
                "children": [e.child for e in group],
                "parents": [e.parent for e in group],
            },
        )
        cursors.append(cur)
    return cursors


def _refuse_downward(cursors: Sequence[Cursor[Any]]) -> None:
    """Refuse the batch (ContentError) if ``_edge_levels`` found an edge that does not point
    up; the cursors are closed."""
    try:
        for cur in cursors:
            row = cur.fetchone()
            if row is not None:
                raise ContentError(
                    f"edge: {row['child']} ({row['child_level']}) -> {row['parent']} "
                    f"({row['parent_level']}) does not point up; edges go L0 -> L1 -> L2"
                )
    finally:
        for cur in cursors:
            cur.close()


def _notify(conn: Connection, notify: tuple[str, str] | None) -> None:
    """Send the batch's notification, if it has one (in its transaction)."""
    if notify is not None:
        channel, payload = notify
        conn.execute(query("notify"), {"channel": channel, "payload": payload})
