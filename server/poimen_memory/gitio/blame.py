"""Blame records and the parsers of ``git blame --porcelain`` and ``--incremental`` output,
read as it streams."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from poimen_memory.domain import CommitSha
from poimen_memory.gitio.errors import BinaryFile, GitFailed

__all__ = [
    "Blame",
    "BlameCommit",
    "BlameEntry",
    "BlameLine",
    "c_unquote",
    "differences",
    "parse_incremental",
    "parse_porcelain",
]

_HEADER = re.compile(rb"^([0-9a-f]{40}|[0-9a-f]{64}) (\d+) (\d+)(?: (\d+))?$")


@dataclass(frozen=True, slots=True)
class BlameCommit:
    """What blame says of a commit (author with .mailmap applied)."""

    sha: CommitSha
    author_name: str
    author_email: str
    author_time: datetime
    summary: str
    boundary: bool


@dataclass(frozen=True, slots=True)
class BlameLine:
    """The origin of one line of the blamed revision: commit, original path, original line."""

    line: int
    commit: CommitSha
    orig_path: str
    orig_line: int


@dataclass(frozen=True, slots=True)
class Blame:
    """A blame of ``path`` at ``rev``; ``lines[i]`` is line ``i + 1`` (possibly a range only)."""

    path: str
    rev: CommitSha
    lines: tuple[BlameLine, ...]
    commits: dict[CommitSha, BlameCommit] = field(hash=False)
    complete: bool = True
    _index: dict[int, BlameLine] | None = field(
        default=None, init=False, compare=False, repr=False, hash=False
    )

    def relabelled(self, rev: CommitSha) -> Blame:
        """This blame as made at ``rev`` (a commit with the same version of the file)."""
        if rev == self.rev:
            return self
        return Blame(
            path=self.path, rev=rev, lines=self.lines, commits=self.commits, complete=self.complete
        )

    def origin(self, line: int) -> BlameLine | None:
        """The origin of ``line`` (1-based) in ``rev``, or None when it is not in this blame."""
        if self.complete:
            return self.lines[line - 1] if 1 <= line <= len(self.lines) else None
        return self.by_line().get(line)

    def by_line(self) -> dict[int, BlameLine]:
        """The lines of a partial blame by number (built once)."""
        index = self._index
        if index is None:
            index = {entry.line: entry for entry in self.lines}
            object.__setattr__(self, "_index", index)
        return index


def differences(mine: Blame, truth: Blame) -> list[tuple[int, BlameLine | None, BlameLine | None]]:
    """(line, mine, git's) for every line whose commit, original path or original line
    differ between two blames of one file (None: the line is missing from that blame)."""

    def origin(entry: BlameLine | None) -> tuple[object, ...] | None:
        return None if entry is None else (entry.commit, entry.orig_path, entry.orig_line)

    have = {entry.line: entry for entry in mine.lines}
    want = {entry.line: entry for entry in truth.lines}
    return [
        (n, have.get(n), want.get(n))
        for n in sorted(have.keys() | want.keys())
        if origin(have.get(n)) != origin(want.get(n))
    ]


_ESCAPES = {
    ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12,
    ord("r"): 13, ord('"'): 34, ord("\\"): 92,
}  # fmt: skip


def c_unquote(raw: bytes) -> bytes:
    """Undo git's C-style quoting of a path (``"a\\tb\\303\\244"``); unquoted input is returned."""
    if not (len(raw) >= 2 and raw.startswith(b'"') and raw.endswith(b'"')):
        return raw
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != 0x5C or i + 1 >= len(body):
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if 0x30 <= nxt <= 0x37 and i + 4 <= len(body):
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return bytes(out)


def decode_path(raw: bytes) -> str:
    """A path from git output as str (undecodable bytes kept through surrogateescape)."""
    return c_unquote(raw).decode("utf-8", "surrogateescape")


def parse_porcelain(
    lines: Iterable[bytes], path: str, rev: CommitSha, *, complete: bool = True
) -> Blame:
    """Parse ``git blame --porcelain`` output (as an iterable of raw lines, newline included)."""
    commits: dict[CommitSha, BlameCommit] = {}
    out: list[BlameLine] = []
    info: dict[bytes, bytes] = {}
    current: bytes | None = None
    group_file: dict[bytes, str] = {}
    pending: tuple[bytes, int, int] | None = None
    it: Iterator[bytes] = iter(lines)
    for raw in it:
        line = raw.rstrip(b"\n")
        if line.startswith(b"\t"):
            if pending is None:
                raise GitFailed("git blame: content line before any header")
            sha, orig, final = pending
            if b"\x00" in line:
                raise BinaryFile(f"{path} is a binary file")
            commit = CommitSha(sha.decode("ascii"))
            if commit not in commits:
                commits[commit] = _commit(commit, info)
            out.append(BlameLine(final, commit, group_file[sha], orig))
            pending, info = None, {}
            continue
        header = _HEADER.match(line)
        if header is not None and pending is None:
            sha = header.group(1)
            pending = (sha, int(header.group(2)), int(header.group(3)))
            current = sha
            continue
        if current is None:
            continue
        key, _, value = line.partition(b" ")
        if key == b"filename":
            group_file[current] = decode_path(value)
        else:
            info[key] = value
    if pending is not None:
        raise GitFailed("git blame: output ended in the middle of an entry")
    return Blame(path=path, rev=rev, lines=tuple(out), commits=commits, complete=complete)


BlameEntry = tuple[CommitSha, str, int, int, int]
"""Lines blame has found: ``(commit, original path, first original line, first line,
count)``, consecutive lines from as many consecutive lines of that path at that commit."""


def parse_incremental(
    lines: Iterable[bytes],
    path: str,
    rev: CommitSha,
    on_entry: Callable[[BlameEntry], None] | None = None,
) -> Blame:
    """Parse ``git blame --incremental`` output (raw lines, newline included): the same
    whole-file blame as ``parse_porcelain`` gives, each entry passed to ``on_entry`` as git
    finds it (most of a file's lines are known long before the last). An entry is its
    header, the commit's details the first time the commit appears, and ``filename``."""
    commits: dict[CommitSha, BlameCommit] = {}
    found: dict[int, BlameLine] = {}
    info: dict[bytes, bytes] = {}
    entry: tuple[CommitSha, int, int, int] | None = None
    for raw in lines:
        line = raw.rstrip(b"\n")
        if entry is None:
            header = _HEADER.match(line)
            if header is None or header.group(4) is None:
                raise GitFailed("git blame: an incremental entry without its header")
            sha = CommitSha(header.group(1).decode("ascii"))
            entry = (sha, int(header.group(2)), int(header.group(3)), int(header.group(4)))
            info = {}
            continue
        key, _, value = line.partition(b" ")
        if key != b"filename":
            info[key] = value
            continue
        commit, orig, first, count = entry
        if commit not in commits:
            commits[commit] = _commit(commit, info)
        name = decode_path(value)
        for i in range(count):
            if first + i in found:
                raise GitFailed(f"git blame: line {first + i} reported twice")
            found[first + i] = BlameLine(first + i, commit, name, orig + i)
        if on_entry is not None:
            on_entry((commit, name, orig, first, count))
        entry = None
    if entry is not None:
        raise GitFailed("git blame: output ended in the middle of an entry")
    if sorted(found) != list(range(1, len(found) + 1)):
        raise GitFailed("git blame: the incremental output left lines out")
    ordered = tuple(found[n] for n in range(1, len(found) + 1))
    return Blame(path=path, rev=rev, lines=ordered, commits=commits, complete=True)


# The commit dates every reader can hold: git writes any number (a forged commit, or
# ``hash-object --literally``), Python and the store stop at year 9999. A day inside the
# limits, so that any UTC offset keeps the date in range.
_EARLIEST = int(datetime(1, 1, 2, tzinfo=UTC).timestamp())
_LATEST = int(datetime(9999, 12, 30, tzinfo=UTC).timestamp())


def commit_time(seconds: int, tz: tzinfo = UTC) -> datetime:
    """A commit date git gives in seconds since the epoch, clamped to the years 1 to 9999."""
    return datetime.fromtimestamp(min(max(seconds, _EARLIEST), _LATEST), tz)


def _commit(sha: CommitSha, info: dict[bytes, bytes]) -> BlameCommit:
    def text(key: bytes) -> str:
        return info.get(key, b"").decode("utf-8", "replace")

    email = text(b"author-mail").strip()
    if email.startswith("<") and email.endswith(">"):
        email = email[1:-1]
    try:
        when = commit_time(int(info.get(b"author-time", b"0")))
    except ValueError:
        when = datetime.fromtimestamp(0, UTC)
    return BlameCommit(
        sha=sha,
        author_name=text(b"author"),
        author_email=email,
        author_time=when,
        summary=text(b"summary"),
        boundary=b"boundary" in info,
    )
