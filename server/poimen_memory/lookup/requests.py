"""The requests, defined once: pydantic models that every surface validates through.

HTTP (FastAPI) takes them as bodies and publishes their JSON Schema, MCP tools take their
schema as input schema, the LSP commands and the CLI build them, so a bad value gets the same
words everywhere: ``field: what is wrong, got value``. The field types are in
``lookup.fields``; every field says what it is (``description``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from poimen_memory.domain import QueryId
from poimen_memory.domain.checks import show
from poimen_memory.lookup import fields
from poimen_memory.lookup.errors import LookupInputError
from poimen_memory.lookup.fields import *  # noqa: F403  (the field types, re-exported)
from poimen_memory.lookup.fields import (
    DEFAULT_ANCHOR_LIMIT,
    DEFAULT_QUERY_LIMIT,
    AnchorLimit,
    Author,
    CodeLine,
    CommitPrefix,
    Cursor,
    HistoryDepth,
    ItemError,
    Line,
    LinePair,
    MemoryText,
    Project,
    Query,
    QueryLimit,
    QueryText,
    Repo,
    RepoPath,
    Rev,
)

__all__ = [
    "BlameRequest",
    "ByAuthorRequest",
    "ByCommitRequest",
    "ByGitRequest",
    "DocumentRequest",
    "HoverRequest",
    "LookupRequest",
    "QueryRequest",
    "RememberRequest",
    "Request",
    "ResolvePendingRequest",
    "StatusRequest",
    "WhyRequest",
    "input_error",
]
__all__ += fields.__all__

_REPO = (
    "The repository: its identity (`github.com/org/app`, or any remote URL) or the path of a "
    "work tree (absolute, or starting with `./`, `../` or `~`); needed only when the server "
    "knows several."
)
_PROJECT = (
    "The project to look in; default: the one configured (`POIMEN_PROJECT`, the config file), "
    "else the one derived from the repository (`github.com/org/app` -> `app`)."
)
_FILE = "A path relative to the repository's root."
_LINE = "A line (1-based) as the work tree has it now."
_LINES = "A range of lines `[start, end]` (inclusive), instead of `line`."
_HISTORY = (
    "One line only: also the memories of the versions the line replaced, this many back "
    "(`true`: 3; default: none)."
)
_LIMIT = "Anchors per page; a response that stops there says `truncated` and gives a `cursor`."
_CURSOR = "The `cursor` of the previous page's response: the page after it."


class Request(BaseModel):
    """A request of any surface: a JSON object whose unknown keys are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", hide_input_in_errors=True)

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: object) -> object:
        if isinstance(data, bytes | bytearray):  # a body sent as something other than JSON
            raise ItemError("body", "expected a JSON object with Content-Type: application/json")
        if not isinstance(data, Mapping):
            raise ItemError("arguments", f"expected a JSON object, got {show(data)}")
        return data

    @classmethod
    def parse(cls, body: object) -> Self:
        """Validate ``body`` (a JSON object); LookupInputError names the first bad field."""
        try:
            return cls.model_validate(body)
        except ValidationError as exc:
            raise input_error(exc.errors(include_url=False)[0]) from None

    @classmethod
    def from_json(cls, value: object) -> Self:
        """Same as :meth:`parse` (the name the seed's API uses)."""
        return cls.parse(value)


class LookupRequest(Request):
    """A request about a project's memories. ``project`` may be left out: the service
    decides it by the one project rule (``lookup.project``), and answers ``project:
    required`` when nothing decides it."""

    project: Annotated[Project | None, Field(description=_PROJECT)] = None


def input_error(error: Mapping[str, Any], skip: int = 0) -> LookupInputError:
    """One pydantic error (from ``ValidationError.errors()``) as ``field: message`` in our
    words; ``skip`` leading parts of its location are not the field's (FastAPI's "body")."""
    loc = [str(p) for p in error["loc"]][skip:]
    field_name = loc[0] if loc else "arguments"
    if error["type"] == "json_invalid":
        detail = (error.get("ctx") or {}).get("error", error["msg"])
        return LookupInputError("body", f"not valid JSON ({detail})")
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ItemError):
        return LookupInputError(cause.field, str(cause))
    if error["type"] == "missing":
        return LookupInputError(field_name, "required")
    if isinstance(cause, ValueError):
        return LookupInputError(field_name, str(cause))
    return LookupInputError(field_name, error["msg"])


def _one_range(line: int | None, lines: tuple[int, int] | None, *, required: bool) -> None:
    """``line`` or ``lines``, never both (and one of them when ``required``)."""
    if line is not None and lines is not None:
        raise ItemError("lines", "give either line or lines, not both")
    if required and line is None and lines is None:
        raise ItemError("line", "required (or lines: [start, end])")


class _Range:
    """The lines a request names: ``line``, or ``lines: [start, end]`` (0: none given)."""

    if TYPE_CHECKING:
        line: int | None
        lines: tuple[int, int] | None

    @property
    def line_start(self) -> int:
        """First line (0: the whole file)."""
        return self.lines[0] if self.lines is not None else self.line or 0

    @property
    def line_end(self) -> int:
        """Last line (0: the whole file)."""
        return self.lines[1] if self.lines is not None else self.line or 0


class WhyRequest(_Range, LookupRequest):
    """Why a line or a range of a file is the way it is now: its memories, traced through
    blame to the change that produced it (``by_git`` with only the location)."""

    file: Annotated[RepoPath, Field(description=_FILE)]
    line: Annotated[CodeLine | None, Field(description=_LINE)] = None
    lines: Annotated[LinePair | None, Field(description=_LINES)] = None
    repo: Annotated[Repo | None, Field(description=_REPO)] = None
    history: Annotated[HistoryDepth, Field(description=_HISTORY)] = 0

    @model_validator(mode="after")
    def _line_or_lines(self) -> Self:
        _one_range(self.line, self.lines, required=True)
        return self


class ByGitRequest(_Range, LookupRequest):
    """Memories at a code location: ``file`` line ``line`` or ``lines: [start, end]`` (neither,
    or ``line: 0``: the whole file), mapped through blame in a work tree of ``repo``; with
    ``commit_sha``, the lines of that commit literally; with no work tree of the repository
    here, the lines as stored, in any commit, newest first (``mapped: false``). With ``at``,
    blamed as of that commit instead of HEAD. ``history`` (one line only) adds the memories
    of the versions the line replaced, that many back (``true``: 3)."""

    file: Annotated[RepoPath, Field(description=_FILE)]
    line: Annotated[Line | None, Field(description=f"{_LINE} 0 or none: the whole file.")] = None
    lines: Annotated[LinePair | None, Field(description=_LINES)] = None
    repo: Annotated[Repo | None, Field(description=_REPO)] = None
    commit_sha: Annotated[
        CommitPrefix | None,
        Field(description="Look the lines up literally as they were in this commit (no blame)."),
    ] = None
    at: Annotated[
        CommitPrefix | None, Field(description="Blame as of this commit instead of HEAD.")
    ] = None
    history: Annotated[HistoryDepth, Field(description=_HISTORY)] = 0

    @model_validator(mode="after")
    def _one_of_line_or_lines(self) -> Self:
        _one_range(self.line, self.lines, required=False)
        return self

    @classmethod
    def of(cls, why: WhyRequest) -> ByGitRequest:
        """The by-git request a ``why`` is."""
        return cls.model_validate(dict(why))


class _Paged(LookupRequest):
    """A lookup answered a page of ``limit`` anchors at a time: ``cursor`` (from the previous
    page's response) asks for the next."""

    repo: Annotated[Repo | None, Field(description=_REPO)] = None
    limit: Annotated[AnchorLimit, Field(description=_LIMIT)] = DEFAULT_ANCHOR_LIMIT
    cursor: Annotated[Cursor | None, Field(description=_CURSOR)] = None


class ByCommitRequest(_Paged):
    """Every memory whose evidence is anchored in a commit (full id or unique prefix), a page
    of ``limit`` anchors at a time: ``cursor`` (from the previous page's response) asks for
    the next."""

    commit_sha: Annotated[
        CommitPrefix, Field(description="The commit: a full id or a unique prefix (4+ digits).")
    ]


class ByAuthorRequest(_Paged):
    """Evidence from an author's commits (email or name, any case, .mailmap applied), newest
    commit first, a page of ``limit`` anchors at a time: ``cursor`` (from the previous page's
    response) asks for the next."""

    author: Annotated[
        Author, Field(description="The author's email or name (any case; .mailmap applies).")
    ]


class QueryRequest(LookupRequest):
    """Full-text search; with ``git_repo`` each result is cited by its evidence in that repo."""

    query: Annotated[
        QueryText,
        Field(description='Words to search for (web-search syntax: words, "a phrase", -not, or).'),
    ]
    git_repo: Annotated[
        Repo | None,
        Field(description="Cite each result by its evidence in this repository. " + _REPO),
    ] = None
    limit: Annotated[QueryLimit, Field(description="Results at most.")] = DEFAULT_QUERY_LIMIT


class RememberRequest(_Range, LookupRequest):
    """A memory an agent records on lines of a file as they are in the work tree now:
    ``text`` is the evidence (an L0 node), ``brief`` an optional summary over it (an L1).
    Committed lines are anchored at their origin through blame; lines not committed yet wait
    until a commit holds them. Recording the same text twice changes nothing."""

    text: Annotated[
        MemoryText,
        Field(description="What was learned: the evidence, self-contained, no secrets."),
    ]
    brief: Annotated[
        MemoryText | None, Field(description="A one-line summary, kept above the evidence.")
    ] = None
    query_id: Annotated[
        Query | None,
        Field(description="The question it answers (default: `remembered`)."),
    ] = None
    file: Annotated[RepoPath, Field(description=_FILE)]
    line: Annotated[CodeLine | None, Field(description=_LINE)] = None
    lines: Annotated[LinePair | None, Field(description=_LINES)] = None
    repo: Annotated[Repo | None, Field(description=_REPO)] = None

    @model_validator(mode="after")
    def _line_or_lines(self) -> Self:
        _one_range(self.line, self.lines, required=True)
        return self

    @property
    def query(self) -> QueryId:
        """The query the memory answers to: given, else ``remembered`` (so the same text
        remembered twice is the same node)."""
        return self.query_id or QueryId("remembered")


class BlameRequest(Request):
    """A file's blame as lookups compute it (the local cache, the shared one, a cached
    ancestor plus the commits since, or git), optionally checked against ``git blame``."""

    file: Annotated[RepoPath, Field(description=_FILE)]
    repo: Annotated[Repo | None, Field(description=_REPO)] = None
    at: Annotated[
        Rev | None, Field(description="Blame as of this commit, branch or tag (default: HEAD).")
    ] = None
    verify: Annotated[
        bool,
        Field(description="Also run git's own `git blame` and list every line that differs."),
    ] = False


class StatusRequest(Request):
    """The store's schema version and row counts."""


class ResolvePendingRequest(Request):
    """Anchor lines remembered before they were committed, where a commit now holds them;
    delete the expired ones."""

    project: Annotated[
        Project | None, Field(description="Only this project's (default: every project's).")
    ] = None


class DocumentRequest(LookupRequest):
    """Every memory of a document open in an editor (its code lenses): ``file`` is its path
    on disk, ``text`` the buffer's text when it may differ from the file (unsaved edits)."""

    file: Annotated[str, Field(min_length=1, description="The document's path on disk.")]
    text: Annotated[
        str | None, Field(description="The buffer's text (None: the file as saved).")
    ] = None


class HoverRequest(DocumentRequest):
    """A line of a document open in an editor: ``line`` as the buffer has it (1-based), with
    the memories of ``history`` earlier versions of it."""

    line: Annotated[CodeLine, Field(description="The line (1-based) as the buffer has it.")]
    history: Annotated[HistoryDepth, Field(description=_HISTORY)] = 0
