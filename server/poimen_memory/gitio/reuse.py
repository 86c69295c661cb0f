"""Blames found without running ``git blame``: a shared row this repository vouches for, or
the blame of the nearest ancestor known (cached here or shared) carried forward through the
commits since (gitio.incremental: identical to git's).

A hover asks for one line: it is read from a shared row, or traced alone from a checkpoint;
the whole file then follows in the background, cached and shared.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cachetools import LRUCache

from poimen_memory.domain import CommitSha, SharedBlame, SharedBlameLine
from poimen_memory.gitio.blame import Blame, BlameLine
from poimen_memory.gitio.errors import GitError
from poimen_memory.gitio.incremental import (
    Unsupported,
    blame_from,
    checkpoint_candidates,
    line_since,
    touching,
)
from poimen_memory.gitio.meanwhile import Meanwhile
from poimen_memory.gitio.shared import agrees, decode, encode, line_of, origin_in

if TYPE_CHECKING:
    from poimen_memory.gitio.blamer import Blamer

__all__ = ["LADDER", "BlameReuse", "later"]

log = logging.getLogger(__name__)

LADDER = (16, 256)
"""Commits touching a file searched for a checkpoint: the nearest first, then further."""
_REFUSED = 1024
"""Shared rows refused for their mapping, remembered (per Blamer) so as not to ask again."""
_BY_TREES = 4
"""Up to this many (commit, file) pairs, the changed-file check walks trees (see _changed_by)."""
_LATER_S = 0.25
"""Delay before a hover's bookkeeping runs in the background: a blame found for it cached and
shared, the last commit touching the file found after HEAD moved."""


def later(work: Callable[[], None]) -> None:
    """Run ``work`` a moment from now in a daemon thread: a hover's answer goes out first,
    not sharing the interpreter with its bookkeeping."""
    timer = threading.Timer(_LATER_S, work)
    timer.daemon = True
    timer.start()


def _parents(found: tuple[str, bytes] | None) -> list[str]:
    """The parents a commit object names (none: not a commit, or a root)."""
    if found is None or found[0] != "commit":
        return []
    head = found[1].split(b"\n\n", 1)[0]
    return [
        line[7:].decode("ascii", "replace").strip()
        for line in head.split(b"\n")
        if line.startswith(b"parent ")
    ]


def _boundary(row: SharedBlame) -> set[CommitSha]:
    """The commits a row marks as boundary (where a shallow history ends)."""
    found: set[CommitSha] = set()
    for meta in row.commits:
        if meta[5]:
            with contextlib.suppress(ValueError, TypeError):
                found.add(CommitSha(meta[0]))
    return found


class BlameReuse:
    """The blames a Blamer finds without git blame, through its caches (local and shared)."""

    def __init__(self, blamer: Blamer) -> None:
        self._blamer = blamer
        # (path, last commit) whose shared row mapped a line where git would not: not asked
        # for again (nor checked again) by this process.
        self._refused: LRUCache[tuple[str, str], bool] = LRUCache(_REFUSED)
        self._lock = threading.Lock()

    def _refuse(self, row: SharedBlame) -> None:
        with self._lock:
            self._refused[(row.path, row.commit)] = True

    def known(self, path: str, last: CommitSha) -> tuple[Blame, str] | None:
        """The blame at ``last`` without running git blame: shared, or incremental."""
        found = self._from_shared(path, last)
        if found is not None:
            return found, "shared"
        found = self.incremental(path, last)
        if found is not None:
            return found, "incremental"
        return None

    def _shared_row(self, path: str, last: CommitSha) -> SharedBlame | None:
        """The shared row for (path, last), if the store has one (not yet trusted)."""
        shared = self._blamer.shared
        if shared is None:
            return None
        with self._lock:
            if (path, last.value) in self._refused:
                return None
        row = shared.get(path, last.value, self._blamer.repo.shared_blame_fingerprint())
        if row is None or row.path != path or row.commit != last.value:
            return None
        return row

    def _from_shared(self, path: str, last: CommitSha) -> Blame | None:
        """The shared row for (path, last), once this repository vouches for it."""
        row = self._shared_row(path, last)
        blame = self._trusted(row, last) if row is not None else None
        if blame is not None:
            self._blamer.sources["shared"] += 1
        return blame

    def _trusted(self, row: SharedBlame, rev: CommitSha) -> Blame | None:
        repo = self._blamer.repo
        try:
            if repo.blob_id(rev, row.path) != row.blob_id:
                log.debug("shared blame of %s at %s: another blob; not used", row.path, rev.short())
                return None
            blame = decode(row, rev)
            if blame is None:
                return None
            if len(repo.has_commits(blame.commits)) != len(blame.commits):
                log.debug("shared blame of %s: commits this clone lacks; not used", row.path)
                return None
            boundary = {sha for sha, meta in blame.commits.items() if meta.boundary}
            if not self._agrees(blame.lines, rev, row.path) or not self._changed_by(
                blame.lines, boundary
            ):
                log.info(
                    "shared blame of %s at %s maps lines where git would not; "
                    "not used (blamed here instead)",
                    row.path,
                    rev.short(),
                )
                self._refuse(row)
                return None
        except GitError:
            return None
        return blame

    def _agrees(self, lines: Sequence[BlameLine], rev: CommitSha, path: str) -> bool:
        """Whether each line's text at ``rev`` is the text at its origin: the file and each
        (commit, orig path) the lines name read once, through the persistent cat-file."""
        origins = {(line.commit, line.orig_path) for line in lines}
        found = self._blamer.repo.blobs([(rev, path), *origins])
        final = found.get((rev, path))
        if final is None:
            return False
        return agrees(lines, final, {(c.value, p): data for (c, p), data in found.items()})

    def _changed_by(self, lines: Sequence[BlameLine], boundary: set[CommitSha]) -> bool:
        """Whether each commit a line is blamed on changed the file the line comes from: git
        passes a file a parent holds unchanged (the very blob) to that parent whole, so a row
        naming such a commit was not made by git. The commits' parents and the blob ids are
        read through the persistent cat-file (no git process); ``boundary`` commits and root
        commits pass. A few are found through their trees, on the process that reads
        contents (a hover's line starts no second one); many, by the ids git looks up."""
        repo = self._blamer.repo
        pairs = {(line.commit, line.orig_path) for line in lines if line.commit not in boundary}
        file_id = repo.file_id if len(pairs) <= _BY_TREES else repo.blob_id
        parents: dict[CommitSha, list[str]] = {}
        for commit, path in pairs:
            if commit not in parents:
                parents[commit] = _parents(repo._objects.data(commit.value))
            if not parents[commit]:
                continue
            there = file_id(commit, path)
            if there is not None and any(file_id(p, path) == there for p in parents[commit]):
                return False
        return True

    def share(self, blame: Blame) -> None:
        """Put a complete blame in the shared cache (if there is one) for other clones."""
        shared, repo = self._blamer.shared, self._blamer.repo
        if shared is None or not blame.complete:
            return
        try:
            blob = repo.blob_id(blame.rev, blame.path)
            fingerprint = repo.shared_blame_fingerprint()
        except GitError:
            return
        if blob is None:
            return
        shared.put(encode(blame, fingerprint, blob))

    def shared_line(
        self,
        path: str,
        last: CommitSha,
        line: int,
        proposed: Callable[[BlameLine], None] | None = None,
    ) -> tuple[BlameLine | None] | None:
        """One line from the shared row for (path, last), checked as far as it needs (this
        repository has the commit and the very blob, the line's own commit, and the line's
        text there at the line it names, and that commit changed that file); the whole row is
        then checked and cached in the background. None: no usable row. ``proposed`` hears
        the row's line before those checks (not an answer until they pass)."""
        blamer = self._blamer
        row = self._shared_row(path, last)
        if row is None:
            return None
        try:
            if blamer.repo.blob_id(last, path) != row.blob_id:
                return None
        except GitError:
            return None
        found = line_of(row, line)
        if isinstance(found, bool):
            return None
        if found is not None and proposed is not None:
            proposed(found)
        try:
            if found is not None:
                if not blamer.repo.has_commits([found.commit]):
                    return None  # a clone behind the row's: usable after a fetch
                if not self._agrees([found], last, path) or not self._changed_by(
                    [found], _boundary(row)
                ):
                    self._refuse(row)
                    return None
        except GitError:
            return None

        def keep() -> None:
            blame = self._trusted(row, last)
            if blame is not None:
                blamer.sources["shared"] += 1
                blamer.cache.put(blamer._key(path, last), blame)

        later(keep)
        return (found,)

    def shared_line_at(
        self,
        path: str,
        at: CommitSha,
        line: int,
        proposed: Callable[[BlameLine], None] | None = None,
    ) -> tuple[tuple[BlameLine | None] | None, list[CommitSha] | None]:
        """One line at ``at`` from the shared row of the file's blob at ``at``: the line's run
        read alone and vouched for (as ``shared_line`` does) while another git process finds
        the commits touching the file, newest first (returned too: the first is the commit
        the row must be keyed by). The whole row is checked and cached in the background.
        The answer is None where this cannot tell (no such row, or more than one, or a check
        that fails or cannot be made): the caller then goes the usual way (with the commits,
        when they were found)."""
        blamer = self._blamer
        repo, shared = blamer.repo, blamer.shared
        if shared is None:
            return None, None
        try:
            # The file's id through the commit's trees: a few small objects, not the file.
            blob = repo.file_id(at, path)
            if blob is None:
                return None, None
            rows = shared.line(path, repo.shared_blame_fingerprint(), blob, line)
        except GitError:
            return None, None
        with self._lock:
            rows = [r for r in rows if (path, r.commit) not in self._refused]
        if len(rows) != 1:
            return None, None
        row = rows[0]
        finding = Meanwhile(lambda: touching(repo, path, at, LADDER[0] + 1), "poimen-touching")
        try:
            vouched = self._vouched_line(row, path, at, line, proposed)
        finally:
            finding.wait()
        try:
            recent = finding.result()
        except GitError:
            return None, None
        if not vouched or not recent or recent[0].value != row.commit:
            return None, recent
        last, found = recent[0], vouched[0]

        def keep() -> None:
            whole = self._shared_row(path, last)
            blame = self._trusted(whole, last) if whole is not None else None
            if blame is not None:
                blamer.sources["shared"] += 1
                blamer.cache.put(blamer._key(path, last), blame)

        later(keep)
        return (found,), recent

    def _vouched_line(
        self,
        row: SharedBlameLine,
        path: str,
        at: CommitSha,
        line: int,
        proposed: Callable[[BlameLine], None] | None,
    ) -> tuple[BlameLine | None] | None:
        """The line's origin from its part of a row of the file's blob at ``at``, once this
        repository vouches for it as ``shared_line`` does (None: it does not, or cannot)."""
        blamer = self._blamer
        repo = blamer.repo
        if line > row.line_count:
            return (None,)  # past the file's end
        found = origin_in(row, line)
        if found is None:
            return None
        try:
            # Without the row's boundary marks (a shallow clone's): the whole row decides.
            if not self._changed_by([found], set()):
                return None
            # The row is of the blob at ``at``: the line's text now is the file's there. A
            # commit this clone lacks has no file to agree with. The lookup at the proposed
            # origin runs while git reads that commit's file (this thread then waits on git).
            now = blamer.head_blob(path, at)
            if proposed is not None:
                proposed(found)
            then = repo.blobs([(found.commit, found.orig_path)])
            texts = {(c.value, p): data for (c, p), data in then.items()}
            if not agrees([found], now, texts):
                return None
        except GitError:
            return None
        return (found,)

    def incremental(
        self,
        path: str,
        last: CommitSha,
        candidates: list[CommitSha] | None = None,
        line: int | None = None,
    ) -> Blame | None:
        """The blame at ``last`` from the nearest ancestor whose blame is known, or None.
        With ``line``, only that line is traced, and the whole file follows from the same
        checkpoint in the background (cached and shared)."""
        try:
            checkpoint = self._checkpoint(path, last, candidates)
            if checkpoint is None:
                return None
            blame = self._from_checkpoint(path, last, checkpoint, line)
        except GitError as exc:
            log.debug("incremental blame of %s at %s failed: %s", path, last.short(), exc)
            return None
        if blame is not None and line is not None:
            self.complete_later(path, last, checkpoint)
        return blame

    def since_latest(self, path: str, at: CommitSha, line: int) -> tuple[BlameLine, Blame] | None:
        """``line``'s origin at ``at`` and the checkpoint it was found from: the whole-file
        blame this process kept last for the file (the one made before HEAD moved, say),
        continued by git's blame of the line over the commits since (see ``line_since``).
        None when there is no such blame or git's walk cannot be continued from it: the
        caller goes the usual way."""
        blamer = self._blamer
        latest = blamer.latest(path)
        if latest is None:
            return None
        try:
            checkpoint = blamer.cache.get(blamer._key(path, latest), latest)
            if checkpoint is None:
                return None
            found = line_since(blamer.repo, checkpoint, at, path, line)
        except Unsupported as exc:
            log.debug("blame of %s at %s by git: %s", path, at.short(), exc)
            return None
        except GitError as exc:
            log.debug("blame of %s at %s since the kept one failed: %s", path, at.short(), exc)
            return None
        return None if found is None else (found, checkpoint)

    def complete_later(self, path: str, last: CommitSha, checkpoint: Blame) -> None:
        """The whole-file blame at ``last`` from ``checkpoint``, in the background (cached and
        shared), after a line was traced from it."""
        later(lambda: self._complete(path, last, checkpoint))

    def _from_checkpoint(
        self, path: str, last: CommitSha, checkpoint: Blame, line: int | None = None
    ) -> Blame | None:
        try:
            blame = blame_from(self._blamer.repo, checkpoint, last, path, self._cached_at, line)
        except Unsupported as exc:
            log.debug("blame of %s at %s by git: %s", path, last.short(), exc)
            return None
        if line is None:
            self._blamer.sources["incremental"] += 1
        return blame

    def _complete(self, path: str, last: CommitSha, checkpoint: Blame) -> None:
        try:
            blame = self._from_checkpoint(path, last, checkpoint)
        except GitError as exc:
            log.debug("incremental blame of %s at %s failed: %s", path, last.short(), exc)
            return
        if blame is not None:
            self._blamer.keep(path, last, blame)
            self.share(blame)

    def _cached_at(self, rev: CommitSha, path: str) -> Blame | None:
        # A commit outside an incremental walk: its whole-file blame if cached here.
        try:
            return self._blamer.cached(path, rev)
        except GitError:
            return None

    def _checkpoint(
        self, path: str, last: CommitSha, known: list[CommitSha] | None = None
    ) -> Blame | None:
        blamer = self._blamer
        repo, cache = blamer.repo, blamer.cache
        fingerprint = repo.blame_fingerprint()
        local = cache.has_path(blamer._repo_key(), path, fingerprint)
        shared_fp = repo.shared_blame_fingerprint()
        # No blame of this file anywhere: no walk of its history for a checkpoint.
        if not local and (blamer.shared is None or not blamer.shared.has_path(path, shared_fp)):
            return None
        for depth in LADDER:
            if known is not None and depth == LADDER[0]:
                candidates = known[:depth]
            else:
                candidates = checkpoint_candidates(repo, path, last, depth)
            if not candidates:
                return None
            cached = (
                cache.cached_commits(blamer._repo_key(), path, fingerprint, candidates)
                if local
                else set()
            )
            shared: set[str] = set()
            if blamer.shared is not None:
                shared = blamer.shared.commits_with(path, shared_fp, [c.value for c in candidates])
            for candidate in candidates:
                if candidate in cached:
                    found = cache.get(blamer._key(path, candidate), candidate)
                    if found is not None:
                        return found
                if candidate.value in shared:
                    row = self._shared_row(path, candidate)
                    blame = self._trusted(row, candidate) if row is not None else None
                    if blame is not None:
                        cache.put(blamer._key(path, candidate), blame)
                        return blame
            if len(candidates) < depth:
                return None
        return None
