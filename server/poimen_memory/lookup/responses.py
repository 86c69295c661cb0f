"""The response models of lookups and ``remember``: the JSON every surface answers (the
seed's node objects), published in the HTTP API's OpenAPI document and as the MCP tools'
output schemas. Every field says what it is."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from poimen_memory.domain.checks import format_utc, parse_timestamp

__all__ = [
    "EarlierOut",
    "GitCommitOut",
    "GitContextOut",
    "How",
    "LandedOut",
    "LookupResponse",
    "NodeOut",
    "PendingOut",
    "PlacedOut",
    "RememberResponse",
    "RepoOut",
]


def _(description: str) -> Any:
    return Field(description=description)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class GitCommitOut(_Out):
    """The seed's ``git_commit``: the commit the evidence is anchored in."""

    sha: Annotated[str, _("The commit's id.")]
    message: Annotated[str, _("Its message's first line.")]
    author: Annotated[str, _("Its author's email.")]
    author_name: Annotated[str, _("Its author's name.")]
    date: Annotated[str, _("Its author date (UTC, ISO 8601 with Z).")]


class GitContextOut(_Out):
    """The seed's ``git_context``: where the evidence sits, with its commit."""

    repo: Annotated[str, _("The repository's identity.")]
    file: Annotated[str, _("The file, relative to the repository's root, in that commit.")]
    line: Annotated[int, _("The first line (0: the whole file).")]
    line_end: Annotated[int, _("The last line.")]
    commit_sha: Annotated[str, _("The commit the lines are anchored in.")]
    commit_msg: Annotated[str, _("Its message's first line.")]
    author: Annotated[str, _("Its author's email.")]
    author_name: Annotated[str, _("Its author's name.")]
    author_date: Annotated[str, _("Its author date (UTC, ISO 8601 with Z).")]


How = Literal["same-change", "squash"]


class LandedOut(_Out):
    """How a memory of a rewritten commit arrived: the commit it was recorded on (no longer in
    the history) and the commit its change landed as; ``how`` is ``same-change`` (rebase,
    cherry-pick: the same change under a new id) or ``squash`` (inside a larger or edited
    change: squash merge, amend, fixup)."""

    recorded_commit: Annotated[str, _("The commit the memory was recorded on.")]
    landed_commit: Annotated[str, _("The commit its change landed as.")]
    how: Annotated[How, _("`same-change` (rebase, cherry-pick) or `squash`.")]


class EarlierOut(_Out):
    """A memory about an earlier version of the line: the lines it is anchored to were
    replaced by ``replaced_by`` (on ``replaced_at``); ``depth`` 1 is the version just before."""

    replaced_by: Annotated[str, _("The commit that replaced those lines.")]
    replaced_at: Annotated[str, _("When (author date, UTC).")]
    depth: Annotated[int, _("How many versions back (1: the one just before).")]


class NodeOut(_Out):
    """The seed's node object. ``anchors`` and ``lines`` appear when there are any;
    ``parents`` on top-level nodes only (every node above this one: see ``lookup.results``).
    Timestamps are UTC, written with ``Z``."""

    sha256: Annotated[str, _("The node's identity: the sha256 of its content.")]
    level: Annotated[
        Literal["L0", "L1", "L2"], _("L0 evidence, L1 per-query memory, L2 synthesis.")
    ]
    brief: Annotated[str, _("The text's first line.")]
    text: Annotated[str, _("The memory's text.")]
    created_at: Annotated[str, _("When it was recorded (UTC, ISO 8601 with Z).")]
    query_id: Annotated[str | None, _("The question it answers.")]
    run_id: Annotated[str, _("The agent session it came from.")]
    git_ref: Annotated[str | None, _("Where it is cited: `file:line`.")]
    git_commit: Annotated[GitCommitOut | None, _("The commit it is cited in.")]
    git_context: Annotated[GitContextOut | None, _("Where it is cited, with its commit.")]
    anchors: Annotated[
        list[GitContextOut] | None, _("Every place its evidence is anchored, when several.")
    ] = None
    lines: Annotated[list[int] | None, _("The lines asked about that it is on.")] = None
    parents: Annotated[list[NodeOut] | None, _("Every node above it (top-level nodes).")] = None
    landed: Annotated[LandedOut | None, _("Recorded on a rewritten commit: how it landed.")] = None
    earlier_version: Annotated[
        EarlierOut | None, _("About an earlier version of the line: which.")
    ] = None

    @model_serializer(mode="wrap")
    def _leave_out_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("anchors", "lines", "parents", "landed", "earlier_version"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


RepoOut = str | list[str]
"""The repository a response is about, or the repositories its nodes come from."""


class LookupResponse(_Out):
    """The answer of every lookup on every surface: the repository and the nodes, L0 evidence
    first (newest first), then the L1 and L2 nodes above it.

    ``repo``: the repository the lookup was scoped to; unscoped, the repository the nodes'
    evidence is in, or a list of them (sorted) when there are several or none; each cited node
    names its own in ``git_context.repo``. ``mapped`` (by-git only): true when the lines were
    mapped through blame in a work tree of the repository, false when they were looked up as
    stored (``commit_sha`` given, or no work tree of the repository here). ``truncated``: the
    answer stopped at its bound and more exists (by-commit and by-author: anchors beyond
    ``limit``, fetched with ``cursor``; query: matches beyond ``limit``; by-git: anchors beyond
    the lookup's bound). ``cursor`` (by-commit and by-author, when truncated): pass it back as
    ``cursor``, with the same request, for the next page."""

    repo: Annotated[RepoOut, _("The repository (or, unscoped, the repositories) answered.")]
    nodes: Annotated[list[NodeOut], _("Evidence first (newest first), then the nodes above.")]
    mapped: Annotated[
        bool | None, _("by-git: mapped through blame (true) or looked up as stored (false).")
    ] = None
    truncated: Annotated[bool, _("More exists beyond the answer's bound.")] = False
    cursor: Annotated[str | None, _("Pass it back with the same request for the next page.")] = None

    @model_serializer(mode="wrap")
    def _leave_out_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("mapped", "cursor"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


class PlacedOut(_Out):
    """Lines a remembered memory is anchored to: at their origin commit, as blame says."""

    commit: Annotated[str, _("The commit that produced the lines.")]
    file: Annotated[str, _("The file in that commit.")]
    line_start: Annotated[int, _("The first line there.")]
    line_end: Annotated[int, _("The last line there.")]


class PendingOut(_Out):
    """Lines of a remembered memory that are not committed yet (numbered as in the work tree
    when it was recorded): they become anchors once a commit after ``base`` holds them."""

    file: Annotated[str, _("The file.")]
    line_start: Annotated[int, _("The first line, as the work tree had it.")]
    line_end: Annotated[int, _("The last line.")]
    base: Annotated[str | None, _("HEAD when they were remembered.")]
    expires_at: Annotated[str, _("When they stop waiting for a commit (UTC).")]

    @field_validator("expires_at")
    @classmethod
    def _in_utc(cls, value: str) -> str:
        return format_utc(parse_timestamp("expires_at", value))


class RememberResponse(_Out):
    """What ``remember`` recorded: the L0 node (and the L1 over it, given a brief), whether
    it is new, where it is anchored, which lines wait for a commit, and the secrets taken out
    of the text before it was stored."""

    project: Annotated[str, _("The project it was stored in.")]
    repo: Annotated[str, _("The repository's identity.")]
    file: Annotated[str, _("The file.")]
    lines: Annotated[tuple[int, int], _("The lines `[start, end]` as the work tree has them.")]
    node: Annotated[str, _("The evidence node's sha256.")]
    brief_node: Annotated[str | None, _("The brief's node (L1), if a brief was given.")]
    created: Annotated[bool, _("Whether it is new (false: the same text was known).")]
    anchored: Annotated[list[PlacedOut], _("Where committed lines were anchored.")]
    pending: Annotated[list[PendingOut], _("Lines waiting for their commit.")]
    redacted: Annotated[dict[str, int], _("Secrets taken out of the text, by kind.")]
