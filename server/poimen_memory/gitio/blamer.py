"""Blame with a cache: whole files for code lens, single lines fast for a cold hover."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from poimen_memory.domain import CommitSha
from poimen_memory.gitio.blame import Blame, BlameLine
from poimen_memory.gitio.cache import BlameCache, CacheKey
from poimen_memory.gitio.errors import GitError
from poimen_memory.gitio.repo import GitRepo

__all__ = ["Blamer"]

_KEY_MEMO = 4096
_TEXT_MEMO = 16
_LINE_MEMO = 4096


class Blamer:
    """Blames files of one repository through a BlameCache.

    The cache key needs the last commit that touched the file; that costs one git process
    per (file, HEAD) and is remembered, so warm requests spawn no git at all.
    """

    def __init__(self, repo: GitRepo, cache: BlameCache) -> None:
        self.repo = repo
        self.cache = cache
        self._keys: OrderedDict[tuple[str, CommitSha], CommitSha] = OrderedDict()
        self._texts: OrderedDict[tuple[str, CommitSha], bytes] = OrderedDict()
        self._lines: OrderedDict[tuple[str, CommitSha, int], BlameLine | None] = OrderedDict()
        self._shas: dict[tuple[str, CommitSha], str] = {}
        self._warming: set[tuple[str, CommitSha]] = set()
        self._lock = threading.Lock()

    def _fingerprint(self) -> str:
        return hashlib.sha256(self.repo.blame_settings()).hexdigest()[:32]

    def key(self, path: str, rev: CommitSha) -> CacheKey:
        """The cache key of ``path`` at ``rev`` (Untracked if the file is not there)."""
        last = self._known_last(path, rev)
        if last is None:
            last = self.repo.last_commit(path, rev)
            self._remember_last(path, rev, last)
        return CacheKey(path, last, self._fingerprint())

    def _known_last(self, path: str, rev: CommitSha) -> CommitSha | None:
        with self._lock:
            last = self._keys.get((path, rev))
        if last is None:
            remembered = self.cache.head_file(path, rev)
            if remembered is not None:
                last = remembered[0]
                with self._lock:
                    self._keys[(path, rev)] = last
                    self._shas[(path, rev)] = remembered[1]
        return last

    def _remember_last(self, path: str, rev: CommitSha, last: CommitSha) -> None:
        with self._lock:
            self._keys[(path, rev)] = last
            while len(self._keys) > _KEY_MEMO:
                self._keys.popitem(last=False)
            text_sha = self._shas.get((path, rev))
        if text_sha is not None:
            self.cache.put_head_file(path, rev, last, text_sha)

    def text_sha(self, path: str, rev: CommitSha) -> str | None:
        """sha256 of the file's text at ``rev`` if known (memory or the persistent cache), so
        an unchanged buffer is recognised without reading the blob."""
        with self._lock:
            known = self._shas.get((path, rev))
        if known is None:
            self._known_last(path, rev)
            with self._lock:
                known = self._shas.get((path, rev))
        return known

    def cached(self, path: str, rev: CommitSha) -> Blame | None:
        """The whole-file blame if it is cached (memory or disk); never runs a blame."""
        return self.cache.get(self.key(path, rev), rev)

    def blame_file(self, path: str, rev: CommitSha | None = None) -> Blame:
        """The whole-file blame of ``path`` at ``rev`` (HEAD by default), cached."""
        at = self.repo.head() if rev is None else rev
        key = self.key(path, at)
        hit = self.cache.get(key, at)
        if hit is not None:
            return hit
        # Blaming the last commit that touched the file gives the same lines as blaming `at`.
        blame = self.repo.blame(path, key.commit)
        self.cache.put(key, blame)
        return self.cache.get(key, at) or blame

    def origin(
        self, path: str, line: int, rev: CommitSha | None = None, *, warm: bool = False
    ) -> BlameLine | None:
        """The origin of one line: from the cached blame (one row of the persistent cache
        after a restart), else ``git blame -L n,n`` at ``rev`` (its answer remembered).
        ``warm`` then starts the whole-file blame in the background."""
        at = self.repo.head() if rev is None else rev
        last = self._known_last(path, at)
        if last is not None:
            found = self.cache.line(CacheKey(path, last, self._fingerprint()), line)
            if found is not False:
                assert found is None or isinstance(found, BlameLine)
                return found
        with self._lock:
            if (path, at, line) in self._lines:
                return self._lines[(path, at, line)]
        # Blaming `at` gives the same lines as blaming the last commit touching the file.
        partial = self.repo.blame(path, at, (line, line))
        found_line = partial.origin(line)
        with self._lock:
            self._lines[(path, at, line)] = found_line
            while len(self._lines) > _LINE_MEMO:
                self._lines.popitem(last=False)
        if warm:
            self.warm(path, at)
        return found_line

    def warm(self, path: str, rev: CommitSha) -> None:
        """Blame the whole file in a background thread (once per file and HEAD)."""
        with self._lock:
            if (path, rev) in self._warming:
                return
            self._warming.add((path, rev))

        def run() -> None:
            try:
                self.blame_file(path, rev)
            except GitError:
                with self._lock:
                    self._warming.discard((path, rev))  # let a later request try again

        threading.Thread(target=run, name="poimen-blame", daemon=True).start()

    def head_blob(self, path: str, rev: CommitSha) -> bytes:
        """The file's bytes at ``rev``, remembered: unsaved buffers are diffed against it in
        process, with no git process per edit."""
        with self._lock:
            hit = self._texts.get((path, rev))
            if hit is not None:
                self._texts.move_to_end((path, rev))
                return hit
        data = self.repo.blob(rev, path)
        text_sha = hashlib.sha256(data).hexdigest()
        with self._lock:
            self._texts[(path, rev)] = data
            while len(self._texts) > _TEXT_MEMO:
                self._texts.popitem(last=False)
            self._shas[(path, rev)] = text_sha
            last = self._keys.get((path, rev))
        if last is not None:
            self.cache.put_head_file(path, rev, last, text_sha)
        return data

    def forget(self) -> None:
        """Drop the remembered keys and texts (after a checkout or a settings change)."""
        with self._lock:
            self._keys.clear()
            self._texts.clear()
            self._lines.clear()
            self._shas.clear()
