"""Paged lookups: every anchor of a commit, or of an author's commits, a page at a time, each
page with the cursor of the next (good only with the lookup that gave it)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from poimen_memory.domain import RepoId
from poimen_memory.gitio import GitError
from poimen_memory.lookup.core import LookupCore
from poimen_memory.lookup.errors import LookupInputError
from poimen_memory.lookup.requests import ByAuthorRequest, ByCommitRequest, CursorKind, PageCursor
from poimen_memory.lookup.results import LookupResult, assemble
from poimen_memory.store import Evidence
from poimen_memory.store.evidence import EvidencePage

__all__ = ["PagedLookups"]

# The pages of a lookup: the key of the anchor a page starts after (None: the first) -> page.
_Pages = Callable[[dict[str, Any] | None], EvidencePage]

# The keyset of an anchor in a cursor, in order (by-author adds its commit's date).
_AFTER_KEYS = ("after_repo", "after_commit", "after_file", "after_start", "after_end", "after_node")


class PagedLookups:
    """Lookups by commit and by author, a page at a time or followed to their end."""

    def __init__(self, core: LookupCore) -> None:
        self._core = core

    def by_commit(self, req: ByCommitRequest) -> LookupResult:
        """Every L0 anchored in the commit, plus the nodes above them: a page of ``limit``
        anchors (after ``cursor``), with the cursor of the next when more follow."""
        repo, fetch, lookup = self._commit_pages(req)
        if fetch is None:
            return LookupResult(repo, ())
        return _paged(repo, fetch(_after(req.cursor, "by-commit", lookup)), lookup)

    def by_author(self, req: ByAuthorRequest) -> LookupResult:
        """L0 evidence from the author's commits, newest commit first, plus the nodes above
        it: a page of ``limit`` anchors (after ``cursor``), with the cursor of the next when
        more follow."""
        repo, fetch, lookup = self._author_pages(req)
        return _paged(repo, fetch(_after(req.cursor, "by-author", lookup)), lookup)

    def every_page(self, req: ByCommitRequest | ByAuthorRequest) -> LookupResult:
        """A paged lookup followed to its end (from ``cursor``, if given): the evidence of
        every page, answered as one."""
        if isinstance(req, ByCommitRequest):
            repo, fetch, lookup = self._commit_pages(req)
            if fetch is None:
                return LookupResult(repo, ())
        else:
            repo, fetch, lookup = self._author_pages(req)
        after = _after(req.cursor, lookup.kind, lookup)
        rows: list[Evidence] = []
        while True:
            page = fetch(after)
            rows.extend(page.rows)
            if page.after is None:
                return assemble(repo, rows)
            after = page.after

    def _commit_pages(self, req: ByCommitRequest) -> tuple[RepoId | None, _Pages | None, _Lookup]:
        """The repository of a by-commit request, the pages of its anchors (None: no such
        commit), and what identifies the lookup in a cursor."""
        core = self._core
        project = core.project_of(req)
        repo = core.known_repo(project, req.repo)
        commit = core.resolve_commit(project, repo, req.commit_sha)
        if commit is None:
            return repo, None, _Lookup("by-commit", (project.value, _name(repo), req.commit_sha))
        lookup = _Lookup("by-commit", (project.value, _name(repo), commit.value))

        def fetch(after: dict[str, Any] | None) -> EvidencePage:
            return core.store.commit_page(project, repo, [commit], req.limit, after)

        return repo, fetch, lookup

    def _author_pages(self, req: ByAuthorRequest) -> tuple[RepoId | None, _Pages, _Lookup]:
        """The repository of a by-author request, the pages of its anchors, and what
        identifies the lookup in a cursor."""
        core = self._core
        project = core.project_of(req)
        repo = core.known_repo(project, req.repo)
        authors = {req.author}
        if repo is not None or len(core.checkouts.identities()) == 1:
            try:
                _, blamer = core.checkouts.blamer(repo)
                authors |= blamer.repo.mailmap(req.author)
            except (LookupInputError, GitError):
                pass  # no checkout to ask: match what was stored (already mailmap-normalized)
        lookup = _Lookup("by-author", (project.value, _name(repo), req.author.lower()))

        def fetch(after: dict[str, Any] | None) -> EvidencePage:
            return core.store.author_page(project, repo, authors, req.limit, after)

        return repo, fetch, lookup


@dataclass(frozen=True, slots=True)
class _Lookup:
    """A paged lookup as its cursors name it: the kind, and the request's identifying parts
    (project, repository, commit or author), kept short as a fingerprint."""

    kind: CursorKind
    parts: tuple[str, ...]

    @property
    def fingerprint(self) -> str:
        data = "\x00".join((self.kind, *self.parts)).encode("utf-8", "surrogateescape")
        return hashlib.sha256(data).hexdigest()[:16]


def _after(cursor: PageCursor | None, kind: str, lookup: _Lookup) -> dict[str, Any] | None:
    """The key a request's cursor gives (None: the first page); ``cursor: ...`` when it was
    given by another lookup."""
    if cursor is None:
        return None
    if cursor.kind != kind or cursor.lookup != lookup.fingerprint:
        raise LookupInputError(
            "cursor",
            "given by another lookup: a cursor is good only with the request whose "
            "response gave it (same lookup, project, repo and commit or author)",
        )
    names = _AFTER_KEYS if kind == "by-commit" else (*_AFTER_KEYS, "after_date")
    if len(cursor.after) != len(names):
        raise LookupInputError("cursor", "not a cursor a response of this server gave")
    return dict(zip(names, cursor.after, strict=True))


def _paged(repo: RepoId | None, page: EvidencePage, lookup: _Lookup) -> LookupResult:
    """A page's answer, with the cursor of the next page when more follow."""
    result = assemble(repo, page.rows)
    if page.after is None:
        return result
    names = _AFTER_KEYS if lookup.kind == "by-commit" else (*_AFTER_KEYS, "after_date")
    after = tuple(_cursor_value(page.after[name]) for name in names)
    cursor = PageCursor(lookup.kind, lookup.fingerprint, after)
    return replace(result, truncated=True, cursor=cursor.token())


def _name(repo: RepoId | None) -> str:
    return "" if repo is None else repo.value


def _cursor_value(value: object) -> str | int:
    """A key part as a cursor carries it (a date as ISO 8601, exact to the microsecond)."""
    if isinstance(value, datetime):
        return value.isoformat()
    assert isinstance(value, str | int)
    return value
