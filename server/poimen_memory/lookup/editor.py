"""Editor lookups: the memories of a buffer line (hover) and of a whole buffer (code lens),
unsaved edits mapped to HEAD in process, each checked against the limits on every call and
answered from the caches while HEAD stays."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

from poimen_memory.domain import CommitSha, ProjectId, RepoId
from poimen_memory.errors import StoreUnavailable, may_wait
from poimen_memory.gitio import BlameEntry, BlameLine, Blamer, GitError, map_buffer_to_head
from poimen_memory.lookup.core import FileAt, LookupCore, TextFacts
from poimen_memory.lookup.errors import LookupFailed
from poimen_memory.lookup.lenses import DocumentLenses
from poimen_memory.lookup.located import LocatedLookups
from poimen_memory.lookup.requests import DocumentRequest, HoverRequest
from poimen_memory.lookup.results import (
    HOVER_SHOWN,
    DocumentMemories,
    LineMemory,
    LookupResult,
)
from poimen_memory.store import Candidate
from poimen_memory.store.connector import StoreRejected

__all__ = ["EditorLookups"]

log = logging.getLogger(__name__)

_HoverKey = tuple[ProjectId, RepoId, CommitSha, str, int, int]
"""What a hover's answer is remembered by: project, repository, origin, history."""


def _hover_key(scope: ProjectId, repo_id: RepoId, origin: BlameLine, history: int) -> _HoverKey:
    return (scope, repo_id, origin.commit, origin.orig_path, origin.orig_line, history)


class EditorLookups:
    """Hover and document lookups of open (maybe edited) files."""

    def __init__(self, core: LookupCore, located: LocatedLookups, lenses: DocumentLenses) -> None:
        self._core = core
        self._located = located
        self._lenses = lenses
        # Runs the speculative blame of a hover while the blob is read.
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="poimen-lookup")

    def _open(
        self, req: DocumentRequest
    ) -> tuple[RepoId, Blamer, str, CommitSha, TextFacts | None] | None:
        """The document's repository, blamer, path in the tree and HEAD, and the facts of its
        buffer's text (None: the file as saved); None outside a work tree or when git fails."""
        try:
            repo_id, blamer, rel = self._core.checkouts.locate(req.file)
            head = blamer.repo.head()
        except (LookupFailed, GitError):
            return None
        facts = None if req.text is None else self._text_facts(blamer, rel, req.text)
        return repo_id, blamer, rel, head, facts

    def hover(self, req: HoverRequest) -> LookupResult | None:
        """The memories of one buffer line (1-based): mapped to HEAD in process, then through
        blame to its origin (and, on a miss, to rewritten commits whose change landed there;
        with ``history``, also the memories of the versions it replaced, that many back). None
        for a line without memories or one typed in the buffer, and for a file (at HEAD or in
        the buffer) that is binary or over the limits (``blame.max_file_*``): checked on every
        hover.

        A buffer whose text is HEAD's (recognised by its hash) needs no blob; on a cold file
        the blob is read while ``git blame -L`` runs, so the first hover costs one blame."""
        line, buffer_text, project, history = req.line, req.text, req.project, req.history
        max_bytes, max_lines = self._limits()
        opened = self._open(req)
        if opened is None:
            return None
        repo_id, blamer, rel, head, facts = opened
        known = blamer.text_sha(rel, head)
        # Unknown text: blame the line as if the buffer were HEAD while the blob is read.
        # (Answered only if the buffer is HEAD's text: then its line is HEAD's line.)
        speculative: Future[BlameLine | None] | None = None
        early: dict[_HoverKey, Future[LookupResult | None]] = {}
        unknown = facts is not None and known is None and facts.within(max_bytes, max_lines)
        if unknown and not history and blamer.latest(rel) is not None:
            # A file blamed here (it could have memories then) whose text at HEAD is not
            # known yet (HEAD moved, say): git blames the line beside the checks below, not
            # after them. (Found quiet meanwhile, the file has had that one line blamed.)
            may_wait()
            speculative = self._pool.submit(blamer.origin, rel, line, head)
        self._core.settle_pending(project, repo_id, blamer, rel, head)
        scope = project or self._core.project_for_repo(repo_id)
        where = FileAt(scope, repo_id, blamer, rel, head)
        if not history and self._core.quiet(scope, repo_id, blamer, rel, head):
            if speculative is not None:
                speculative.cancel()
            return None  # no memory of the project can be on this file: no blame
        if unknown and speculative is None:
            may_wait()
            proposed, early = self._early(where, line, line, history)
            speculative = self._pool.submit(blamer.origin, rel, line, head, proposed=proposed)
        if not self._within_limits(blamer, rel, head, facts, max_bytes, max_lines, buffer_text):
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
                return self._answer(where, line, line, origin, history, early)
            try:
                mapping = self._buffer_to_head(blamer, rel, head, buffer_text)
            except GitError:
                return None
            if mapping is not None:
                head_line = mapping[line - 1] if 1 <= line <= len(mapping) else None
        if head_line is None:
            return None
        proposed, early = self._early(where, line, head_line, history)
        try:
            origin = blamer.origin(rel, head_line, head, warm=True, proposed=proposed)
        except GitError:
            return None
        return self._answer(where, line, head_line, origin, history, early)

    def document(self, req: DocumentRequest) -> DocumentMemories | None:
        """Every memory of a file by buffer line (1-based): one blame and one store query per
        (file, HEAD), remembered; unsaved edits are mapped in process, so lenses move with
        their lines and a typed line has none. None for a file (at HEAD or in the buffer)
        that is binary or over the limits (checked on every call)."""
        buffer_text, project = req.text, req.project
        max_bytes, max_lines = self._limits()
        opened = self._open(req)
        if opened is None:
            return None
        repo_id, blamer, rel, head, facts = opened
        if not self._within_limits(blamer, rel, head, facts, max_bytes, max_lines, buffer_text):
            return None
        self._core.settle_pending(project, repo_id, blamer, rel, head)
        scope = project or self._core.project_for_repo(repo_id)

        def compute() -> DocumentMemories | None:
            if self._core.quiet(scope, repo_id, blamer, rel, head):
                return DocumentMemories(repo_id, rel, {})  # nothing to find: no blame
            # The store works on the lines blame has found while it finds the rest; the lines'
            # text hashes, and the anchors holding those texts (rewritten commits' candidates,
            # chosen from once blame is done), are read meanwhile.
            stream = self._lenses.stream(scope, repo_id)
            where = FileAt(scope, repo_id, blamer, rel, head)
            # Started once git has: its hashing would otherwise hold the interpreter while
            # this thread starts git.
            prefetching: list[Future[list[Candidate] | None]] = []

            def feed(entry: BlameEntry) -> None:
                if not prefetching:
                    prefetching.append(self._pool.submit(self._lenses.prefetch, where))
                stream.feed(entry)

            try:
                blame = blamer.blame_file(rel, head, on_entry=feed)
            except GitError:
                stream.cancel()
                return None
            except BaseException:
                stream.cancel()
                raise
            if not prefetching:  # no entry from git: the blame was known
                prefetching.append(self._pool.submit(self._lenses.prefetch, where))
            hashing = prefetching[0]
            wait([hashing])  # hashes kept by then: not taken twice, by two threads at once
            try:
                known = hashing.result()
            except (StoreUnavailable, StoreRejected, GitError) as exc:
                log.debug("candidates of %s not read ahead: %s", rel, exc)
                known = None
            return self._lenses.complete(stream, scope, repo_id, blame, blamer, known)

        doc = self._core.documents.get_or_compute((scope, repo_id, rel, head), compute)
        if doc is None:
            return None
        if buffer_text is None or (
            facts is not None and blamer.text_sha(rel, head) == facts.sha256
        ):
            return doc  # the file as saved, or a buffer of HEAD's text
        try:
            mapping = self._buffer_to_head(blamer, rel, head, buffer_text)
        except GitError:
            return None
        if mapping is None:
            return doc
        by_line: dict[int, tuple[LineMemory, ...]] = {}
        for index, head_line in enumerate(mapping):
            if head_line is not None and head_line in doc.by_line:
                by_line[index + 1] = doc.by_line[head_line]
        return DocumentMemories(repo_id, rel, by_line, doc.commits)

    def prepare(self, req: DocumentRequest) -> None:
        """Look now at what the first hover or code lens of a file just opened asks before
        its blame: the buffer's facts, the file's lines waiting for a commit, whether the
        project can have memories in it, and HEAD's facts (each remembered per file and
        HEAD, so that lookup finds them). No blame runs. Failures are left for that lookup
        to meet and report."""
        opened = self._open(req)
        if opened is None:
            return
        repo_id, blamer, rel, head, facts = opened
        self._core.settle_pending(req.project, repo_id, blamer, rel, head)
        scope = req.project or self._core.project_for_repo(repo_id)
        if self._core.quiet(scope, repo_id, blamer, rel, head):
            return
        self._within_limits(blamer, rel, head, facts, *self._limits(), req.text)

    def needs_blame(self, path: str | Path) -> bool:
        """Whether a document lookup of ``path`` would run a whole-file blame (for progress)."""
        try:
            _, blamer, rel = self._core.checkouts.locate(path)
            return blamer.cached(rel, blamer.repo.head()) is None
        except (LookupFailed, GitError):
            return False

    def _limits(self) -> tuple[int | None, int | None]:
        """The most bytes and lines of a file the editor lookups look at (None: any)."""
        blame = self._core.settings.blame
        return blame.max_file_bytes, blame.max_file_lines

    def _within_limits(
        self,
        blamer: Blamer,
        rel: str,
        head: CommitSha,
        buffer: TextFacts | None,
        max_bytes: int | None,
        max_lines: int | None,
        text: str | None = None,
    ) -> bool:
        """The one check of the limits, made by every editor lookup (each hover, each
        document), whatever is cached: the buffer (when the file is open) and the file at HEAD
        are both text within ``max_bytes`` and ``max_lines``. HEAD's facts are remembered
        per (file, HEAD): the buffer's when it is HEAD's text (recognised by its hash, or by
        its id as git's file against the one in HEAD's tree), else the blob's (read once)."""
        if buffer is not None and not buffer.within(max_bytes, max_lines):
            return False

        def compute() -> TextFacts | None:
            try:
                if buffer is not None and (
                    blamer.text_sha(rel, head) == buffer.sha256
                    or (
                        text is not None
                        and blamer.same_text(rel, head, text, buffer.git_id, buffer.sha256)
                    )
                ):
                    return buffer
                return TextFacts.of(blamer.repo, blamer.head_blob(rel, head), hashed=False)
            except GitError:
                return None

        key = (str(blamer.repo.root), rel, head)
        facts = self._core.head_facts.get_or_compute(key, compute)
        return facts is not None and facts.within(max_bytes, max_lines)

    def _buffer_to_head(
        self, blamer: Blamer, rel: str, head: CommitSha, buffer_text: str | None
    ) -> list[int | None] | None:
        """Buffer line (0-based) -> HEAD line; None when the buffer is HEAD's text. A buffer
        mapped before is not compared with HEAD's text again (nor is that text decoded)."""
        if buffer_text is None:
            return None

        def compute() -> list[int | None] | None:
            head_text = blamer.head_blob(rel, head).decode("utf-8", "replace")
            return None if buffer_text == head_text else map_buffer_to_head(head_text, buffer_text)

        return self._core.buffer_maps.get_or_compute((rel, head, hash(buffer_text)), compute)

    def _text_facts(self, blamer: Blamer, rel: str, text: str) -> TextFacts:
        """sha256, size, line count and binariness of a buffer's text, remembered per text
        (str hashes are cached on the object, so a warm hover does not rehash a large
        buffer)."""
        key = (rel, len(text), hash(text))
        found = self._core.digests.get_or_compute(
            key, lambda: TextFacts.of(blamer.repo, text.encode("utf-8", "surrogateescape"))
        )
        assert found is not None  # computed facts are never None
        return found

    def _early(
        self, where: FileAt, line: int, head_line: int, history: int
    ) -> tuple[Callable[[BlameLine], None], dict[_HoverKey, Future[LookupResult | None]]]:
        """A listener for an origin proposed before it is checked, and what it started: this
        line's answer at that origin, looked up while the origin is checked. It is neither
        shown nor remembered unless the checked origin is that one: an answer is made for a
        line (its number, and its text where a rewritten commit is matched), so one made
        for an origin that failed its check would be wrong for the line that does come from
        there."""
        started: dict[_HoverKey, Future[LookupResult | None]] = {}

        def proposed(origin: BlameLine) -> None:
            key = _hover_key(where.project, where.repo_id, origin, history)
            if key in started or self._core.hovers.get(key) is not None:
                return
            started[key] = self._pool.submit(
                self._located.at_origin, where, origin, line, head_line, history, HOVER_SHOWN
            )

        return proposed, started

    def _answer(
        self,
        where: FileAt,
        line: int,
        head_line: int,
        origin: BlameLine | None,
        history: int = 0,
        early: dict[_HoverKey, Future[LookupResult | None]] | None = None,
    ) -> LookupResult | None:
        """The answer of a hover of ``where`` (its project's) from the line's blame origin,
        remembered per origin (and ``history``); None when it has no memories. ``early``:
        answers started for origins proposed before they were checked (one is waited for
        if it is this origin's). The whole file's blame, for the next hovers, is started once
        the answer is known: reading it in holds the interpreter, and this answer should not
        wait for that."""
        result = None
        if origin is not None:
            key = _hover_key(where.project, where.repo_id, origin, history)
            pending = None if early is None else early.get(key)
            if pending is not None:
                result = pending.result()  # made for this line at its checked origin
                if result is not None:
                    self._core.hovers.put(key, result)
            else:
                result = self._core.hovers.get_or_compute(
                    key,
                    lambda: self._located.at_origin(
                        where, origin, line, head_line, history, HOVER_SHOWN
                    ),
                )
        where.blamer.warm(where.file, where.rev)
        return result if result is not None and result.memories else None
