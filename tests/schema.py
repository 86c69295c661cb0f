"""Facts of the schema that several tests check: the tables keyed by project first."""

from __future__ import annotations

PROJECT_KEYED_TABLES = frozenset(
    {
        "memory_node",
        "memory_edge",
        "git_commit",
        "git_anchor",
        "commit_alias",
        "blame_file",
        "blame_run",
        "pending_anchor",
    }
)
"""Every table whose keys start with ``project`` (the distribution column)."""
