"""The field types of every request, each declared once: its pydantic type and constraints
(which the JSON Schema, OpenAPI and the MCP input schemas are generated from) with the check
that says what is wrong in our words (``expected a line number >= 1, got 0``).

Plain values (numbers, strings, paths, commit ids) are constrained pydantic types with a
``BeforeValidator`` built from the same constants as their constraints. Values that become a
domain newtype (project, repository, query id, page cursor) are checked by the newtype itself
and publish the same pattern and length in their schema.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BeforeValidator,
    Field,
    PlainSerializer,
    PlainValidator,
    TypeAdapter,
    WithJsonSchema,
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
from poimen_memory.domain.checks import INT4_MAX, check_unicode, parse_timestamp, show
from poimen_memory.domain.nodes import MAX_TEXT_BYTES, check_text_size
from poimen_memory.gitio import GitError, normalize_remote

__all__ = [
    "DEFAULT_ANCHOR_LIMIT",
    "DEFAULT_QUERY_LIMIT",
    "HISTORY_DEPTH",
    "MAX_ANCHOR_LIMIT",
    "MAX_HISTORY_DEPTH",
    "MAX_LINE",
    "MAX_QUERY_LIMIT",
    "AnchorLimit",
    "Author",
    "CodeLine",
    "CommitPrefix",
    "Cursor",
    "CursorKind",
    "HistoryDepth",
    "ItemError",
    "Line",
    "LinePair",
    "MemoryText",
    "PageCursor",
    "Project",
    "Query",
    "QueryLimit",
    "QueryText",
    "Repo",
    "RepoPath",
    "Rev",
    "WorkTreePath",
    "is_path",
]

MAX_LINE = INT4_MAX  # line numbers are stored as Postgres integers
DEFAULT_ANCHOR_LIMIT = 500
MAX_ANCHOR_LIMIT = 10_000
DEFAULT_QUERY_LIMIT = 20
MAX_QUERY_LIMIT = 100
# How many versions back `history` looks by default, and at most.
HISTORY_DEPTH = 3
MAX_HISTORY_DEPTH = 10
_MAX_QUERY_TEXT = 1000
_MAX_PATH = 4096
_MAX_AUTHOR = 320
_MAX_REPO = 512
_MAX_CURSOR = 2048
_MAX_REV = 256


class ItemError(ValueError):
    """A bad value whose field is not the one being validated (``lines[1]``, ``body``)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


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


def _file(value: object) -> str:
    if isinstance(value, str) and len(value) > _MAX_PATH:
        raise ValueError(f"longer than {_MAX_PATH} characters")
    try:
        return check_repo_path("file", value)
    except ContentError as exc:
        raise ValueError(str(exc).removeprefix("file: ")) from None


def _commit_prefix(value: object) -> str:
    if not is_commit_prefix(value):
        raise ValueError(f"expected 4 to 64 hex digits, got {show(value)}")
    assert isinstance(value, str)
    return value.lower()


def _rev(value: object) -> str:
    text = _text(_MAX_REV)(value)
    if text.startswith("-"):
        raise ValueError(f"{show(value)} looks like an option; refused")
    if any(c.isspace() or ord(c) < 32 for c in text):
        raise ValueError(f"expected a commit, branch or tag name, got {show(value)}")
    return text


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


def _at(name: str, index: int, check: Callable[[object], int], value: object) -> int:
    try:
        return check(value)
    except ValueError as exc:
        raise ItemError(f"{name}[{index}]", str(exc)) from None


def _pair(value: object) -> tuple[int, int]:
    if not (isinstance(value, list | tuple) and len(value) == 2):
        raise ValueError(f"expected [start, end], got {show(value)}")
    start, end = (_at("lines", i, _line_number(1), v) for i, v in enumerate(value))
    if end < start:
        raise ValueError(f"end {end} is before start {start}")
    return start, end


def _history(value: object) -> int:
    """``true`` (the default depth), ``false``/0 (off) or a depth from 0 to the maximum."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if isinstance(value, bool):
        return HISTORY_DEPTH if value else 0
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_HISTORY_DEPTH:
        raise ValueError(
            f"expected true, false or a depth from 0 to {MAX_HISTORY_DEPTH}, got {show(value)}"
        )
    return value


def _author(value: object) -> str:
    return _text(_MAX_AUTHOR)(value).strip()


# -- plain values: a constrained type and our check, from the same constants ----------------

RepoPath = Annotated[str, Field(min_length=1, max_length=_MAX_PATH), BeforeValidator(_file)]
CommitPrefix = Annotated[
    str,
    Field(min_length=4, max_length=64, pattern=f"^{COMMIT_PREFIX_PATTERN}$"),
    BeforeValidator(_commit_prefix),
]
Rev = Annotated[str, Field(min_length=1, max_length=_MAX_REV), BeforeValidator(_rev)]
Line = Annotated[int, Field(ge=0, le=MAX_LINE), BeforeValidator(_line_number(0))]
CodeLine = Annotated[int, Field(ge=1, le=MAX_LINE), BeforeValidator(_line_number(1))]
LinePair = Annotated[
    tuple[
        Annotated[int, Field(ge=1, le=MAX_LINE)],
        Annotated[int, Field(ge=1, le=MAX_LINE)],
    ],
    BeforeValidator(_pair),
]
Author = Annotated[str, Field(min_length=1, max_length=_MAX_AUTHOR), BeforeValidator(_author)]
MemoryText = Annotated[
    str, Field(min_length=1, max_length=MAX_TEXT_BYTES), BeforeValidator(_memory_text)
]
QueryText = Annotated[
    str, Field(min_length=1, max_length=_MAX_QUERY_TEXT), BeforeValidator(_text(_MAX_QUERY_TEXT))
]
AnchorLimit = Annotated[
    int, Field(ge=1, le=MAX_ANCHOR_LIMIT), BeforeValidator(_range(MAX_ANCHOR_LIMIT))
]
QueryLimit = Annotated[
    int, Field(ge=1, le=MAX_QUERY_LIMIT), BeforeValidator(_range(MAX_QUERY_LIMIT))
]
HistoryDepth = Annotated[
    int,
    Field(ge=0, le=MAX_HISTORY_DEPTH),
    BeforeValidator(_history),
    # true (the default depth) and false are accepted too, and the schema says so.
    WithJsonSchema(
        {
            "oneOf": [
                {"type": "boolean"},
                {"type": "integer", "minimum": 0, "maximum": MAX_HISTORY_DEPTH},
            ]
        }
    ),
]


# -- values that become newtypes: the newtype checks, the schema says the same ---------------

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
    text = _text(_MAX_REPO)(value)
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
            and _FINGERPRINT.fullmatch(lookup) is not None
            and isinstance(after, list)
            and len(after) == (6 if kind == "by-commit" else 7)
        )
        if not fields_ok:
            raise bad
        # Each part as the server wrote it, checked before it can reach a query: an unsigned
        # token can be forged, and a NUL or an integer out of range is for the store to refuse.
        for check, part in zip(_AFTER_CHECKS, after, strict=False):
            problem = check(part)
            if problem is not None:
                raise ValueError(f"not a cursor a response of this server gave ({problem})")
        return cls(kind, lookup, tuple(after))


def _cursor_text(name: str, limit: int) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        if not isinstance(value, str):
            return f"its {name} is not a string"
        if len(value) > limit:
            return f"its {name} is longer than {limit} characters"
        if "\x00" in value:
            return f"its {name} contains a NUL character"
        try:
            check_unicode(name, value)
        except ContentError:
            return f"its {name} is not valid Unicode text"
        return None

    return check


def _cursor_pattern(name: str, pattern: re.Pattern[str]) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        if not isinstance(value, str) or pattern.fullmatch(value) is None:
            return f"its {name} is not one"
        return None

    return check


def _cursor_line(name: str) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT4_MAX:
            return f"its {name} is not a line number"
        return None

    return check


def _cursor_date(value: object) -> str | None:
    try:
        parse_timestamp("date", value)
    except ContentError:
        return "its date is not one"
    return None


_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
# The parts of a cursor's key, in order: repository, commit, file, first and last line, node
# and (by-author) the commit's date.
_AFTER_CHECKS: tuple[Callable[[object], str | None], ...] = (
    _cursor_text("repository", _MAX_REPO),
    _cursor_pattern("commit", re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")),
    _cursor_text("file", _MAX_PATH),
    _cursor_line("first line"),
    _cursor_line("last line"),
    _cursor_pattern("node", re.compile(r"[0-9a-f]{64}")),
    _cursor_date,
)


def _cursor(value: object) -> PageCursor:
    if isinstance(value, PageCursor):
        return value
    if isinstance(value, str) and len(value) > _MAX_CURSOR:
        raise ValueError(f"longer than {_MAX_CURSOR} characters")
    return PageCursor.parse(value)


def _value(v: ProjectId | RepoId | QueryId | WorkTreePath) -> str:
    return v.value


def _token(v: PageCursor) -> str:
    return v.token()


def _as_string(**constraints: Any) -> WithJsonSchema:
    """The JSON Schema of a string with these constraints, as pydantic writes it."""
    return WithJsonSchema(TypeAdapter(Annotated[str, Field(**constraints)]).json_schema())


_IDENT = f"^{IDENT_PATTERN}$"
Project = Annotated[
    ProjectId,
    PlainValidator(_identifier(ProjectId, "project")),
    _as_string(min_length=1, max_length=128, pattern=_IDENT),
    PlainSerializer(_value, return_type=str),
]
Query = Annotated[
    QueryId,
    PlainValidator(_identifier(QueryId, "query_id")),
    _as_string(min_length=1, max_length=256, pattern=_IDENT),
    PlainSerializer(_value, return_type=str),
]
Repo = Annotated[
    RepoId | WorkTreePath,
    PlainValidator(_repo),
    _as_string(min_length=1, max_length=_MAX_REPO),
    PlainSerializer(_value, return_type=str),
]
Cursor = Annotated[
    PageCursor,
    PlainValidator(_cursor),
    _as_string(min_length=1, max_length=_MAX_CURSOR),
    PlainSerializer(_token, return_type=str),
]
