"""What a commit changed (Change, FileChange), and the reader of the ``git log -p -U0`` output
gitio.history asks for: the lines each commit added (numbered on the new side, each with a
whitespace-blind hash), the hunks it made, and a patch id that is the same for the same
edits wherever they land.

The output is parsed as it streams; only GitFailed leaves the parser.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from poimen_memory.domain import CommitSha, ContentError
from poimen_memory.gitio.blame import c_unquote
from poimen_memory.gitio.diffs import (
    HUNK_HEADER,
    MIN_HASHED,
    encode_text,
    hash_squeezed,
    hunk_numbers,
    squeeze,
)
from poimen_memory.gitio.errors import GitFailed

__all__ = ["LOG_ARGS", "Change", "FileChange", "LogParser"]

_MARKER = b"\x00poimen-change "
# Every setting a repository's configuration could change about this output is pinned on the
# command line: prefixes (diff.noprefix, diff.mnemonicPrefix), hunks fused with context lines
# (diff.interHunkContext), hunk placement (diff.algorithm, diff.indentHeuristic), the root
# commit's diff (log.showRoot), merges (log.diffMerges), submodules (diff.submodule),
# diff.relative, notes, and no external diff or textconv program runs.
LOG_ARGS = (
    "log",
    "--no-walk=unsorted",
    "--stdin",
    "--root",
    "-p",
    "-U0",
    "--inter-hunk-context=0",
    "-M",
    "--diff-merges=first-parent",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "--submodule=short",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--full-index",
    "--no-notes",
    "--no-mailmap",  # a repository's mailmap.file may name anything: /dev/zero, a FIFO
    "--format=%x00poimen-change %H %P %ct",
    "--",
)

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file of a commit's change against its first parent."""

    path: str
    """The file's path in the commit (the new side)."""
    old_path: str | None
    """Its path in the first parent (None: the file was added)."""
    added: tuple[int, ...]
    """New-side line numbers (1-based) of the added lines, ascending."""
    hashes: tuple[int | None, ...]
    """line_hash of each added line, parallel to ``added``."""
    hunks: tuple[tuple[int, int, int, int], ...]
    """``(old_start, old_count, new_start, new_count)`` of each hunk, in order (as in the
    ``@@`` headers of a diff without context: a count of 0 means that side is empty, and its
    start is then the line after which the other side's lines go)."""

    def ordinal(self, line: int) -> int | None:
        """The 0-based index of new line ``line`` among ``added``; None if it was not added."""
        at = bisect_left(self.added, line)
        return at if at < len(self.added) and self.added[at] == line else None

    def hash_at(self, line: int) -> int | None:
        """line_hash of added new line ``line`` (None: not added, or too short to hash)."""
        at = self.ordinal(line)
        return None if at is None else self.hashes[at]

    def replaced(self, line: int) -> tuple[str, int, int] | None:
        """For the hunk whose new side holds ``line``: ``(old path, first, last)`` of the lines
        that hunk removed in the first parent (1-based, inclusive). None when ``line`` is in
        no hunk, or its hunk removed nothing."""
        at = bisect_right([h[2] for h in self.hunks], line) - 1
        if at < 0:
            return None
        old_start, old_count, new_start, new_count = self.hunks[at]
        if not new_start <= line < new_start + new_count:
            return None
        if old_count == 0 or self.old_path is None:
            return None
        return (self.old_path, old_start, old_start + old_count - 1)


@dataclass(frozen=True, slots=True)
class Change:
    """What one commit changed against its first parent (a root commit: against nothing)."""

    commit: CommitSha
    parent: CommitSha | None
    """The first parent; None for a root commit (or a shallow clone's grafted one)."""
    committer_time: int
    """Unix seconds."""
    patch_id: str | None
    """Hex sha256 of the change without line numbers, context or whitespace: the same for
    the same edits to the same files. None when the change is over the size cap."""
    files: Mapping[str, FileChange] = field(hash=False)
    """By new path; deleted files have none. Empty when over the size cap."""
    complete: bool
    """False when the change was over the size cap (``files`` is then empty)."""
    merge: bool = False
    """Whether the commit has more than one parent (its lines may come from the others)."""
    _counts: Counter[int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        counts: Counter[int] = Counter()
        for change in self.files.values():
            counts.update(h for h in change.hashes if h is not None)
        object.__setattr__(self, "_counts", counts)

    def hash_count(self, h: int) -> int:
        """How many added lines of the whole change (all files) have line hash ``h``."""
        return self._counts.get(h, 0)


# -- parsing ------------------------------------------------------------------------------


def _path(raw: bytes, prefix: bytes) -> str | None:
    """A path from a ``---``/``+++`` line (None for /dev/null). git appends a tab to a name
    holding a space, after the quotes if it quoted it; a name ending in a tab is quoted."""
    if raw.endswith(b"\t"):
        raw = raw[:-1]
    if raw == b"/dev/null":
        return None
    name = c_unquote(raw)
    if name.startswith(prefix):
        name = name[len(prefix) :]
    return name.decode("utf-8", "surrogateescape")


def _quoted_end(raw: bytes) -> int:
    """The index just past the C-quoted string that starts ``raw`` (-1 when it does not end)."""
    i = 1
    while i < len(raw):
        if raw[i] == 0x5C:
            i += 2
        elif raw[i] == 0x22:
            return i + 1
        else:
            i += 1
    return -1


def _header_paths(rest: bytes) -> tuple[str | None, str | None]:
    """Both names of a ``diff --git a/x b/y`` line. Unquoted names with spaces are ambiguous
    there, so this is only trusted for the same name twice; ``rename``, ``---`` and ``+++``
    lines, which come later, say the names of anything else."""
    names: list[bytes] = []
    if rest.startswith(b'"'):
        end = _quoted_end(rest)
        if end > 0:
            names = [c_unquote(rest[:end]), c_unquote(rest[end + 1 :])]
    elif rest.endswith(b'"') and b' "' in rest:
        at = rest.index(b' "')
        names = [rest[:at], c_unquote(rest[at + 1 :])]
    else:
        half = (len(rest) - 1) // 2
        if (
            len(rest) % 2 == 1
            and rest[half : half + 3] == b" b/"
            and rest[2:half] == rest[half + 3 :]
        ):
            names = [rest[:half], rest[half + 1 :]]
        elif b" b/" in rest:
            names = list(rest.split(b" b/", 1))
            names[1] = b"b/" + names[1]
    if len(names) != 2:
        return (None, None)
    old, new = names
    return (
        old[2:].decode("utf-8", "surrogateescape") if old.startswith(b"a/") else None,
        new[2:].decode("utf-8", "surrogateescape") if new.startswith(b"b/") else None,
    )


@dataclass(slots=True)
class _File:
    """A file of the change being read."""

    old_path: str | None = None
    new_path: str | None = None
    status: bytes = b"M"
    binary: bytes = b""
    index: bytes = b""
    added: list[int] = field(default_factory=list)
    hashes: list[int | None] = field(default_factory=list)
    hunks: list[tuple[int, int, int, int]] = field(default_factory=list)
    body: hashlib._Hash = field(default_factory=hashlib.sha256)


@dataclass(slots=True)
class _Commit:
    """The change being read."""

    sha: CommitSha
    parent: CommitSha | None
    time: int
    merge: bool = False
    lines: int = 0
    over: bool = False
    files: dict[str, FileChange] = field(default_factory=dict)
    parts: list[tuple[bytes, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class LogParser:
    """Reads ``git log -p -U0`` output with our marker line before each commit."""

    max_lines: int
    commit: _Commit | None = None
    file: _File | None = None
    old_left: int = 0
    new_left: int = 0
    new_line: int = 0

    def feed(self, lines: Iterable[bytes]) -> Iterator[Change]:
        """The changes, each as soon as the next commit (or the end) shows it is complete."""
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if (self.old_left or self.new_left) and self._body(line):
                continue
            if line.startswith(_MARKER):
                done = self._end_commit()
                self.commit = _start(line[len(_MARKER) :])
                if done is not None:
                    yield done
            elif self.commit is not None:
                self._header(line, self.commit)
        done = self._end_commit()
        if done is not None:
            yield done

    def _body(self, line: bytes) -> bool:
        """One line inside a hunk; False (and the hunk is over) when it is not one."""
        kind = line[:1]
        commit, file = self.commit, self.file
        if kind == b"+" and self.new_left:
            self.new_left -= 1
            self.new_line += 1
            if commit is not None and file is not None and not commit.over:
                text = squeeze(line[1:].decode("utf-8", "surrogateescape"))
                squeezed = encode_text(text)
                file.added.append(self.new_line - 1)
                file.hashes.append(hash_squeezed(squeezed) if len(text) >= MIN_HASHED else None)
                file.body.update(b"+" + squeezed + b"\n")
            return True
        if kind == b"-" and self.old_left:
            self.old_left -= 1
            if commit is not None and file is not None and not commit.over:
                squeezed = encode_text(squeeze(line[1:].decode("utf-8", "surrogateescape")))
                file.body.update(b"-" + squeezed + b"\n")
            return True
        if kind == b" " and self.old_left and self.new_left:  # context: never with -U0
            self.old_left -= 1
            self.new_left -= 1
            self.new_line += 1
            return True
        if kind == b"\\":  # "\ No newline at end of file"
            return True
        self.old_left = self.new_left = 0
        return False

    def _header(self, line: bytes, commit: _Commit) -> None:
        if line.startswith(b"diff --git "):
            self._end_file()
            old, new = _header_paths(line[len(b"diff --git ") :])
            self.file = _File(old_path=old, new_path=new)
            return
        file = self.file
        if file is None:
            return
        if line.startswith(b"@@ "):
            self._hunk(line, commit, file)
        elif line.startswith(b"--- "):
            file.old_path = _path(line[4:], b"a/")
        elif line.startswith(b"+++ "):
            file.new_path = _path(line[4:], b"b/")
        elif line.startswith((b"rename from ", b"copy from ")):
            file.old_path = _path(line.split(b" ", 2)[2], b"")
            file.status = b"R"
        elif line.startswith((b"rename to ", b"copy to ")):
            file.new_path = _path(line.split(b" ", 2)[2], b"")
            file.status = b"R"
        elif line.startswith(b"new file mode "):
            file.status = b"A"
        elif line.startswith(b"deleted file mode "):
            file.status = b"D"
        elif line.startswith(b"index "):
            file.index = line[6:].split(b" ")[0]
        elif line.startswith(b"Binary files "):
            file.binary = b"binary " + file.index

    def _hunk(self, line: bytes, commit: _Commit, file: _File) -> None:
        match = HUNK_HEADER.match(line)
        if match is None:
            raise GitFailed("git log: unreadable hunk header")
        old_start, old_count, new_start, new_count = hunk_numbers(match.groups())
        self.old_left, self.new_left, self.new_line = old_count, new_count, new_start
        commit.lines += old_count + new_count
        if not commit.over and commit.lines > self.max_lines:
            commit.over = True
            commit.files.clear()
            commit.parts.clear()
        if not commit.over:
            file.hunks.append((old_start, old_count, new_start, new_count))
            file.body.update(b"@\n")

    def _end_file(self) -> None:
        file, commit = self.file, self.commit
        self.file = None
        self.old_left = self.new_left = 0
        if file is None or commit is None or commit.over:
            return
        if file.status == b"A":
            file.old_path = None
        if file.status == b"D":
            file.new_path = None
        key = file.new_path if file.new_path is not None else file.old_path
        if key is None:
            raise GitFailed("git log: a file diff without a path")
        renamed = file.old_path is not None and file.old_path != key
        head = b"\x00".join(
            (file.status, encode_text(key), encode_text(file.old_path or "") if renamed else b"")
        )
        commit.parts.append((head, file.binary + file.body.digest()))
        if file.new_path is not None:
            commit.files[file.new_path] = FileChange(
                path=file.new_path,
                old_path=file.old_path,
                added=tuple(file.added),
                hashes=tuple(file.hashes),
                hunks=tuple(file.hunks),
            )

    def _end_commit(self) -> Change | None:
        self._end_file()
        commit, self.commit = self.commit, None
        if commit is None:
            return None
        patch_id: str | None = None
        if not commit.over:
            digest = hashlib.sha256()
            for head, body in sorted(commit.parts):
                digest.update(b"%d:%s%d:%s" % (len(head), head, len(body), body))
            patch_id = digest.hexdigest()
        return Change(
            commit=commit.sha,
            parent=commit.parent,
            committer_time=commit.time,
            patch_id=patch_id,
            files={} if commit.over else commit.files,
            complete=not commit.over,
            merge=commit.merge,
        )


def _start(rest: bytes) -> _Commit:
    """The commit a marker line (``<sha> <parents...> <committer time>``) names."""
    words = rest.decode("ascii", "replace").split()
    try:
        if len(words) < 2 or not all(_SHA.fullmatch(w) for w in words[:-1]):
            raise ValueError(words)
        parent = CommitSha(words[1]) if len(words) > 2 else None
        return _Commit(
            sha=CommitSha(words[0]), parent=parent, time=int(words[-1]), merge=len(words) > 3
        )
    except (ValueError, ContentError):
        raise GitFailed("git log: unreadable commit line") from None
