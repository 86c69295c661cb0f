"""Whole-file blames shared between clones: the run-length form, and the door to a store.

A blame is stored as runs ``(orig commit, orig path, orig start, length)`` with the commits'
metadata, keyed by (path, last commit touching it, shared fingerprint) and the file's blob id.
gitio never trusts a row: a reader uses it only when its own repository has the commit, the
file there has the very blob the row names, every commit the runs name exists, every line the
row maps has, at its origin (commit, path, line), the very text it has now, and each commit a
line is blamed on changed that file (``Blamer`` checks, in gitio.reuse; see ``decode`` and
``agrees``): a row edited to move a line onto another commit's line is not used. The store
behind ``SharedBlames`` is whatever the process wires in; any failure there is a miss.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

from poimen_memory.domain import CommitSha, SharedBlame, SharedBlameLine
from poimen_memory.domain.anchors import BlameRunRow
from poimen_memory.gitio.blame import Blame, BlameCommit, BlameLine

__all__ = [
    "SharedBlames",
    "agrees",
    "decode",
    "encode",
    "line_of",
    "origin_in",
    "text_lines",
]


class SharedBlames(Protocol):
    """The blames of one repository shared through a store (any failure: a miss)."""

    def get(self, path: str, commit: str, fingerprint: str) -> SharedBlame | None:
        """The row for (path, commit, fingerprint), or None."""

    def line(self, path: str, fingerprint: str, blob_id: str, line: int) -> list[SharedBlameLine]:
        """Line ``line``'s part of each row for (path, fingerprint) whose file is the blob
        ``blob_id`` (none when it cannot tell)."""

    def commits_with(self, path: str, fingerprint: str, commits: Sequence[str]) -> set[str]:
        """Which of ``commits`` have a row for (path, fingerprint)."""

    def has_path(self, path: str, fingerprint: str) -> bool:
        """Whether any commit has a row for (path, fingerprint) (True when it cannot tell)."""

    def put(self, row: SharedBlame) -> None:
        """Store a row (may be done later, in the background)."""


def encode(blame: Blame, fingerprint: str, blob_id: str) -> SharedBlame:
    """A complete blame as runs: consecutive lines from consecutive lines of one commit's
    file make one run."""
    runs: list[BlameRunRow] = []
    for line in blame.lines:
        if runs:
            sha, path, start, length = runs[-1]
            if (
                sha == line.commit.value
                and path == line.orig_path
                and start + length == line.orig_line
            ):
                runs[-1] = (sha, path, start, length + 1)
                continue
        runs.append((line.commit.value, line.orig_path, line.orig_line, 1))
    used = {line.commit for line in blame.lines}
    commits = tuple(
        (c.sha.value, c.author_name, c.author_email, int(c.author_time.timestamp()), c.summary,
         c.boundary)
        for sha, c in blame.commits.items()
        if sha in used
    )  # fmt: skip
    return SharedBlame(
        blame.path, blame.rev.value, fingerprint, blob_id, len(blame.lines), commits, tuple(runs)
    )


def decode(row: SharedBlame, rev: CommitSha) -> Blame | None:
    """The blame a row holds, as blamed at ``rev``; None when the row does not hang together
    (runs that do not add up to its lines, a commit without metadata, a bad number)."""
    meta: dict[str, BlameCommit] = {}
    try:
        for sha, name, email, when, summary, boundary in row.commits:
            commit = CommitSha(sha)
            meta[sha] = BlameCommit(
                commit, name, email, datetime.fromtimestamp(when, UTC), summary, bool(boundary)
            )
        lines: list[BlameLine] = []
        for sha, path, start, length in row.runs:
            if sha not in meta or start < 1 or length < 1:
                return None
            commit = meta[sha].sha
            base = len(lines) + 1
            lines.extend(BlameLine(base + k, commit, path, start + k) for k in range(length))
    except (ValueError, TypeError, OverflowError, OSError):
        return None
    if len(lines) != row.line_count:
        return None
    used = {line.commit for line in lines}
    commits = {m.sha: m for m in meta.values() if m.sha in used}
    return Blame(path=row.path, rev=rev, lines=tuple(lines), commits=commits)


def line_of(row: SharedBlame, line: int) -> BlameLine | bool | None:
    """Line ``line`` of a row without decoding the rest: its origin, None past the end, False
    when the row does not hang together where the line is."""
    if line < 1 or line > row.line_count:
        return None
    meta = {c[0] for c in row.commits}
    at = 1
    try:
        for sha, path, start, length in row.runs:
            if length < 1 or start < 1:
                return False
            if at <= line < at + length:
                if sha not in meta:
                    return False
                return BlameLine(line, CommitSha(sha), path, start + line - at)
            at += length
    except (ValueError, TypeError):
        return False
    return False


def origin_in(found: SharedBlameLine, line: int) -> BlameLine | None:
    """Line ``line``'s origin from its part of a row, or None: past the row's end, a run that
    does not hold it (a gap the row should not have), or values no blame has."""
    if found.run is None or found.run_start is None or not 1 <= line <= found.line_count:
        return None
    sha, path, start, length = found.run
    try:
        if start < 1 or length < 1 or not found.run_start <= line < found.run_start + length:
            return None
        return BlameLine(line, CommitSha(sha), path, start + line - found.run_start)
    except (ValueError, TypeError):
        return None


def text_lines(data: bytes) -> list[bytes]:
    """A file's lines as git blame counts them (a last line without a newline counts)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def agrees(
    lines: Iterable[BlameLine], final: bytes, origins: Mapping[tuple[str, str], bytes | None]
) -> bool:
    """Whether every line has, at its origin, the text it has in ``final`` (the blamed file):
    ``origins`` holds the file at each (commit, orig path) the lines name (None: not there).
    A blame maps a line to where git found that very text, so a mapping that names another
    line (or another file, or commit) shows here."""
    now = text_lines(final)
    split: dict[tuple[str, str], list[bytes] | None] = {}
    for line in lines:
        key = (line.commit.value, line.orig_path)
        if key not in split:
            data = origins.get(key)
            split[key] = None if data is None else text_lines(data)
        then = split[key]
        if then is None or not 1 <= line.line <= len(now) or not 1 <= line.orig_line <= len(then):
            return False
        if then[line.orig_line - 1] != now[line.line - 1]:
            return False
    return True
