"""Edits that are not committed yet, kept as pending anchors.

An agent's session usually ends before its edits are committed: the human reviews them and
commits later, perhaps changed, perhaps amended or rebased first. An edit HEAD does not hold
when its session is ingested waits as the pending anchors ``remember`` uses (base = HEAD at
ingest, the redacted hash of each line), one per block of lines the edit added, and is placed
by the same rules (``remember.resolve_file``) once a later commit holds those lines: on the
next lookup of the file, by ``mem db resolve-pending``, or by the git post-commit hook. An
edit older than ``pending_days`` is not kept: it expired before it was read.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from poimen_memory.domain import CommitSha, PendingAnchor, ProjectId, RepoId, Sha256Hash
from poimen_memory.gitio.files import read_regular_file
from poimen_memory.ingest.model import TextAtHead
from poimen_memory.ingest.remember import MAX_WORK_FILE, pending_hash

__all__ = ["WorkTreeLines", "expired", "pending_of_edits"]


def expires_at(edit: TextAtHead, pending_days: float) -> datetime | None:
    """When an uncommitted edit stops waiting for its commit (None: its time is so far in
    the future that it cannot wait, a bogus timestamp)."""
    try:
        return edit.not_before + timedelta(days=pending_days)
    except OverflowError:
        return None


def expired(edit: TextAtHead, now: datetime, pending_days: float) -> bool:
    """Whether an uncommitted edit is past waiting for its commit (or cannot wait)."""
    expires = expires_at(edit, pending_days)
    return expires is None or expires <= now


class WorkTreeLines:
    """The lines of the work tree's files, read once each (regular files only, bounded):
    where a waiting block starts, as the work tree numbers it now."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lines: dict[str, list[str] | None] = {}

    def start_of(self, file: str, block: tuple[str, ...]) -> int:
        """The first line of ``block`` in ``file`` as it is now (1 when it is not found)."""
        if file not in self._lines:
            data = read_regular_file(self.root, self.root / file, MAX_WORK_FILE)
            text = None if data is None else data.decode("utf-8", "surrogateescape")
            self._lines[file] = None if text is None else text.split("\n")
        lines = self._lines[file]
        if lines:
            n = len(block)
            for i in range(len(lines) - n + 1):
                if lines[i] == block[0] and tuple(lines[i : i + n]) == block:
                    return i + 1
        return 1


def pending_of_edits(
    project: ProjectId,
    node: Sha256Hash,
    repo: RepoId,
    base: CommitSha | None,
    edits: Iterable[TextAtHead],
    *,
    now: datetime,
    pending_days: float,
    work_tree: WorkTreeLines,
) -> list[PendingAnchor]:
    """The pending anchors of ``node`` for ``edits`` HEAD (``base``) does not hold: one per
    block of added lines, expiring ``pending_days`` after the edit; none for an edit that
    expired already."""
    out: dict[tuple[str, tuple[int, ...]], PendingAnchor] = {}
    for edit in edits:
        expires = expires_at(edit, pending_days)
        if expires is None or expires <= now:
            continue
        for block in edit.added_blocks():
            hashes = tuple(pending_hash(line) for line in block)
            start = work_tree.start_of(edit.file, block)
            out.setdefault(
                (edit.file, hashes),
                PendingAnchor(
                    project, node, repo, edit.file, base, start, hashes, edit.not_before, expires
                ),
            )
    return list(out.values())
