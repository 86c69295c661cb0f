"""The one lookup service behind every surface (CLI, HTTP, LSP, MCP): by git location, by
commit, by author, by text, and every memory of a document for code lens."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from cachetools import LRUCache

from poimen_memory.domain import CommitSha, ContentError, ProjectId, RepoId, Sha256Hash
from poimen_memory.errors import StoreUnavailable
from poimen_memory.gitio import (
    Blame,
    BlameLine,
    Blamer,
    GitError,
    GitRepo,
    UnsafeArgument,
    Untracked,
    map_buffer_to_head,
)
from poimen_memory.lookup.checkouts import Checkouts
from poimen_memory.lookup.earlier import earlier_versions
from poimen_memory.lookup.errors import LookupFailed, LookupInputError, NotInRepository
from poimen_memory.lookup.origins import match_evidence, origin_runs
from poimen_memory.lookup.project import project_for
from poimen_memory.lookup.requests import (
    MAX_LINE,
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    CursorKind,
    LookupRequest,
    PageCursor,
    QueryRequest,
    WorkTreePath,
)
from poimen_memory.lookup.results import (
    Citation,
    DocumentMemories,
    Earlier,
    LineMemory,
    LookupResult,
    Memory,
    assemble,
    citation_key,
    citation_of,
    nodes_above,
)
from poimen_memory.lookup.rewrites import Found, Miss, Rewrites, file_hashes, landed_nodes
from poimen_memory.store import Evidence, Store
from poimen_memory.store.evidence import EvidencePage

__all__ = ["CACHE_SIZES", "LookupService", "PendingResolver"]

log = logging.getLogger("poimen_memory.lookup")

# Anchors lines remembered before they were committed, once a commit holds them: (project,
# repository, its blamer, file, HEAD) -> anchors added. Set by the layer that writes them.
PendingResolver = Callable[[ProjectId, RepoId, Blamer, str, CommitSha], int]

_K = TypeVar("_K", bound=tuple[Any, ...])
_V = TypeVar("_V")

# Every in-memory cache of the service, by name, with its bound (entries).
CACHE_SIZES = {
    "documents": 8,  # a document's memories are big; the lenses built from them are kept
    "buffer_maps": 16,  # buffer line -> HEAD line, per (file, HEAD, buffer text)
    "hovers": 4096,  # answers per blame origin
    "digests": 64,  # sha256, size and line count of buffer texts
    "line_hashes": 16,  # text hashes of a file's lines at HEAD (for rewritten commits)
    "pending_files": 64,  # files with remembered lines waiting for a commit, per HEAD
    "head_facts": 256,  # size, line count and binariness of files at HEAD (the limits)
}


@dataclass
class LookupService:
    """Every lookup, over one store and the known checkouts."""

    store: Store
    checkouts: Checkouts
    default_project: ProjectId | None = None
    pending: PendingResolver | None = None

    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        # All behind self._lock; keyed by project and repo where the answer depends on them.
        self._docs: LRUCache[tuple[ProjectId, RepoId, str, CommitSha], DocumentMemories] = LRUCache(
            CACHE_SIZES["documents"]
        )
        self._maps: LRUCache[tuple[str, CommitSha, int], list[int | None]] = LRUCache(
            CACHE_SIZES["buffer_maps"]
        )
        self._hovers: LRUCache[
            tuple[ProjectId, RepoId, CommitSha, str, int, int], LookupResult | None
        ] = LRUCache(CACHE_SIZES["hovers"])
        self._digests: LRUCache[tuple[str, int, int], _TextFacts] = LRUCache(CACHE_SIZES["digests"])
        self._line_hashes: LRUCache[
            tuple[str, str, CommitSha], tuple[list[int | None], Counter[int | None]]
        ] = LRUCache(CACHE_SIZES["line_hashes"])
        self._pending_files: LRUCache[tuple[ProjectId, RepoId, CommitSha], set[str]] = LRUCache(
            CACHE_SIZES["pending_files"]
        )
        self._head_facts: LRUCache[tuple[str, str, CommitSha], _TextFacts] = LRUCache(
            CACHE_SIZES["head_facts"]
        )
        self._rewrites = Rewrites(self.store)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="poimen-lookup")

    # -- editor lookups ---------------------------------------------------------------------

    def _within_limits(
        self,
        blamer: Blamer,
        rel: str,
        head: CommitSha,
        buffer: _TextFacts | None,
        max_bytes: int | None,
        max_lines: int | None,
    ) -> bool:
        """The one check of the limits, made by every editor lookup (each hover, each
        document), whatever is cached: the buffer (when the file is open) and the file at HEAD
        are both text within ``max_bytes`` and ``max_lines``. HEAD's facts are remembered
        per (file, HEAD): the buffer's when it is HEAD's text (recognised by its hash), else
        the blob's (read once)."""
        if buffer is not None and not buffer.within(max_bytes, max_lines):
            return False
        key = (str(blamer.repo.root), rel, head)
        with self._lock:
            facts = self._head_facts.get(key)
        if facts is None:
            if buffer is not None and blamer.text_sha(rel, head) == buffer.sha256:
                facts = buffer
            else:
                try:
                    facts = _TextFacts.of(blamer.repo, blamer.head_blob(rel, head), hashed=False)
                except GitError:
                    return False
            with self._lock:
                self._head_facts[key] = facts
        return facts.within(max_bytes, max_lines)

    def _buffer_to_head(
        self, rel: str, head: CommitSha, head_text: str, buffer_text: str | None
    ) -> list[int | None] | None:
        """Buffer line (0-based) -> HEAD line; None when the buffer is HEAD's text."""
        if buffer_text is None or buffer_text == head_text:
            return None
        key = (rel, head, hash(buffer_text))
        with self._lock:
            hit = self._maps.get(key)
        if hit is None:
            hit = map_buffer_to_head(head_text, buffer_text)
            with self._lock:
                self._maps[key] = hit
        return hit

    def hover(
        self,
        path: str | Path,
        line: int,
        buffer_text: str | None = None,
        project: ProjectId | None = None,
        max_bytes: int | None = None,
        max_lines: int | None = None,
        history: int = 0,
    ) -> LookupResult | None:
        """The memories of one buffer line (1-based): mapped to HEAD in process, then through
        blame to its origin (and, on a miss, to rewritten commits whose change landed there;
        with ``history``, also the memories of the versions it replaced, that many back). None
        for a line without memories or one typed in the buffer, and for a file (at HEAD or in
        the buffer) that is binary or over the limits: checked on every hover.

        A buffer whose text is HEAD's (recognised by its hash) needs no blob; on a cold file
        the blob is read while ``git blame -L`` runs, so the first hover costs one blame."""
        try:
            repo_id, blamer, rel = self.checkouts.locate(path)
            head = blamer.repo.head()
        except (LookupFailed, GitError):
            return None
        self._settle_pending(project, repo_id, blamer, rel, head)
        facts = None if buffer_text is None else self._text_facts(blamer, rel, buffer_text)
        known = blamer.text_sha(rel, head)
        # Unknown text: blame the line as if the buffer were HEAD while the blob is read.
        speculative = (
            self._pool.submit(blamer.origin, rel, line, head)
            if facts is not None and known is None and facts.within(max_bytes, max_lines)
            else None
        )
        if not self._within_limits(blamer, rel, head, facts, max_bytes, max_lines):
            if speculative is not None:
                speculative.cancel()
            return None
        head_line: int | None = line
        if buffer_text is not None and facts is not None and known != facts.sha256:
            if speculative is not None and blamer.text_sha(rel, head) == facts.sha256:
                try:
                    origin = speculative.result()
                except GitError:
                    return None
                return self._answer(
                    blamer, repo_id, rel, head, line, line, project, origin, history
                )
            try:
                data = blamer.head_blob(rel, head)
            except GitError:
                return None
            mapping = self._buffer_to_head(rel, head, data.decode("utf-8", "replace"), buffer_text)
            if mapping is not None:
                head_line = mapping[line - 1] if 1 <= line <= len(mapping) else None
        if head_line is None:
            return None
        try:
            origin = blamer.origin(rel, head_line, head, warm=True)
        except GitError:
            return None
        return self._answer(blamer, repo_id, rel, head, line, head_line, project, origin, history)

    def _text_facts(self, blamer: Blamer, rel: str, text: str) -> _TextFacts:
        """sha256, size, line count and binariness of a buffer's text, remembered per text
        (str hashes are cached on the object, so a warm hover does not rehash a large
        buffer)."""
        key = (rel, len(text), hash(text))
        with self._lock:
            found = self._digests.get(key)
        if found is None:
            found = _TextFacts.of(blamer.repo, text.encode("utf-8", "surrogateescape"))
            with self._lock:
                self._digests[key] = found
        return found

    def _answer(
        self,
        blamer: Blamer,
        repo_id: RepoId,
        rel: str,
        head: CommitSha,
        line: int,
        head_line: int,
        project: ProjectId | None,
        origin: BlameLine | None,
        history: int = 0,
    ) -> LookupResult | None:
        blamer.warm(rel, head)
        if origin is None:
            return None
        scope = project or self.default_project or project_for(repo_id)
        key = (scope, repo_id, origin.commit, origin.orig_path, origin.orig_line, history)
        with self._lock:
            if key in self._hovers:
                return self._hovers[key]
        result = self._at_origin(
            scope, repo_id, blamer, rel, head, origin, line, head_line, history
        )
        found = result if result.memories else None
        with self._lock:
            self._hovers[key] = found
        return found

    def needs_blame(self, path: str | Path) -> bool:
        """Whether a document lookup of ``path`` would run a whole-file blame (for progress)."""
        try:
            _, blamer, rel = self.checkouts.locate(path)
            return blamer.cached(rel, blamer.repo.head()) is None
        except (LookupFailed, GitError):
            return False

    def document(
        self,
        path: str | Path,
        buffer_text: str | None = None,
        project: ProjectId | None = None,
        max_bytes: int | None = None,
        max_lines: int | None = None,
    ) -> DocumentMemories | None:
        """Every memory of a file by buffer line (1-based): one blame and one store query per
        (file, HEAD), remembered; unsaved edits are mapped in process, so lenses move with
        their lines and a typed line has none. None for a file (at HEAD or in the buffer)
        that is binary or over the limits (checked on every call)."""
        try:
            repo_id, blamer, rel = self.checkouts.locate(path)
            head = blamer.repo.head()
        except (LookupFailed, GitError):
            return None
        facts = None if buffer_text is None else self._text_facts(blamer, rel, buffer_text)
        if not self._within_limits(blamer, rel, head, facts, max_bytes, max_lines):
            return None
        self._settle_pending(project, repo_id, blamer, rel, head)
        scope = project or self.default_project or project_for(repo_id)

        def compute() -> DocumentMemories | None:
            try:
                blame = blamer.blame_file(rel, head)
            except GitError:
                return None
            return self.for_document(scope, repo_id, blame, blamer)

        doc = self._remembered(self._docs, (scope, repo_id, rel, head), compute)
        if doc is None:
            return None
        if buffer_text is None:
            return doc
        try:
            head_text = blamer.head_blob(rel, head).decode("utf-8", "replace")
        except GitError:
            return None
        mapping = self._buffer_to_head(rel, head, head_text, buffer_text)
        if mapping is None:
            return doc
        by_line: dict[int, tuple[LineMemory, ...]] = {}
        for index, head_line in enumerate(mapping):
            if head_line is not None and head_line in doc.by_line:
                by_line[index + 1] = doc.by_line[head_line]
        return DocumentMemories(repo_id, rel, by_line)

    def invalidate(self, repo: RepoId | None = None, project: ProjectId | None = None) -> int:
        """Forget every remembered answer of ``repo``/``project`` (None: any), and the buffer
        mappings and digests; returns how many answers were dropped. Blame is not cached
        here (gitio keys it by commit, so it never goes stale)."""

        def matches(key: tuple[Any, ...]) -> bool:
            return (repo is None or key[1] == repo) and (project is None or key[0] == project)

        with self._lock:
            dropped = _drop_where(self._docs, matches) + _drop_where(self._hovers, matches)
            self._maps.clear()
            self._digests.clear()
        return dropped

    def _settle_pending(
        self,
        project: ProjectId | None,
        repo_id: RepoId,
        blamer: Blamer,
        rel: str,
        head: CommitSha,
    ) -> None:
        """Anchor lines remembered in ``rel`` before they were committed, if a commit now
        holds them: looked at once per (file, HEAD), with one query per (repository, HEAD)
        for the files that have any. A failure leaves them waiting and the lookup goes on."""
        if self.pending is None:
            return
        scope = project or self.default_project or project_for(repo_id)
        key = (scope, repo_id, head)
        with self._lock:
            files = self._pending_files.get(key)
        if files is None:
            try:
                files = self.store.pending_files(scope, repo_id)
            except (StoreUnavailable, ContentError) as exc:
                log.debug("pending anchors of %s not read: %s", repo_id, exc)
                return
            with self._lock:
                files = self._pending_files.setdefault(key, files)
        with self._lock:
            if rel not in files:
                return
            files.discard(rel)  # looked at once per HEAD, whatever comes of it
        try:
            added = self.pending(scope, repo_id, blamer, rel, head)
        except (StoreUnavailable, ContentError, GitError) as exc:
            log.info("pending anchors of %s not resolved: %s", rel, exc)
            return
        if added:
            self.invalidate(repo_id, scope)

    def forget_pending(self, repo: RepoId, project: ProjectId) -> None:
        """Look for pending anchors of ``repo`` again (something was just remembered)."""
        with self._lock:
            for key in [k for k in self._pending_files if k[:2] == (project, repo)]:
                del self._pending_files[key]

    # -- lookups by request -------------------------------------------------------------------

    def project_for_repo(self, repo: RepoId) -> ProjectId:
        """The project a repository's lookups go to: the default, else one from its name."""
        return self.default_project or project_for(repo)

    def project_of(self, req: LookupRequest) -> ProjectId:
        """The request's project, else the service's default; ``project: required`` if none."""
        project = req.project or self.default_project
        if project is None:
            raise LookupInputError("project", "required")
        return project

    def known_repo(
        self,
        project: ProjectId,
        repo: RepoId | WorkTreePath | None,
        field_name: str = "repo",
    ) -> RepoId | None:
        """A request's repository as an identity: a path is resolved to the known work tree
        it is in; an identity must be a known work tree's or one ``project`` has memories in.
        LookupInputError names the field and the value otherwise."""
        if repo is None:
            return None
        identity = self.checkouts.identity(repo, field_name)
        if self.checkouts.has(identity) or self.store.repo_known(project, identity):
            return identity
        listed = sorted(
            {r.value for r in self.store.project_repos(project)}
            | {r.value for r in self.checkouts.identities()}
        )
        raise LookupInputError(
            field_name,
            f"{identity.value!r} is not known here: no work tree of it, and project "
            f"{project.value!r} has no memories in it (known: {', '.join(listed) or 'none'})",
        )

    def by_git(self, req: ByGitRequest) -> LookupResult:
        """Memories at a code location: the current lines mapped through blame to their origin
        in a work tree of the repository (``mapped``); with ``commit_sha``, the lines of that
        commit literally, and with no work tree of the repository here, the lines as stored
        in any commit (not ``mapped``); plus the nodes above them."""
        project = self.project_of(req)
        repo = self.known_repo(project, req.repo)
        if req.commit_sha is not None:
            return replace(self._by_git_literal(req, project, repo), mapped=False)
        if not (self.checkouts.has(repo) if repo is not None else self.checkouts.identities()):
            return self._by_git_as_stored(req, project, repo)
        return replace(self._by_git_blamed(req, project, repo), mapped=True)

    def _by_git_as_stored(
        self, req: ByGitRequest, project: ProjectId, repo: RepoId | None
    ) -> LookupResult:
        """No work tree of the repository is known here: the anchors of the file at the lines
        as stored (the seed's literal lookup), in any commit, newest first."""
        for name, given in (("at", req.at), ("history", req.history)):
            if given:
                where = "" if repo is None else f" of {repo.value!r}"
                raise LookupInputError(
                    name, f"needs a work tree{where} to blame in, and none is known here"
                )
        page = self.store.evidence_at_file_lines(
            project, repo, req.file, req.line_start, req.line_end
        )
        return replace(assemble(repo, page.rows), mapped=False, truncated=page.after is not None)

    def _by_git_blamed(
        self, req: ByGitRequest, project: ProjectId, repo: RepoId | None
    ) -> LookupResult:
        repo_id, blamer = self.checkouts.blamer(repo)
        try:
            at = None if req.at is None else blamer.repo.resolve_commit(req.at)
            if at is None:
                self._settle_pending(project, repo_id, blamer, req.file, blamer.repo.head())
            if req.line_start == req.line_end and req.line_start > 0:
                origin = blamer.origin(req.file, req.line_start, at)
                if origin is None:
                    raise LookupInputError(
                        "line", f"{req.line_start} is beyond the end of {req.file}"
                    )
                rev = at or blamer.repo.head()
                return self._at_origin(
                    project,
                    repo_id,
                    blamer,
                    req.file,
                    rev,
                    origin,
                    req.line_start,
                    req.line_start,
                    req.history,
                )
            blame = blamer.blame_file(req.file, at)
        except UnsafeArgument as exc:
            raise LookupInputError("line", str(exc).removeprefix("line: ")) from None
        except Untracked as exc:
            raise NotInRepository("file", str(exc)) from None
        except GitError as exc:
            raise LookupFailed(str(exc)) from None
        if req.line_start == 0:
            lines = range(1, len(blame.lines) + 1)
        else:
            if req.line_end > len(blame.lines):
                raise LookupInputError(
                    "lines",
                    f"{req.line_end} is beyond the end of {req.file} ({len(blame.lines)} lines)",
                )
            lines = range(req.line_start, req.line_end + 1)
        return self._from_blame(project, repo_id, blamer, blame, lines)

    def _from_blame(
        self,
        project: ProjectId,
        repo_id: RepoId,
        blamer: Blamer,
        blame: Blame,
        lines: Iterable[int],
    ) -> LookupResult:
        origins = [o for o in (blame.origin(n) for n in lines) if o is not None]
        page = self.store.runs_page(project, repo_id, origin_runs(origins))
        matched, lines_of = match_evidence(page.rows, origins)
        covered = {n for hits in lines_of.values() for n in hits}
        missed = [(o, o.line, o.line) for o in origins if o.line not in covered]
        found = self._find_rewritten(project, repo_id, blamer, blame.path, blame.rev, missed)
        result = _with_rewritten(repo_id, matched, lines_of, found)
        return replace(result, truncated=page.after is not None)

    def _at_origin(
        self,
        project: ProjectId,
        repo_id: RepoId,
        blamer: Blamer,
        rel: str,
        rev: CommitSha,
        origin: BlameLine,
        line: int,
        rev_line: int,
        history: int,
    ) -> LookupResult:
        """The memories of one line (``line`` as the caller numbers it, ``rev_line`` at
        ``rev``) from its origin: anchors there, else those of rewritten commits that landed
        there; with ``history``, those of the versions it replaced too."""
        rows = self.store.evidence_at_line(
            project, repo_id, origin.commit, origin.orig_path, origin.orig_line
        )
        found = (
            []
            if rows
            else self._find_rewritten(
                project, repo_id, blamer, rel, rev, [(origin, line, rev_line)]
            )
        )
        earlier = (
            earlier_versions(
                self.store,
                project,
                repo_id,
                blamer,
                origin,
                history,
                lambda c: self._rewrites.change(blamer.repo, c),
            )
            if history
            else []
        )
        lines_of: dict[Sha256Hash, list[int]] = {r.node.sha256: [line] for r in rows}
        return _with_rewritten(repo_id, rows, lines_of, found, earlier, line)

    def _find_rewritten(
        self,
        project: ProjectId,
        repo_id: RepoId,
        blamer: Blamer,
        rel: str,
        rev: CommitSha,
        missed: Sequence[tuple[BlameLine, int, int]],
    ) -> list[Found]:
        """``missed``: (origin, line as the caller numbers it, line at ``rev``)."""
        if not missed:
            return []
        hashes = self._hashes_at(blamer, rel, rev)
        if hashes is None:
            return []
        by_line, counts = hashes
        misses = [
            Miss(origin, line, by_line[at - 1] if 1 <= at <= len(by_line) else None)
            for origin, line, at in missed
        ]
        return self._rewrites.find(project, repo_id, blamer.repo, rev, misses, counts)

    def _hashes_at(
        self, blamer: Blamer, rel: str, rev: CommitSha
    ) -> tuple[list[int | None], Counter[int | None]] | None:
        """The text hash of each line of ``rel`` at ``rev``, and how often each occurs."""

        def compute() -> tuple[list[int | None], Counter[int | None]] | None:
            try:
                by_line = file_hashes(blamer.head_blob(rel, rev))
            except GitError:
                return None
            return by_line, Counter(by_line)

        return self._remembered(self._line_hashes, (str(blamer.repo.root), rel, rev), compute)

    def _remembered(
        self, cache: MutableMapping[_K, _V], key: _K, compute: Callable[[], _V | None]
    ) -> _V | None:
        """``cache[key]``, computed (outside the lock) and kept when missing; None is not
        kept."""
        with self._lock:
            hit = cache.get(key)
        if hit is None:
            hit = compute()
            if hit is not None:
                with self._lock:
                    cache[key] = hit
        return hit

    def _by_git_literal(
        self, req: ByGitRequest, project: ProjectId, repo: RepoId | None
    ) -> LookupResult:
        assert req.commit_sha is not None
        commit = self._resolve_commit(project, repo, req.commit_sha)
        if commit is None:
            return LookupResult(repo, ())
        if repo is None:
            ids = self.checkouts.identities()
            if len(ids) != 1:
                raise LookupInputError("repo", "required for a lookup by commit_sha")
            repo = ids[0]
        if req.line_start == req.line_end and req.line_start > 0:
            rows = self.store.evidence_at_line(project, repo, commit, req.file, req.line_start)
            return assemble(repo, rows)
        first, last = (1, MAX_LINE) if req.line_start == 0 else (req.line_start, req.line_end)
        return assemble(
            repo, self.store.evidence_for_runs(project, repo, [(commit, req.file, first, last)])
        )

    def _resolve_commit(
        self, project: ProjectId, repo: RepoId | None, prefix: str
    ) -> CommitSha | None:
        if len(prefix) in (40, 64):
            return CommitSha(prefix)
        found = self.store.commits_by_prefix(project, repo, prefix)
        if len(found) > 1:
            raise LookupInputError("commit_sha", f"{prefix!r} is ambiguous; give more digits")
        return found[0] if found else None

    def by_commit(self, req: ByCommitRequest) -> LookupResult:
        """Every L0 anchored in the commit, plus the nodes above them: a page of ``limit``
        anchors (after ``cursor``), with the cursor of the next when more follow."""
        repo, fetch, lookup = self._commit_pages(req)
        if fetch is None:
            return LookupResult(repo, ())
        return self._paged(repo, fetch(self._after(req.cursor, "by-commit", lookup)), lookup)

    def by_author(self, req: ByAuthorRequest) -> LookupResult:
        """L0 evidence from the author's commits, newest commit first, plus the nodes above
        it: a page of ``limit`` anchors (after ``cursor``), with the cursor of the next when
        more follow."""
        repo, fetch, lookup = self._author_pages(req)
        return self._paged(repo, fetch(self._after(req.cursor, "by-author", lookup)), lookup)

    def every_page(self, req: ByCommitRequest | ByAuthorRequest) -> LookupResult:
        """A paged lookup followed to its end (from ``cursor``, if given): the evidence of
        every page, answered as one."""
        if isinstance(req, ByCommitRequest):
            repo, fetch, lookup = self._commit_pages(req)
            if fetch is None:
                return LookupResult(repo, ())
        else:
            repo, fetch, lookup = self._author_pages(req)
        after = self._after(req.cursor, lookup.kind, lookup)
        rows: list[Evidence] = []
        while True:
            page = fetch(after)
            rows.extend(page.rows)
            if page.after is None:
                return assemble(repo, rows)
            after = page.after

    def _commit_pages(
        self, req: ByCommitRequest
    ) -> tuple[RepoId | None, Callable[[dict[str, Any] | None], EvidencePage] | None, _Lookup]:
        """The repository of a by-commit request, the pages of its anchors (None: no such
        commit), and what identifies the lookup in a cursor."""
        project = self.project_of(req)
        repo = self.known_repo(project, req.repo)
        commit = self._resolve_commit(project, repo, req.commit_sha)
        if commit is None:
            return repo, None, _Lookup("by-commit", (project.value, _name(repo), req.commit_sha))
        lookup = _Lookup("by-commit", (project.value, _name(repo), commit.value))

        def fetch(after: dict[str, Any] | None) -> EvidencePage:
            return self.store.commit_page(project, repo, [commit], req.limit, after)

        return repo, fetch, lookup

    def _author_pages(
        self, req: ByAuthorRequest
    ) -> tuple[RepoId | None, Callable[[dict[str, Any] | None], EvidencePage], _Lookup]:
        """The repository of a by-author request, the pages of its anchors, and what
        identifies the lookup in a cursor."""
        project = self.project_of(req)
        repo = self.known_repo(project, req.repo)
        authors = {req.author}
        if repo is not None or len(self.checkouts.identities()) == 1:
            try:
                _, blamer = self.checkouts.blamer(repo)
                authors |= blamer.repo.mailmap(req.author)
            except (LookupInputError, GitError):
                pass  # no checkout to ask: match what was stored (already mailmap-normalized)
        lookup = _Lookup("by-author", (project.value, _name(repo), req.author.lower()))

        def fetch(after: dict[str, Any] | None) -> EvidencePage:
            return self.store.author_page(project, repo, authors, req.limit, after)

        return repo, fetch, lookup

    @staticmethod
    def _after(cursor: PageCursor | None, kind: str, lookup: _Lookup) -> dict[str, Any] | None:
        """The key a request's cursor gives (None: the first page); ``cursor: ...`` when it
        was given by another lookup."""
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

    @staticmethod
    def _paged(repo: RepoId | None, page: EvidencePage, lookup: _Lookup) -> LookupResult:
        """A page's answer, with the cursor of the next page when more follow."""
        result = assemble(repo, page.rows)
        if page.after is None:
            return result
        names = _AFTER_KEYS if lookup.kind == "by-commit" else (*_AFTER_KEYS, "after_date")
        after = tuple(_cursor_value(page.after[name]) for name in names)
        cursor = PageCursor(lookup.kind, lookup.fingerprint, after)
        return replace(result, truncated=True, cursor=cursor.token())

    def query(self, req: QueryRequest) -> LookupResult:
        """Full-text search, best first; with ``git_repo`` each result is cited by its evidence
        in that repository (for L1/L2: the evidence they were built from). Each result's
        parents are every node above it, in the order every lookup gives them."""
        project = self.project_of(req)
        git_repo = self.known_repo(project, req.git_repo, "git_repo")
        found = self.store.search(project, req.query, req.limit + 1)
        truncated = len(found) > req.limit
        nodes = [n for n, _ in found[: req.limit]]
        known = {
            w.node.sha256: w.node for w in self.store.walk_up(project, [n.sha256 for n in nodes])
        }
        known.update((n.sha256, n) for n in nodes)
        citations: dict[Sha256Hash, Citation] = {}
        if git_repo is not None and nodes:
            below = self.store.evidence_below(project, [n.sha256 for n in nodes])
            l0s = {s for shas in below.values() for s in shas}
            first: dict[Sha256Hash, Citation] = {}
            for row in self.store.evidence_for_nodes(project, git_repo, l0s):
                c = citation_of(row)
                if row.node.sha256 not in first or citation_key(c) < citation_key(
                    first[row.node.sha256]
                ):
                    first[row.node.sha256] = c
            for n in nodes:
                options = [first[s] for s in below.get(n.sha256, []) if s in first]
                if options:
                    citations[n.sha256] = min(options, key=citation_key)
        memories = []
        for n in nodes:
            citation = citations.get(n.sha256)
            parents = tuple(
                Memory(p, citation) for p in nodes_above(n.parents, known) if p.sha256 != n.sha256
            )
            memories.append(Memory(n, citation, (citation,) if citation else (), parents))
        return LookupResult(git_repo, tuple(memories), truncated=truncated)

    def for_document(
        self, project: ProjectId, repo_id: RepoId, blame: Blame, blamer: Blamer
    ) -> DocumentMemories:
        """Every memory of a blamed file, by current line: one store query works out, from
        what blame says the lines came from, the blocks of lines sharing memories (each with
        its citation) and their commits; no node text is read."""
        blocks, commits = self.store.lens_blocks(project, repo_id, _blame_runs(blame.lines))
        by_line: dict[int, tuple[LineMemory, ...]] = {}
        # One LineMemory per (node, commit): lenses need who and when, not each anchor.
        memories: list[LineMemory] = []
        for first, last, ids, *every in blocks:
            if every[0] is not None:  # the first block: every memory, by id from 1
                memories = [
                    LineMemory(Sha256Hash(node), Citation(repo_id, file, start, end, commits[sha]))
                    for node, sha, file, start, end in zip(*every, strict=True)
                ]
            on_block = tuple(memories[i - 1] for i in ids)
            by_line.update(dict.fromkeys(range(first, last + 1), on_block))
        missed = [(o, o.line, o.line) for o in blame.lines if o.line not in by_line]
        rewritten: dict[int, list[LineMemory]] = {}
        for f in self._find_rewritten(project, repo_id, blamer, blame.path, blame.rev, missed):
            memory = LineMemory(f.evidence.node.sha256, citation_of(f.evidence))
            for line in f.lines:
                rewritten.setdefault(line, []).append(memory)
        for line, found in rewritten.items():
            by_line[line] = tuple(dict.fromkeys((*by_line.get(line, ()), *found)))
        return DocumentMemories(repo_id, blame.path, dict(sorted(by_line.items())))


# The keyset of an anchor in a cursor, in order (by-author adds its commit's date).
_AFTER_KEYS = ("after_repo", "after_commit", "after_file", "after_start", "after_end", "after_node")


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


def _name(repo: RepoId | None) -> str:
    return "" if repo is None else repo.value


def _cursor_value(value: object) -> str | int:
    """A key part as a cursor carries it (a date as ISO 8601, exact to the microsecond)."""
    if isinstance(value, datetime):
        return value.isoformat()
    assert isinstance(value, str | int)
    return value


def _blame_runs(lines: Iterable[BlameLine]) -> list[tuple[CommitSha, str, int, int, int]]:
    """Blamed lines as the store's lens_blocks takes them: runs ``(commit, original path,
    first original line, first current line, length)`` of consecutive current lines from
    consecutive original lines of one file at one commit."""
    runs: list[tuple[CommitSha, str, int, int, int]] = []
    for o in lines:
        if runs:
            commit, path, orig_first, first, n = runs[-1]
            if (
                o.commit == commit
                and o.orig_path == path
                and o.orig_line == orig_first + n
                and o.line == first + n
            ):
                runs[-1] = (commit, path, orig_first, first, n + 1)
                continue
        runs.append((o.commit, o.orig_path, o.orig_line, o.line, 1))
    return runs


def _with_rewritten(
    repo_id: RepoId,
    rows: Sequence[Evidence],
    lines_of: dict[Sha256Hash, list[int]],
    found: Sequence[Found],
    earlier: Sequence[tuple[Evidence, Earlier]] = (),
    line: int | None = None,
) -> LookupResult:
    """Evidence found at the lines' origins, plus that of rewritten commits (marked as
    landed) and of earlier versions of ``line`` (marked as such); a node found directly is
    shown as found directly."""
    direct = {r.node.sha256 for r in rows}
    every = list(rows)
    lines = {sha: list(hits) for sha, hits in lines_of.items()}
    for f in found:
        every.append(f.evidence)
        lines.setdefault(f.evidence.node.sha256, []).extend(f.lines)
    landed = {sha: how for sha, how in landed_nodes(found).items() if sha not in direct}
    earlier_of: dict[Sha256Hash, Earlier] = {}
    for row, about in earlier:
        sha = row.node.sha256
        if sha in direct or sha in landed:
            continue
        every.append(row)
        earlier_of.setdefault(sha, about)
        if line is not None:
            lines.setdefault(sha, []).append(line)
    return assemble(repo_id, every, lines, landed, earlier_of)


def _drop_where(cache: MutableMapping[_K, Any], doomed: Callable[[_K], bool]) -> int:
    """Remove the keys ``doomed`` picks; how many went."""
    keys = [k for k in cache if doomed(k)]
    for k in keys:
        del cache[k]
    return len(keys)


@dataclass(frozen=True, slots=True)
class _TextFacts:
    """What the limits look at in a text, and its sha256 (to recognise HEAD's text)."""

    sha256: str
    size: int
    lines: int
    binary: bool

    @classmethod
    def of(cls, repo: GitRepo, data: bytes, hashed: bool = True) -> _TextFacts:
        """The facts of ``data`` (lines as git counts them; ``hashed``: with its sha256)."""
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        digest = hashlib.sha256(data).hexdigest() if hashed else ""
        return cls(digest, len(data), lines, repo.is_binary(data))

    def within(self, max_bytes: int | None, max_lines: int | None) -> bool:
        """A text file within both limits."""
        return (
            not self.binary
            and (max_bytes is None or self.size <= max_bytes)
            and (max_lines is None or self.lines <= max_lines)
        )
