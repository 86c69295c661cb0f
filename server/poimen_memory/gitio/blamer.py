"""Blame with a cache: whole files for code lens, single lines fast for a cold hover.

The blames found without running git blame (a shared row, or carried forward from a
checkpoint) come from gitio.reuse.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
from collections.abc import Callable

from cachetools import LRUCache

from poimen_memory.domain import CommitSha
from poimen_memory.errors import may_wait
from poimen_memory.gitio.blame import Blame, BlameEntry, BlameLine
from poimen_memory.gitio.cache import (
    FILE_TEXTS,
    LAST_COMMITS,
    LINE_ORIGINS,
    TEXT_DIGESTS,
    WARMING,
    BlameCache,
    CacheKey,
)
from poimen_memory.gitio.errors import GitError
from poimen_memory.gitio.incremental import touching
from poimen_memory.gitio.meanwhile import Meanwhile
from poimen_memory.gitio.repo import GitRepo
from poimen_memory.gitio.reuse import LADDER, BlameReuse, later
from poimen_memory.gitio.shared import SharedBlames

__all__ = ["Blamer"]

_FileAt = tuple[str, CommitSha]  # (path, revision)


class Blamer:
    """Blames files of one repository through a BlameCache.

    The cache key needs the last commit that touched the file; that costs one git process
    per (file, HEAD) and is remembered, so warm requests spawn no git at all. Every layer
    in memory is a bounded LRU (sizes in gitio.cache) behind one lock.
    """

    def __init__(
        self, repo: GitRepo, cache: BlameCache, shared: SharedBlames | None = None
    ) -> None:
        self.repo = repo
        self.cache = cache
        self.shared = shared
        self.sources: dict[str, int] = {"git": 0, "incremental": 0, "shared": 0}
        self._lock = threading.Lock()
        self._scope: str | None = None
        self._last: LRUCache[_FileAt, CommitSha] = LRUCache(LAST_COMMITS)
        self._texts: LRUCache[_FileAt, bytes] = LRUCache(FILE_TEXTS)
        self._digests: LRUCache[_FileAt, str] = LRUCache(TEXT_DIGESTS)
        # Files at HEAD being read by one thread, which the others wait for.
        self._reading: dict[_FileAt, threading.Event] = {}
        # Lines blamed one by one, by (path, rev, line, the blame settings' fingerprint).
        self._lines: LRUCache[tuple[str, CommitSha, int, str], BlameLine | None] = LRUCache(
            LINE_ORIGINS
        )
        self._warming: LRUCache[_FileAt, bool] = LRUCache(WARMING)
        self._moved: set[_FileAt] = set()  # (file, HEAD) whose last commit is being found
        # path -> the last commit of the whole-file blame kept last for it here: where a
        # hover after HEAD moved traces its line from (HEAD moving does not forget it).
        self._latest: LRUCache[str, CommitSha] = LRUCache(LAST_COMMITS)
        self._reuse = BlameReuse(self)

    def invalidate(self) -> None:
        """Forget everything remembered in memory (after a checkout or a settings change):
        keys, texts, digests, single lines, background blames, and the repository's HEAD
        and blame settings. The persistent cache stays: its keys say what they depend on."""
        with self._lock:
            for layer in (
                self._last,
                self._texts,
                self._digests,
                self._lines,
                self._warming,
                self._latest,
            ):
                layer.clear()
            self._scope = None
        self.repo.invalidate()

    def forget(self) -> None:
        """The same as invalidate()."""
        self.invalidate()

    def _repo_key(self) -> str:
        # The repository part of every cache key: its identity and where its work tree is.
        scope = self._scope
        if scope is None:
            seed = f"{self.repo.identity().value}\x00{self.repo.root}"
            scope = hashlib.sha256(seed.encode("utf-8", "surrogateescape")).hexdigest()[:32]
            self._scope = scope
        return scope

    def _key(self, path: str, last: CommitSha) -> CacheKey:
        return CacheKey(self._repo_key(), path, last, self.repo.blame_fingerprint())

    def key(self, path: str, rev: CommitSha) -> CacheKey:
        """The cache key of ``path`` at ``rev`` (Untracked if the file is not there)."""
        last = self._known_last(path, rev)
        if last is None:
            last = self.repo.last_commit(path, rev)
            self._remember_last(path, rev, last)
        return self._key(path, last)

    def keep(self, path: str, last: CommitSha, blame: Blame) -> None:
        """Put the whole-file blame of ``path`` at ``last`` in the cache, as the file's latest."""
        self.cache.put(self._key(path, last), blame)
        if blame.complete:
            with self._lock:
                self._latest[path] = last

    def latest(self, path: str) -> CommitSha | None:
        """The last commit of the whole-file blame of ``path`` kept last here, if any."""
        with self._lock:
            return self._latest.get(path)

    def _known_last(self, path: str, rev: CommitSha) -> CommitSha | None:
        with self._lock:
            last = self._last.get((path, rev))
        if last is None:
            remembered = self.cache.head_file(self._repo_key(), path, rev)
            if remembered is not None:
                last = remembered[0]
                with self._lock:
                    self._last[(path, rev)] = last
                    self._digests[(path, rev)] = remembered[1]
        return last

    def _remember_last(self, path: str, rev: CommitSha, last: CommitSha) -> None:
        with self._lock:
            self._last[(path, rev)] = last
            text_sha = self._digests.get((path, rev))
        if text_sha is not None:
            self.cache.put_head_file(self._repo_key(), path, rev, last, text_sha)

    def same_text(self, path: str, rev: CommitSha, text: str, git_id: str, text_sha: str) -> bool:
        """Whether the file at ``rev`` is ``text`` (an editor's buffer), whose id as git's
        file is ``git_id`` and whose sha256 is ``text_sha``: told by the id in ``rev``'s
        trees, the file unread. If so, the text's bytes are remembered as the file's, as
        ``head_blob`` would have read them."""
        if not git_id or self.repo.file_id(rev, path) != git_id:
            return False
        self._keep_text(path, rev, text.encode("utf-8", "surrogateescape"), text_sha)
        return True

    def _keep_text(self, path: str, rev: CommitSha, data: bytes, text_sha: str) -> None:
        """Remember ``data`` (its sha256 ``text_sha``) as the file at ``rev``, and the
        digest on disk once the last commit touching the file is known."""
        key = (path, rev)
        with self._lock:
            self._texts[key] = data
            self._digests[key] = text_sha
            last = self._last.get(key)
        if last is not None:
            self.cache.put_head_file(self._repo_key(), path, rev, last, text_sha)

    def text_sha(self, path: str, rev: CommitSha) -> str | None:
        """sha256 of the file's text at ``rev`` if known (memory or the persistent cache), so
        an unchanged buffer is recognised without reading the blob."""
        with self._lock:
            known = self._digests.get((path, rev))
        if known is None:
            self._known_last(path, rev)
            with self._lock:
                known = self._digests.get((path, rev))
        return known

    def cached(self, path: str, rev: CommitSha, *, find_last: bool = True) -> Blame | None:
        """The whole-file blame if it is cached (memory or disk); never runs a blame. Without
        ``find_last``, no git runs at all: None unless the last commit touching the file at
        ``rev`` (the cache's key) is known already."""
        if find_last:
            return self.cache.get(self.key(path, rev), rev)
        last = self._known_last(path, rev)
        return None if last is None else self.cache.get(self._key(path, last), rev)

    def blame_file(
        self,
        path: str,
        rev: CommitSha | None = None,
        on_entry: Callable[[BlameEntry], None] | None = None,
    ) -> Blame:
        """The whole-file blame of ``path`` at ``rev`` (HEAD by default): from the local
        cache, else the shared one, else from the nearest cached ancestor's blame and the
        commits since (identical to git's), else from ``git blame``; then cached. When git
        blames it, ``on_entry`` gets each entry as git finds it (else it is never called)."""
        return self.blame_known(path, rev, on_entry)[0]

    def blame_known(
        self,
        path: str,
        rev: CommitSha | None = None,
        on_entry: Callable[[BlameEntry], None] | None = None,
    ) -> tuple[Blame, str]:
        """blame_file() and where the answer came from: ``cache``, ``shared``,
        ``incremental`` or ``git`` (``mem blame`` shows it)."""
        at = self.repo.head() if rev is None else rev
        if self._known_last(path, at) is None and not self._reusable(path):
            # Nothing kept here or shared can answer for this file: git blames it now, and
            # the last commit touching it (the cache key) is found meanwhile.
            key, blame = self._blame_first(path, at, on_entry)
            source = "git"
        else:
            key = self.key(path, at)
            hit = self.cache.get(key, at)
            if hit is not None:
                return hit, "cache"
            blame, source = self._compute(path, key.commit, on_entry)
        self.keep(path, key.commit, blame)
        if source != "shared":
            self._reuse.share(blame)
        return self.cache.get(key, at) or blame, source

    def _reusable(self, path: str) -> bool:
        """Whether a blame of ``path`` is kept here or shared (under these settings), from
        which the one asked for might come without git blame."""
        return self.cache.has_path(self._repo_key(), path, self.repo.blame_fingerprint()) or (
            self.shared is not None
            and self.shared.has_path(path, self.repo.shared_blame_fingerprint())
        )

    def _blame_first(
        self, path: str, at: CommitSha, on_entry: Callable[[BlameEntry], None] | None
    ) -> tuple[CacheKey, Blame]:
        """git's blame of ``path`` at ``at`` (the same lines as at the last commit touching
        it), while another git process finds that commit; the blame is labelled with it."""
        finding = Meanwhile(lambda: self.repo.last_commit(path, at), "poimen-last-commit")
        try:
            self.sources["git"] += 1
            blame = self.repo.blame(path, at, on_entry=on_entry)
        finally:
            finding.wait()
        last = finding.result()
        self._remember_last(path, at, last)
        return self._key(path, last), blame.relabelled(last)

    def _compute(
        self, path: str, last: CommitSha, on_entry: Callable[[BlameEntry], None] | None
    ) -> tuple[Blame, str]:
        known = self._reuse.known(path, last)
        if known is not None:
            return known
        self.sources["git"] += 1
        return self.repo.blame(path, last, on_entry=on_entry), "git"

    def origin(
        self,
        path: str,
        line: int,
        rev: CommitSha | None = None,
        *,
        warm: bool = False,
        proposed: Callable[[BlameLine], None] | None = None,
    ) -> BlameLine | None:
        """The origin of one line: from the cached blame (one row of the persistent cache
        after a restart), else ``git blame -L n,n`` at ``rev`` (its answer remembered).
        ``warm`` then starts the whole-file blame in the background. ``proposed`` hears an
        origin read before it is checked (a shared row's line, which this repository then
        vouches for): work that depends on that origin alone may start meanwhile; only the
        origin returned is the answer."""
        at = self.repo.head() if rev is None else rev
        asked = (path, at, line, self.repo.blame_fingerprint())
        with self._lock:  # a line blamed before (in memory: looked at first)
            if asked in self._lines:
                return self._lines[asked]
        last = self._known_last(path, at)
        if last is not None:
            found = self.cache.line(self._key(path, last), line)
            if found is not False:
                assert found is None or isinstance(found, BlameLine)
                return found
        recent = None
        if last is None and self.shared is not None and self.latest(path) is None:
            # A teammate's blame of this very file (its blob at ``at``): the line's run read
            # alone and vouched for while the commits touching the file are found.
            may_wait()
            shared_line, recent = self._reuse.shared_line_at(path, at, line, proposed)
            if recent:
                last = recent[0]
                self._remember_last(path, at, last)
            if shared_line is not None:
                return shared_line[0]
        if self._reusable(path):
            # A blame of this file is known somewhere: the line from it (a shared row, or
            # traced through the commits since an earlier blame) costs less than git's.
            if last is None and self.latest(path) is not None:
                # HEAD moved since this process kept the file's blame: git blames the line
                # over the commits since that blame only. The last commit touching the file
                # (the cache's key) is found after the answer, not beside it (two git
                # processes on a machine of two cores slow each other).
                may_wait()
                since = self._reuse.since_latest(path, at, line)
                if since is not None:
                    traced_line, checkpoint = since
                    with self._lock:  # once per file and HEAD, not per hover meanwhile
                        first = (path, at) not in self._moved
                        self._moved.add((path, at))
                    if first:
                        later(lambda: self._after_moved(path, at, checkpoint, warm))
                    return traced_line
            # One walk gives the last commit touching the file and the checkpoint candidates.
            if recent is None:
                recent = touching(self.repo, path, at, LADDER[0] + 1)
            if recent and last is None:
                last = recent[0]
                self._remember_last(path, at, last)
            if last is not None:
                one = self._reuse.shared_line(path, last, line, proposed)
                if one is not None:
                    return one[0]
                before = recent[1:] if recent and recent[0] == last else None
                traced = self._reuse.incremental(path, last, before, line)
                if traced is not None:
                    return traced.origin(line)
        # Blaming `at` gives the same lines as blaming the last commit touching the file.
        found_line = self.repo.blame(path, at, (line, line)).origin(line)
        with self._lock:
            self._lines[asked] = found_line
        if warm:
            self.warm(path, at)
        return found_line

    def _after_moved(self, path: str, at: CommitSha, checkpoint: Blame, warm: bool) -> None:
        """After a line was traced from ``checkpoint`` (HEAD moved to ``at``): the last commit
        touching the file is remembered, and the whole file is blamed from the same
        checkpoint (cached and shared), else by git when ``warm``."""
        try:
            recent = touching(self.repo, path, at, LADDER[0] + 1)
            if recent:
                self._remember_last(path, at, recent[0])
        except GitError:
            return
        finally:
            with self._lock:
                self._moved.discard((path, at))
        if recent and checkpoint.rev in recent[1:]:
            self._reuse.complete_later(path, recent[0], checkpoint)
        elif warm:
            self.warm(path, at)

    def warm(self, path: str, rev: CommitSha) -> None:
        """Blame the whole file in a background thread (once per file and HEAD)."""
        with self._lock:
            if (path, rev) in self._warming:
                return
            self._warming[(path, rev)] = True

        def run() -> None:
            try:
                self.blame_file(path, rev)
            except GitError:
                with self._lock:
                    self._warming.pop((path, rev), None)  # let a later request try again

        # A context of its own: not the caller's (an event loop's nonblocking() one).
        threading.Thread(
            target=contextvars.Context().run, args=(run,), name="poimen-blame", daemon=True
        ).start()

    def head_blob(self, path: str, rev: CommitSha) -> bytes:
        """The file's bytes at ``rev``, remembered: unsaved buffers are diffed against it in
        process, with no git process per edit. Read once when threads ask at once (the
        others wait; when that read fails, each tries for itself)."""
        key = (path, rev)
        while True:
            with self._lock:
                hit = self._texts.get(key)
                if hit is not None:
                    return hit
                reading = self._reading.get(key)
                mine = reading is None
                if reading is None:
                    reading = self._reading[key] = threading.Event()
            if mine:
                break
            reading.wait()
        try:
            data = self.repo.blob(rev, path)
            self._keep_text(path, rev, data, hashlib.sha256(data).hexdigest())
        finally:
            with self._lock:
                self._reading.pop(key, None)
            reading.set()
        return data
