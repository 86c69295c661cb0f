"""Newtypes for identifiers, validated at construction, and repository-relative paths.

No newtype has a default and none converts from a plain ``str`` without its check, except
``trusted`` for values read back from the store, which checked them on the way in.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from poimen_memory.domain.checks import ContentError, check_match, check_text, check_unicode, show

# The one spelling of each rule; the request models publish the same patterns in their schema.
IDENT_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]*"
COMMIT_PREFIX_PATTERN: Final = r"[0-9a-fA-F]{4,64}"
_IDENT_RE: Final = re.compile(IDENT_PATTERN)
_COMMIT_PREFIX_RE: Final = re.compile(COMMIT_PREFIX_PATTERN)
_SHA256_RE: Final = re.compile(r"[0-9a-f]{64}")
_COMMIT_RE: Final = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_REPO_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~:@/+-]*")


def is_commit_prefix(value: object) -> bool:
    """A full commit id or an abbreviation of one: 4 to 64 hex digits, either case."""
    return isinstance(value, str) and _COMMIT_PREFIX_RE.fullmatch(value) is not None


def _check_ident(kind: str, value: object, max_len: int) -> str:
    if not isinstance(value, str):
        raise ContentError(f"{kind}: expected a string, got {show(value)}")
    if not value.strip():
        raise ContentError(f"{kind}: must not be empty or whitespace, got {show(value)}")
    if len(value) > max_len:
        raise ContentError(f"{kind}: longer than {max_len} characters: {show(value)}")
    check_unicode(kind, value)
    if not _IDENT_RE.fullmatch(value):
        raise ContentError(
            f"{kind}: {show(value)} has characters outside [A-Za-z0-9._:@/+=-] "
            "or does not start with a letter or digit"
        )
    return value


@dataclass(frozen=True, slots=True, order=True)
class _Identifier:
    """A name-like identifier; each subclass says which field it is and how long it may be."""

    value: str
    _kind: ClassVar[str]
    _max_len: ClassVar[int]

    def __post_init__(self) -> None:
        _check_ident(self._kind, self.value, self._max_len)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, order=True)
class ProjectId(_Identifier):
    """The project every row belongs to (the distribution key of the store)."""

    _kind = "project"
    _max_len = 128


@dataclass(frozen=True, slots=True, order=True)
class QueryId(_Identifier):
    """The user query (prompt) an L0/L1 node answers to."""

    _kind = "query_id"
    _max_len = 256


@dataclass(frozen=True, slots=True, order=True)
class RunId(_Identifier):
    """One run of an agent (a session). Never part of an identity."""

    _kind = "run_id"
    _max_len = 256


@dataclass(frozen=True, slots=True, order=True)
class Sha256Hash:
    """A content hash: exactly 64 lowercase hex digits."""

    value: str

    def __post_init__(self) -> None:
        check_match("sha256", self.value, _SHA256_RE, "64 lowercase hex digits")

    @classmethod
    def of_bytes(cls, data: bytes) -> Sha256Hash:
        """The sha256 of ``data``."""
        return cls(hashlib.sha256(data).hexdigest())

    def short(self, n: int = 12) -> str:
        """The first ``n`` hex digits, for display."""
        return self.value[:n]

    def __str__(self) -> str:
        return self.value


_T = TypeVar("_T", ProjectId, QueryId, RunId, Sha256Hash)


def trusted(cls: type[_T], value: str) -> _T:
    """A newtype around a value that was validated when it was stored (no re-check)."""
    obj = object.__new__(cls)
    object.__setattr__(obj, "value", value)
    return obj


@dataclass(frozen=True, slots=True, order=True)
class CommitSha:
    """A full git object id: 40 (sha1) or 64 (sha256) lowercase hex digits."""

    value: str

    def __post_init__(self) -> None:
        check_match(
            "commit_sha",
            self.value,
            _COMMIT_RE,
            "a full commit id (40 or 64 lowercase hex digits)",
        )

    def short(self, n: int = 7) -> str:
        """The abbreviated id, for display."""
        return self.value[:n]

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, order=True)
class RepoId:
    """A normalized repository identity such as ``github.com/org/x`` (see gitio)."""

    value: str

    def __post_init__(self) -> None:
        check_match("repo", self.value, _REPO_RE, "a repository identity like 'github.com/org/x'")
        if len(self.value) > 512:
            raise ContentError(f"repo: longer than 512 characters: {show(self.value)}")

    def __str__(self) -> str:
        return self.value


def check_repo_path(name: str, value: object) -> str:
    """A path relative to the repository root, '/'-separated, without '.' or '..' parts."""
    text = check_text(name, value)
    if not text or text.startswith("/"):
        raise ContentError(
            f"{name}: expected a path relative to the repository root, got {show(value)}"
        )
    parts = text.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ContentError(
            f"{name}: {show(value)} must be a normalized relative path (no '', '.' or '..' parts)"
        )
    return text
