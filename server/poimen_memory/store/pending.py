"""Reads and upkeep of pending anchors: nodes an agent recorded on lines not yet committed
(written with a ``Batch``, settled in the batch that adds their anchors)."""

from __future__ import annotations

from poimen_memory.domain import CommitSha, PendingAnchor, ProjectId, RepoId, Sha256Hash
from poimen_memory.store.connector import Connection, Connector
from poimen_memory.store.queries import query

__all__ = ["PendingReads", "pending_count"]


def _present(conn: Connection) -> bool:
    """Whether the schema has pending anchors (migration 6)."""
    row = conn.execute(query("pending_present")).fetchone()
    return row is not None and bool(row["present"])


def pending_count(conn: Connection) -> int:
    """Pending anchors not expired; 0 on a schema without them."""
    if not _present(conn):
        return 0
    row = conn.execute(query("pending_count")).fetchone()
    return 0 if row is None else int(row["n"])


class PendingReads:
    """The store's pending anchors, on its connector (whose schema check guarantees the table:
    an older schema is SchemaMissing, naming `mem db migrate`, before any of these runs)."""

    _connector: Connector

    def pending_files(self, project: ProjectId, repo: RepoId) -> set[str]:
        """The files of ``repo`` where some node of ``project`` waits for its lines."""
        rows = self._connector.fetch_all("pending_files", {"project": project, "repo": repo})
        return {r["file"] for r in rows}

    def pending_repos(self, project: ProjectId | None = None) -> list[tuple[ProjectId, RepoId]]:
        """Every (project, repository) with pending anchors (of ``project``, or of any)."""
        rows = self._connector.fetch_all("pending_repos", {"project": project})
        return [(ProjectId(r["project"]), RepoId(r["repo"])) for r in rows]

    def pending_in_file(self, project: ProjectId, repo: RepoId, file: str) -> list[PendingAnchor]:
        """The pending anchors of ``file``, oldest first; expired ones are left out."""
        with self._connector.connection() as conn:
            rows = conn.execute(
                query("pending_in_file"), {"project": project, "repo": repo, "file": file}
            ).fetchall()
        return [
            PendingAnchor(
                project=ProjectId(r["project"]),
                node=Sha256Hash(r["node_sha256"]),
                repo=RepoId(r["repo"]),
                file=r["file"],
                base=CommitSha(r["base_commit"]) if r["base_commit"] else None,
                line_start=r["line_start"],
                line_hashes=tuple(r["line_hashes"]),
                recorded_at=r["recorded_at"],
                expires_at=r["expires_at"],
            )
            for r in rows
        ]

    def expire_pending(self, project: ProjectId | None = None) -> int:
        """Delete the pending anchors of ``project`` (None: of every project) past their
        time; how many went."""
        with self._connector.connection() as conn, conn.cursor() as cur:
            cur.execute(query("expire_pending"), {"project": project})
            return max(cur.rowcount, 0)
