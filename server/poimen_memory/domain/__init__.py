"""The vocabulary every other module speaks (spec M0.2) and the content-hash identity.

* ``checks``: ``ContentError`` and the validators every value is built with
* ``ids``: the identifier newtypes and repository-relative paths
* ``encoding``: the canonical, versioned byte encoding that identities hash (the spec is there)
* ``nodes``: levels, records, chunks, memory nodes and edges
* ``anchors``: commit metadata and anchors of evidence in files
* ``tokens``: token counting for the chunker

Import from ``poimen_memory.domain``; the modules are its parts, not separate interfaces.
"""

from __future__ import annotations

from poimen_memory.domain.anchors import (
    Anchor,
    CommitInfo,
    PendingAnchor,
    SharedBlame,
    SharedBlameLine,
    pending_line_hash,
)
from poimen_memory.domain.checks import ContentError, parse_timestamp
from poimen_memory.domain.encoding import CHUNK_TAG as CHUNK_TAG
from poimen_memory.domain.encoding import NODE_TAG as NODE_TAG
from poimen_memory.domain.ids import (
    COMMIT_PREFIX_PATTERN,
    IDENT_PATTERN,
    CommitSha,
    ProjectId,
    QueryId,
    RepoId,
    RunId,
    Sha256Hash,
    check_repo_path,
    is_commit_prefix,
)
from poimen_memory.domain.nodes import Chunk, Edge, Level, MemoryNode, Provenance, Record, Role
from poimen_memory.domain.tokens import TokenCounter, approx_tokens

__all__ = [
    "COMMIT_PREFIX_PATTERN",
    "IDENT_PATTERN",
    "Anchor",
    "Chunk",
    "CommitInfo",
    "CommitSha",
    "ContentError",
    "Edge",
    "Level",
    "MemoryNode",
    "PendingAnchor",
    "ProjectId",
    "Provenance",
    "QueryId",
    "Record",
    "RepoId",
    "Role",
    "RunId",
    "Sha256Hash",
    "SharedBlame",
    "SharedBlameLine",
    "TokenCounter",
    "approx_tokens",
    "check_repo_path",
    "is_commit_prefix",
    "parse_timestamp",
    "pending_line_hash",
]
