"""The response models of the operations that are not memory lookups (those answer
``LookupResponse`` and ``RememberResponse``, in ``poimen_memory.lookup``): blame, status,
resolve-pending, and the language server's ping and refresh."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BlameDifference",
    "BlameLineOut",
    "BlameResponse",
    "PingResponse",
    "RefreshResponse",
    "ResolvePendingResponse",
    "ResolvedOut",
    "StatusResponse",
]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class BlameLineOut(_Out):
    """Where one line came from: the commit, and its path and line there."""

    line: Annotated[int, Field(description="The line (1-based) in the file as blamed.")]
    commit: Annotated[str, Field(description="The commit that produced the line.")]
    orig_path: Annotated[str, Field(description="The file's path in that commit.")]
    orig_line: Annotated[int, Field(description="The line's number in that commit.")]
    text: Annotated[
        str | None, Field(description="The line's text (in `lines`; not in `differences`).")
    ] = None


class BlameDifference(_Out):
    """A line whose origin differs from ``git blame``'s (``--verify``)."""

    line: Annotated[int, Field(description="The line (1-based).")]
    mem: Annotated[BlameLineOut | None, Field(description="Our origin of it.")]
    git: Annotated[BlameLineOut | None, Field(description="git blame's origin of it.")]


BlameSource = Literal["cache", "shared", "incremental", "git"]


class BlameResponse(_Out):
    """A file's blame as lookups compute it, and where it came from."""

    file: Annotated[str, Field(description="The file, relative to the repository's root.")]
    commit: Annotated[str, Field(description="The commit blamed at.")]
    source: Annotated[
        BlameSource,
        Field(
            description="`cache` (local), `shared` (the store's), `incremental` (a cached "
            "ancestor and the commits since) or `git`."
        ),
    ]
    lines: Annotated[list[BlameLineOut], Field(description="Every line's origin, in order.")]
    verified: Annotated[
        bool | None, Field(description="With `verify`: identical to git blame.")
    ] = None
    differences: Annotated[
        list[BlameDifference] | None, Field(description="With `verify`: the lines that differ.")
    ] = None


class StatusResponse(_Out):
    """The memory store: where it is, its schema version and how much it holds."""

    store: Annotated[str, Field(description="The store's address (no password).")]
    schema_version: Annotated[int, Field(description="Schema version (0: none).")]
    latest_version: Annotated[int, Field(description="The schema version this mem uses.")]
    nodes: Annotated[dict[str, int], Field(description="Memory nodes by level.")]
    edges: Annotated[int, Field(description="Edges between nodes.")]
    anchors: Annotated[int, Field(description="Anchors of evidence in code.")]
    commits: Annotated[int, Field(description="Commits known.")]
    projects: Annotated[int, Field(description="Projects.")]
    blame_files: Annotated[int, Field(description="Files in the shared blame cache.")]
    blame_runs: Annotated[int, Field(description="Runs in the shared blame cache.")]
    pending: Annotated[int, Field(description="Remembered line ranges waiting for their commit.")]


class ResolvedOut(_Out):
    """What resolving pending anchors did in one repository."""

    project: Annotated[str, Field(description="The project.")]
    repo: Annotated[str, Field(description="The repository's identity.")]
    anchors: Annotated[int, Field(description="Anchors added.")]
    files: Annotated[list[str], Field(description="Files where anchors were added.")]
    skipped: Annotated[
        str | None, Field(description="Why the repository was not looked at, if it was not.")
    ]


class ResolvePendingResponse(_Out):
    """Pending anchors resolved and expired."""

    expired: Annotated[int, Field(description="Expired pending anchors deleted.")]
    repos: Annotated[list[ResolvedOut], Field(description="What was done per repository.")]


class PingResponse(_Out):
    """The server answers (liveness)."""

    version: Annotated[str, Field(description="The server's version.")]


class RefreshResponse(_Out):
    """Cached answers dropped."""

    invalidated: Annotated[int, Field(description="Cached answers dropped.")]
