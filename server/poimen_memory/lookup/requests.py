"""The lookup requests, defined once: pydantic models that every surface validates through.

HTTP (FastAPI) takes them as bodies and publishes their JSON Schema, the LSP commands and the
CLI build them, so a bad value gets the same words everywhere: ``field: what is wrong, got
value``. Each field's rule and its schema sit side by side in one annotated type.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from poimen_memory.domain import (
    COMMIT_PREFIX_PATTERN,
    IDENT_PATTERN,
    ContentError,
    ProjectId,
    QueryId,
    RepoId,
    check_repo_path,
    is_commit_prefix,
)
from poimen_memory.domain.checks import INT4_MAX, show
from poimen_memory.domain.nodes import MAX_TEXT_BYTES, check_text_size
from poimen_memory.gitio import GitError, normalize_remote
from poimen_memory.lookup.errors import LookupInputError

__all__ = [
    "DEFAULT_ANCHOR_LIMIT",
    "DEFAULT_QUERY_LIMIT",
    "HISTORY_DEPTH",
    "MAX_ANCHOR_LIMIT",
    "MAX_HISTORY_DEPTH",
    "MAX_LINE",
    "MAX_QUERY_LIMIT",
    "ByAuthorRequest",
    "ByCommitRequest",
    "ByGitRequest",
    "LookupRequest",
    "PageCursor",
    "QueryRequest",
    "RememberRequest",
    "WorkTreePath",
    "input_error",
    "is_path",
]

MAX_LINE = INT4_MAX  # line numbers are stored as Postgres integers
DEFAULT_ANCHOR_LIMIT = 500
MAX_ANCHOR_LIMIT = 10_000
DEFAULT_QUERY_LIMIT = 20
MAX_QUERY_LIMIT = 100
_MAX_QUERY_TEXT = 1000
_COMMIT_PREFIX = f"^{COMMIT_PREFIX_PATTERN}$"
_IDENT = f"^{IDENT_PATTERN}$"


def _text(limit: int) -> Callable[[object], str]:
    """A non-empty string of at most ``limit`` characters, no NUL, valid Unicode."""

    def check(value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"expected a non-empty string, got {show(value)}")
        if len(value) > limit:
            raise ValueError(f"longer than {limit} characters")
        if "\x00" in value:
            raise ValueError("contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("not valid Unicode text (lone surrogate)") from None
        return value

    return check


def _memory_text(value: object) -> str:
    """A memory's text: non-empty, no NUL, valid Unicode, within a node's size."""
    text = _text(MAX_TEXT_BYTES)(value)
    try:
        check_text_size(text)
    except ContentError as exc:
        raise ValueError(str(exc)) from None
    return text


_I = TypeVar("_I", ProjectId, QueryId)


def _identifier(kind: type[_I], name: str) -> Callable[[object], _I]:
    """A validator of an identifier newtype, in its own words without the field's name."""

    def check(value: object) -> _I:
        if isinstance(value, kind):
            return value
        try:
            return kind(value)  # type: ignore[arg-type]  # checked by the type itself
        except ContentError as exc:
            raise ValueError(str(exc).removeprefix(f"{name}: ")) from None

    return check


@dataclass(frozen=True, slots=True)
class WorkTreePath:
    """A ``repo`` given as a path (absolute, or starting with ``./``, ``../`` or ``~``): the
    service answers for the known work tree it is in, under that tree's identity."""

    value: str


def is_path(text: str) -> bool:
    """Whether a ``repo`` value names a directory rather than a repository identity."""
    return text in (".", "..") or text.startswith(("/", "./", "../", "~"))


def _repo(value: object) -> RepoId | WorkTreePath:
    if isinstance(value, RepoId | WorkTreePath):
        return value
    text = _text(512)(value)
    if is_path(text.strip()):
        return WorkTreePath(text.strip())
    try:
        return normalize_remote(text)
    except GitError as exc:
        raise ValueError(str(exc).removeprefix("repo: ")) from None


CursorKind = Literal["by-commit", "by-author"]
_CURSOR_PREFIX = "c1."


@dataclass(frozen=True, slots=True)
class PageCursor:
    """Where the next page of a paged lookup starts: the lookup it belongs to (``kind`` and a
    ``lookup`` fingerprint of its request), and the key of the last anchor answered."""

    kind: CursorKind
    lookup: str
    after: tuple[str | int, ...]

    def token(self) -> str:
        """The opaque string a response carries and a request gives back."""
        raw = json.dumps([self.kind, self.lookup, list(self.after)], separators=(",", ":"))
        return _CURSOR_PREFIX + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def parse(cls, value: object) -> PageCursor:
        """A cursor from its token; ValueError (in the field's words) if it is not one."""
        bad = ValueError(f"not a cursor a response of this server gave, got {show(value)}")
        if not isinstance(value, str) or not value.startswith(_CURSOR_PREFIX):
            raise bad
        body = value.removeprefix(_CURSOR_PREFIX)
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            kind, lookup, after = json.loads(raw)
        except (binascii.Error, ValueError, TypeError):
            raise bad from None
        fields_ok = (
            kind in ("by-commit", "by-author")
            and isinstance(lookup, str)
            and isinstance(after, list)
            and len(after) in (6, 7)
            and all(isinstance(v, str | int) and not isinstance(v, bool) for v in after)
        )
        if not fields_ok:
            raise bad
        return cls(kind, lookup, tuple(after))


def _cursor(value: object) -> PageCursor:
    if isinstance(value, PageCursor):
        return value
    if isinstance(value, str) and len(value) > 2048:
        raise ValueError("longer than 2048 characters")
    return PageCursor.parse(value)


def _cursor_token(value: PageCursor) -> str:
    return value.token()


def _file(value: object) -> str:
    try:
        return check_repo_path("file", value)
    except ContentError as exc:
        raise ValueError(str(exc).removeprefix("file: ")) from None


def _commit_prefix(value: object) -> str:
    if not is_commit_prefix(value):
        raise ValueError(f"expected 4 to 64 hex digits, got {show(value)}")
    assert isinstance(value, str)
    return value.lower()


def _line_number(minimum: int) -> Callable[[object], int]:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {show(value)}")
        if not minimum <= value <= MAX_LINE:
            raise ValueError(f"expected a line number >= {minimum}, got {value}")
        return value

    return check


def _range(maximum: int) -> Callable[[object], int]:
    """A limit from 1 to ``maximum``; digits in a string count (query parameters)."""

    def check(value: object) -> int:
        if isinstance(value, str) and value.isascii() and value.isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
            raise ValueError(f"expected an integer from 1 to {maximum}, got {show(value)}")
        return value

    return check


def _pair(value: object) -> tuple[int, int]:
    if not (isinstance(value, list | tuple) and len(value) == 2):
        raise ValueError(f"expected [start, end], got {show(value)}")
    start, end = (_at("lines", i, _line_number(1), v) for i, v in enumerate(value))
    if end < start:
        raise ValueError(f"end {end} is before start {start}")
    return start, end


# How many versions back `history` looks by default, and at most.
HISTORY_DEPTH = 3
MAX_HISTORY_DEPTH = 10


def _history(value: object) -> int:
    """``true`` (the default depth), ``false``/0 (off) or a depth from 0 to the maximum."""
    if isinstance(value, bool):
        return HISTORY_DEPTH if value else 0
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return HISTORY_DEPTH if value.lower() == "true" else 0
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_HISTORY_DEPTH:
        raise ValueError(
            f"expected true, false or a depth from 0 to {MAX_HISTORY_DEPTH}, got {show(value)}"
        )
    return value


class _ItemError(ValueError):
    """A bad item of a list field, named ``field[i]``."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


def _at(name: str, index: int, check: Callable[[object], int], value: object) -> int:
    try:
        return check(value)
    except ValueError as exc:
        raise _ItemError(f"{name}[{index}]", str(exc)) from None


def _value(v: ProjectId | RepoId | QueryId | WorkTreePath) -> str:
    return v.value


def _author(value: object) -> str:
    return _text(320)(value).strip()


def _string(max_length: int, pattern: str | None = None) -> WithJsonSchema:
    schema: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": max_length}
    if pattern is not None:
        schema["pattern"] = pattern
    return WithJsonSchema(schema)


def _integer(minimum: int, maximum: int) -> WithJsonSchema:
    return WithJsonSchema({"type": "integer", "minimum": minimum, "maximum": maximum})


# Each field type: our check (with our words), then the JSON Schema that documents it.
Project = Annotated[
    ProjectId,
    PlainValidator(_identifier(ProjectId, "project")),
    _string(128, _IDENT),
    PlainSerializer(_value, return_type=str),
]
Repo = Annotated[
    RepoId | WorkTreePath,
    PlainValidator(_repo),
    _string(512),
    PlainSerializer(_value, return_type=str),
]
Cursor = Annotated[
    PageCursor,
    PlainValidator(_cursor),
    _string(2048),
    PlainSerializer(_cursor_token, return_type=str),
]
RepoPath = Annotated[str, PlainValidator(_file), _string(4096)]
CommitPrefix = Annotated[str, PlainValidator(_commit_prefix), _string(64, _COMMIT_PREFIX)]
Line = Annotated[int, PlainValidator(_line_number(0)), _integer(0, MAX_LINE)]
LinePair = Annotated[
    tuple[int, int],
    PlainValidator(_pair),
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": MAX_LINE},
            "minItems": 2,
            "maxItems": 2,
        }
    ),
]
Author = Annotated[str, PlainValidator(_author), _string(320)]
MemoryText = Annotated[str, PlainValidator(_memory_text), _string(MAX_TEXT_BYTES)]
Query = Annotated[
    QueryId,
    PlainValidator(_identifier(QueryId, "query_id")),
    _string(256),
    PlainSerializer(_value, return_type=str),
]
CodeLine = Annotated[int, PlainValidator(_line_number(1)), _integer(1, MAX_LINE)]
QueryText = Annotated[str, PlainValidator(_text(_MAX_QUERY_TEXT)), _string(_MAX_QUERY_TEXT)]
AnchorLimit = Annotated[
    int, PlainValidator(_range(MAX_ANCHOR_LIMIT)), _integer(1, MAX_ANCHOR_LIMIT)
]
QueryLimit = Annotated[int, PlainValidator(_range(MAX_QUERY_LIMIT)), _integer(1, MAX_QUERY_LIMIT)]
HistoryDepth = Annotated[
    int,
    PlainValidator(_history),
    WithJsonSchema(
        {
            "oneOf": [
                {"type": "boolean"},
                {"type": "integer", "minimum": 0, "maximum": MAX_HISTORY_DEPTH},
            ]
        }
    ),
]


class LookupRequest(BaseModel):
    """A request of any surface. ``project`` may be left out: the service then uses its
    default project, and answers ``project: required`` when it has none. ``repo`` (where a
    request has one) is a repository identity (``github.com/org/x``, or any remote URL) or the
    path of a work tree (absolute, or starting with ``./``, ``../`` or ``~``)."""

    model_config = ConfigDict(frozen=True, extra="ignore", hide_input_in_errors=True)

    project: Project | None = None

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: object) -> object:
        if isinstance(data, bytes | bytearray):  # a body sent as something other than JSON
            raise _ItemError("body", "expected a JSON object with Content-Type: application/json")
        if not isinstance(data, Mapping):
            raise _ItemError("arguments", f"expected a JSON object, got {show(data)}")
        return data

    @classmethod
    def parse(cls, body: object, default_project: ProjectId | None = None) -> Self:
        """Validate ``body`` (a JSON object; ``project`` defaults to ``default_project``);
        LookupInputError names the first bad field."""
        try:
            request = cls.model_validate(body)
        except ValidationError as exc:
            raise input_error(exc.errors(include_url=False)[0]) from None
        if request.project is None and default_project is not None:
            return request.model_copy(update={"project": default_project})
        return request

    @classmethod
    def from_json(cls, value: object, default_project: ProjectId | None = None) -> Self:
        """Same as :meth:`parse` (the name the seed's API uses)."""
        return cls.parse(value, default_project)


def input_error(error: Mapping[str, Any], skip: int = 0) -> LookupInputError:
    """One pydantic error (from ``ValidationError.errors()``) as ``field: message`` in our
    words; ``skip`` leading parts of its location are not the field's (FastAPI's "body")."""
    loc = [str(p) for p in error["loc"]][skip:]
    field_name = loc[0] if loc else "arguments"
    if error["type"] == "json_invalid":
        detail = (error.get("ctx") or {}).get("error", error["msg"])
        return LookupInputError("body", f"not valid JSON ({detail})")
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _ItemError):
        return LookupInputError(cause.field, str(cause))
    if error["type"] == "missing":
        return LookupInputError(field_name, "required")
    if isinstance(cause, ValueError):
        return LookupInputError(field_name, str(cause))
    return LookupInputError(field_name, error["msg"])


def _one_range(line: int | None, lines: tuple[int, int] | None, *, required: bool) -> None:
    """``line`` or ``lines``, never both (and one of them when ``required``)."""
    if line is not None and lines is not None:
        raise _ItemError("lines", "give either line or lines, not both")
    if required and line is None and lines is None:
        raise _ItemError("line", "required (or lines: [start, end])")


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


class ByGitRequest(_Range, LookupRequest):
    """Memories at a code location: ``file`` line ``line`` or ``lines: [start, end]`` (neither,
    or ``line: 0``: the whole file), mapped through blame in a work tree of ``repo``; with
    ``commit_sha``, the lines of that commit literally; with no work tree of the repository
    here, the lines as stored, in any commit, newest first (``mapped: false``). With ``at``,
    blamed as of that commit instead of HEAD. ``history`` (one line only) adds the memories
    of the versions the line replaced, that many back (``true``: 3)."""

    file: RepoPath
    line: Line | None = None
    lines: LinePair | None = None
    repo: Repo | None = None
    commit_sha: CommitPrefix | None = None
    at: CommitPrefix | None = None
    history: HistoryDepth = 0

    @model_validator(mode="after")
    def _one_of_line_or_lines(self) -> Self:
        _one_range(self.line, self.lines, required=False)
        return self


class ByCommitRequest(LookupRequest):
    """Every memory whose evidence is anchored in a commit (full id or unique prefix), a page
    of ``limit`` anchors at a time: ``cursor`` (from the previous page's response) asks for
    the next."""

    commit_sha: CommitPrefix
    repo: Repo | None = None
    limit: AnchorLimit = DEFAULT_ANCHOR_LIMIT
    cursor: Cursor | None = None


class ByAuthorRequest(LookupRequest):
    """Evidence from an author's commits (email or name, any case, .mailmap applied), newest
    commit first, a page of ``limit`` anchors at a time: ``cursor`` (from the previous page's
    response) asks for the next."""

    author: Author
    repo: Repo | None = None
    limit: AnchorLimit = DEFAULT_ANCHOR_LIMIT
    cursor: Cursor | None = None


class QueryRequest(LookupRequest):
    """Full-text search; with ``git_repo`` each result is cited by its evidence in that repo."""

    query: QueryText
    git_repo: Repo | None = None
    limit: QueryLimit = DEFAULT_QUERY_LIMIT


class RememberRequest(_Range, LookupRequest):
    """A memory an agent records on lines of a file as they are in the work tree now:
    ``text`` is the evidence (an L0 node), ``brief`` an optional summary over it (an L1).
    Committed lines are anchored at their origin through blame; lines not committed yet wait
    until a commit holds them. Recording the same text twice changes nothing."""

    text: MemoryText
    brief: MemoryText | None = None
    query_id: Query | None = None
    file: RepoPath
    line: CodeLine | None = None
    lines: LinePair | None = None
    repo: Repo | None = None

    @model_validator(mode="after")
    def _line_or_lines(self) -> Self:
        _one_range(self.line, self.lines, required=True)
        return self

    @property
    def query(self) -> QueryId:
        """The query the memory answers to: given, else ``remembered`` (so the same text
        remembered twice is the same node)."""
        return self.query_id or QueryId("remembered")
