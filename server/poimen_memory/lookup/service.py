"""The one lookup service behind every surface (CLI, HTTP, LSP, MCP): by git location, by
commit, by author, by text, and every memory of a document for code lens.

The service is a facade over its parts, which share one ``LookupCore`` (store, checkouts,
settings, pending resolver, caches): ``located`` (by git location), ``paged`` (by commit
and by author), ``search`` (by text), ``lenses`` (every memory of a blamed file) and
``editor`` (hover and document, for open buffers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from poimen_memory.domain import ProjectId, RepoId
from poimen_memory.gitio import Blame, Blamer
from poimen_memory.lookup.checkouts import Checkouts
from poimen_memory.lookup.core import CACHE_SIZES, LookupCore, PendingResolver
from poimen_memory.lookup.editor import EditorLookups
from poimen_memory.lookup.lenses import DocumentLenses
from poimen_memory.lookup.lenses import blame_runs as _blame_runs  # noqa: F401  (tests import it from here)
from poimen_memory.lookup.located import LocatedLookups
from poimen_memory.lookup.paged import PagedLookups
from poimen_memory.lookup.requests import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    DocumentRequest,
    HoverRequest,
    LookupRequest,
    QueryRequest,
)
from poimen_memory.lookup.results import DocumentMemories, LookupResult
from poimen_memory.lookup.search import TextSearch
from poimen_memory.settings import Settings
from poimen_memory.store import Store

__all__ = ["CACHE_SIZES", "LookupService", "PendingResolver"]


@dataclass
class LookupService:
    """Every lookup, over one store and the known checkouts."""

    store: Store
    checkouts: Checkouts
    settings: Settings = field(default_factory=Settings)
    pending: PendingResolver | None = None

    _core: LookupCore = field(init=False, repr=False)
    _located: LocatedLookups = field(init=False, repr=False)
    _paged: PagedLookups = field(init=False, repr=False)
    _search: TextSearch = field(init=False, repr=False)
    _lenses: DocumentLenses = field(init=False, repr=False)
    _editor: EditorLookups = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._core = LookupCore(self.store, self.checkouts, self.settings, self.pending)
        self._located = LocatedLookups(self._core)
        self._paged = PagedLookups(self._core)
        self._search = TextSearch(self._core)
        self._lenses = DocumentLenses(self._core, self._located)
        self._editor = EditorLookups(self._core, self._located, self._lenses)

    # -- editor lookups ---------------------------------------------------------------------

    def hover(self, req: HoverRequest) -> LookupResult | None:
        """The memories of one buffer line (1-based), mapped to HEAD and through blame to its
        origin (see ``EditorLookups.hover``); None for a line without memories, one typed in
        the buffer, and a file that is binary or over the limits."""
        return self._editor.hover(req)

    def document(self, req: DocumentRequest) -> DocumentMemories | None:
        """Every memory of a file by buffer line (1-based), remembered per (file, HEAD) (see
        ``EditorLookups.document``); None for a file that is binary or over the limits."""
        return self._editor.document(req)

    def prepare(self, req: DocumentRequest) -> None:
        """Ready the first hover or code lens of a file just opened, without blaming it (see
        ``EditorLookups.prepare``)."""
        self._editor.prepare(req)

    def needs_blame(self, path: str | Path) -> bool:
        """Whether a document lookup of ``path`` would run a whole-file blame (for progress)."""
        return self._editor.needs_blame(path)

    def for_document(
        self, project: ProjectId, repo_id: RepoId, blame: Blame, blamer: Blamer
    ) -> DocumentMemories:
        """Every memory of a blamed file, by current line (see
        ``DocumentLenses.for_document``)."""
        return self._lenses.for_document(project, repo_id, blame, blamer)

    # -- lookups by request -------------------------------------------------------------------

    def by_git(self, req: ByGitRequest) -> LookupResult:
        """Memories at a code location: the current lines mapped through blame to their origin
        in a work tree of the repository (``mapped``); with ``commit_sha``, the lines of that
        commit literally, and with no work tree of the repository here, the lines as stored
        in any commit (not ``mapped``); plus the nodes above them."""
        return self._located.by_git(req)

    def by_commit(self, req: ByCommitRequest) -> LookupResult:
        """Every L0 anchored in the commit, plus the nodes above them: a page of ``limit``
        anchors (after ``cursor``), with the cursor of the next when more follow."""
        return self._paged.by_commit(req)

    def by_author(self, req: ByAuthorRequest) -> LookupResult:
        """L0 evidence from the author's commits, newest commit first, plus the nodes above
        it: a page of ``limit`` anchors (after ``cursor``), with the cursor of the next when
        more follow."""
        return self._paged.by_author(req)

    def every_page(self, req: ByCommitRequest | ByAuthorRequest) -> LookupResult:
        """A paged lookup followed to its end (from ``cursor``, if given): the evidence of
        every page, answered as one."""
        return self._paged.every_page(req)

    def query(self, req: QueryRequest) -> LookupResult:
        """Full-text search, best first; with ``git_repo`` each result is cited by its evidence
        in that repository (for L1/L2: the evidence they were built from)."""
        return self._search.query(req)

    # -- the project and repository of a lookup ---------------------------------------------

    def project_for_repo(self, repo: RepoId) -> ProjectId:
        """The project a repository's lookups go to when a request names none (the one
        project rule: the settings, else derived from the repository's identity)."""
        return self._core.project_for_repo(repo)

    def project_of(self, req: LookupRequest) -> ProjectId:
        """The project of a request (the one project rule): named in it, else the settings',
        else derived from the repository it names, or from the only one this service knows;
        ``project: required`` when none of these decides it."""
        return self._core.project_of(req)

    # -- what is remembered -----------------------------------------------------------------

    def invalidate(self, repo: RepoId | None = None, project: ProjectId | None = None) -> int:
        """Forget every remembered answer of ``repo``/``project`` (None: any), and the buffer
        mappings and digests; returns how many answers were dropped. Blame is not cached
        here (gitio keys it by commit, so it never goes stale)."""
        return self._core.invalidate(repo, project)

    def forget_pending(self, repo: RepoId, project: ProjectId) -> None:
        """Look for pending anchors of ``repo`` again (something was just remembered)."""
        self._core.forget_pending(repo, project)
