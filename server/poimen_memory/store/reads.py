"""Reads of nodes: by identity, along edges, by full-text search, and the status counts."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from poimen_memory.domain import Level, MemoryNode, ProjectId, Sha256Hash
from poimen_memory.store.blames import blame_counts
from poimen_memory.store.connector import Connector
from poimen_memory.store.migrations import applied_versions, available
from poimen_memory.store.pending import pending_count
from poimen_memory.store.queries import query

__all__ = ["NodeReads", "StoreStatus", "WalkedNode", "node_from_row", "readable_node"]

log = logging.getLogger(__name__)

# The rows already reported as unreadable, so each is logged once per process.
_reported: set[tuple[str, str]] = set()
_reported_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class WalkedNode:
    """A node above the starting ones: the depth it was first reached at and from which ones."""

    node: MemoryNode
    depth: int
    origins: tuple[Sha256Hash, ...]


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
    blame_files: int = 0
    blame_runs: int = 0
    pending: int = 0


def node_from_row(row: Mapping[str, Any]) -> MemoryNode:
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


def readable_node(row: Mapping[str, Any]) -> MemoryNode | None:
    """``node_from_row``, or None for a row that cannot be read back (a ``created_at`` out of
    the years 1 to 9999, stored before the check at the door): the lookup answers without
    it, and the row is logged once."""
    if row.get("created_at") is not None:
        return node_from_row(row)
    key = (str(row.get("project")), str(row.get("sha256")))
    with _reported_lock:
        first = key not in _reported
        _reported.add(key)
    if first:
        log.warning(
            "memory node %s of project %s cannot be read (its created_at is out of the years "
            "1 to 9999); lookups leave it out",
            key[1],
            key[0],
        )
    return None


class NodeReads:
    """The store's reads of nodes, on its connector."""

    _connector: Connector

    def get_nodes(self, project: ProjectId, shas: Iterable[Sha256Hash]) -> list[MemoryNode]:
        """The stored nodes among ``shas`` (missing ones are simply absent), in input order."""
        wanted = list(dict.fromkeys(shas))
        if not wanted:
            return []
        rows = self._connector.fetch_all("nodes_by_sha", {"project": project, "shas": wanted})
        nodes = (node for node in map(readable_node, rows) if node is not None)
        by_sha = {node.sha256: node for node in nodes}
        return [by_sha[s] for s in wanted if s in by_sha]

    def node_levels(
        self, project: ProjectId, shas: Iterable[Sha256Hash]
    ) -> dict[Sha256Hash, Level]:
        """The level of each stored node among ``shas`` (missing ones absent)."""
        wanted = list(shas)
        if not wanted:
            return {}
        rows = self._connector.fetch_all("node_levels", {"project": project, "shas": wanted})
        return {Sha256Hash(r["sha256"]): Level.parse(r["level"]) for r in rows}

    def walk_up(self, project: ProjectId, shas: Iterable[Sha256Hash]) -> list[WalkedNode]:
        """Every node above ``shas`` along edges, each once, nearest first."""
        start = list(shas)
        if not start:
            return []
        rows = self._connector.fetch_all("walk_up", {"project": project, "shas": start})
        walked = ((readable_node(row), row) for row in rows)
        return [
            WalkedNode(
                node=node,
                depth=row["depth"],
                origins=tuple(Sha256Hash(o) for o in row["origins"]),
            )
            for node, row in walked
            if node is not None
        ]

    def search(self, project: ProjectId, text: str, limit: int) -> list[tuple[MemoryNode, float]]:
        """Nodes whose text matches ``text`` (web-search syntax), best first, with their rank."""
        rows = self._connector.fetch_all(
            "search", {"project": project, "query": text, "limit": limit}
        )
        found = ((readable_node(r), float(r["rank"])) for r in rows)
        return [(node, rank) for node, rank in found if node is not None]

    def evidence_below(
        self, project: ProjectId, shas: Iterable[Sha256Hash]
    ) -> dict[Sha256Hash, list[Sha256Hash]]:
        """For each node, the L0 nodes at or below it."""
        wanted = list(shas)
        if not wanted:
            return {}
        rows = self._connector.fetch_all("evidence_below", {"project": project, "shas": wanted})
        out: dict[Sha256Hash, list[Sha256Hash]] = {}
        for r in rows:
            out.setdefault(Sha256Hash(r["top"]), []).append(Sha256Hash(r["sha256"]))
        return out

    def status(self) -> StoreStatus:
        """Schema version and row counts."""
        latest = len(available())
        with self._connector.connection(any_schema=True) as conn:
            versions = applied_versions(conn)
            if not versions:
                return StoreStatus(schema_version=0, latest_version=latest)
            levels = {
                row["level"]: int(row["n"])
                for row in conn.execute(query("status_levels")).fetchall()
            }
            counts = conn.execute(query("status_counts")).fetchone()
            blame_files, blame_runs = blame_counts(conn)
            pending = pending_count(conn)
        assert counts is not None
        return StoreStatus(
            schema_version=max(versions),
            latest_version=latest,
            nodes_by_level={lvl.value: levels.get(lvl.value, 0) for lvl in Level},
            edges=int(counts["edges"]),
            anchors=int(counts["anchors"]),
            commits=int(counts["commits"]),
            projects=int(counts["projects"]),
            blame_files=blame_files,
            blame_runs=blame_runs,
            pending=pending,
        )
