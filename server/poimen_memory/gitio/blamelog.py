"""What an incremental blame reads of history (gitio.incremental walks it).

The commits between a checkpoint and a target that touched a path come from one ``git log``
with every setting that changes blame's diff pinned on the command line, parsed into a node
per commit with, per parent, what the commit did to the path and the hunks of that diff.
Renames are found as blame's own rename detection finds them (``git diff-tree -M``, the path
the only destination). Where the answer could differ from git blame's: Unsupported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from poimen_memory.domain import CommitSha
from poimen_memory.gitio.blame import decode_path
from poimen_memory.gitio.diffs import HUNK_HEADER, hunk_numbers
from poimen_memory.gitio.errors import GitError, GitFailed
from poimen_memory.gitio.repo import GitRepo
from poimen_memory.gitio.runner import check_not_option, finish_stream

__all__ = [
    "MAX_STREAM_BYTES",
    "MAX_WALK",
    "Hunk",
    "Node",
    "Section",
    "Unsupported",
    "blob_hunks",
    "load_history",
    "real_parents",
    "renamed_from",
]

MAX_WALK = 2000
"""Commits touching the file between the checkpoint and the target; more: git blames."""
MAX_STREAM_BYTES = 64 * 1024 * 1024
"""Bytes of history read for one incremental blame; more: git blames."""

_MARK = b"\x00poimen-blame "
# The diff blame makes, pinned against every setting that changes git log's: hunks apart
# (diff.interHunkContext), the algorithm (blame's is myers), binary files as text, no
# textconv or external diff, every parent of a merge, no renames (blame finds them itself),
# prefixes, colour, notes, relative paths, submodules.
DIFF_ARGS = (
    "-p",
    "-U0",
    "--inter-hunk-context=0",
    "--diff-algorithm=myers",
    "--text",
    "--no-textconv",
    "--no-ext-diff",
    "--no-renames",
    "--no-color",
    "--no-relative",
    "--submodule=short",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--raw",
    "--no-abbrev",
)
LOG_ARGS = (
    "log",
    "--root",
    "--parents",
    "--diff-merges=separate",
    "--no-notes",
    "--use-mailmap",
    *DIFF_ARGS,
    "--format=%x00poimen-blame %H %P%x00%aN%x00%aE%x00%at%x00%s",
)

Hunk = tuple[int, int, int, int]
"""(old start, old count, new start, new count) of a ``-U0`` hunk."""


class Unsupported(GitError):
    """The incremental blame cannot promise git's answer here; git blames instead."""


@dataclass(slots=True)
class Section:
    """What a commit did to the path against one parent."""

    status: bytes  # b"M" (changed), b"A" (not in the parent), anything else: unsupported
    old_blob: str
    new_blob: str
    hunks: list[Hunk] = field(default_factory=list)


@dataclass(slots=True)
class Node:
    """A commit that touched the path: its (rewritten) parents, author and sections."""

    commit: str
    parents: list[str]
    author: tuple[str, str, int, str]
    sections: list[Section] = field(default_factory=list)


def load_history(repo: GitRepo, base: CommitSha, path: str, tip: CommitSha) -> dict[str, Node]:
    """The commits of ``base..tip`` that touched ``path``, by id, as blame simplifies history
    (a merge comes once, with a section per parent)."""
    check_not_option("file", path)
    args = [*LOG_ARGS, f"^{base.value}", tip.value, "--", path]
    config = repo.blame_config()
    nodes: dict[str, Node] = {}
    with repo.runner.stream(repo.root, args, config=config) as proc:
        assert proc.stdout is not None
        data = proc.stdout.read(MAX_STREAM_BYTES + 1)
        if len(data) > MAX_STREAM_BYTES:
            raise Unsupported("too much history to read")
        finish_stream(proc, args)
    for node in _parse(data, path):
        if node.commit in nodes:
            nodes[node.commit].sections.extend(node.sections)
        else:
            nodes[node.commit] = node
        if len(nodes) > MAX_WALK:
            raise Unsupported(f"more than {MAX_WALK} commits to walk")
    return nodes


def real_parents(repo: GitRepo, commit: str) -> list[str]:
    """The parents of ``commit`` as it was made (not as simplified history names them)."""
    done = repo.runner.run(repo.root, ["rev-list", "--parents", "--no-walk", commit, "--"])
    ids = done.stdout.decode("ascii", "replace").split()
    if not ids or ids[0] != commit:
        raise GitFailed("git rev-list: unexpected output")
    return ids[1:]


def renamed_from(repo: GitRepo, parent: str, commit: str, path: str) -> tuple[str, str] | None:
    """Where blame's rename detection says ``path`` of ``commit`` came from in ``parent``:
    only the path is a destination, every file deleted from ``parent`` a source."""
    deleted = repo.runner.run(
        repo.root,
        ["diff-tree", "-r", "-z", "--no-renames", "--diff-filter=D", "--name-only",
         parent, commit],
    )  # fmt: skip
    sources = [p for p in deleted.stdout.split(b"\x00") if p]
    if not sources:
        return None
    if len(sources) > 1000:
        raise Unsupported("more deleted files than rename detection considers")
    done = repo.runner.run(
        repo.root,
        ["diff-tree", "-r", "-z", "-M", "--raw", "--no-abbrev", parent, commit, "--",
         path, *(s.decode("utf-8", "surrogateescape") for s in sources)],
        config=("core.quotePath=false",),
    )  # fmt: skip
    fields = done.stdout.split(b"\x00")
    i = 0
    while i < len(fields):
        head = fields[i]
        if not head.startswith(b":"):
            i += 1
            continue
        parts = head[1:].split(b" ")
        status = parts[4][:1] if len(parts) > 4 else b""
        if status in (b"R", b"C") and i + 2 < len(fields):
            src = fields[i + 1].decode("utf-8", "surrogateescape")
            dst = fields[i + 2].decode("utf-8", "surrogateescape")
            if dst == path:
                return src, parts[2].decode("ascii")
            i += 3
        else:
            i += 2
    return None


def blob_hunks(repo: GitRepo, old: str, new: str) -> list[Hunk]:
    """The hunks of the diff blame makes between two blobs (a renamed file's)."""
    args = ["diff", *DIFF_ARGS, old, new]
    done = repo.runner.run(repo.root, args, config=repo.blame_config())
    hunks: list[Hunk] = []
    for line in done.stdout.split(b"\n"):
        m = HUNK_HEADER.match(line)
        if m:
            hunks.append(hunk_numbers(m.groups()))
    return hunks


# What the parser looks for, each at the start of a line: the commit header, a raw diff line,
# a hunk header. Content lines of a -U0 patch start with "+", "-" or "\\", so they never match.
_EVENTS = re.compile(
    rb"^(?:\x00poimen-blame ([^\n]*)"
    rb"|:(\d{6}) (\d{6}) ([0-9a-f]{40,64}) ([0-9a-f]{40,64}) ([A-Z])\d*\t([^\n]*)"
    rb"|" + HUNK_HEADER.pattern + rb")",
    re.M,
)


def _parse(data: bytes, path: str) -> Iterator[Node]:
    """Nodes of ``git log`` output, one per section (a merge comes once per parent)."""
    node: Node | None = None
    section: Section | None = None
    for m in _EVENTS.finditer(data):
        if m.group(1) is not None:
            if node is not None:
                yield node
            head, _, rest = m.group(1).partition(b"\x00")
            ids = head.decode("ascii", "replace").split()
            parts = rest.split(b"\x00")
            if len(parts) != 4 or not ids:
                raise GitFailed("git log: unexpected output")
            name, email, when, subject = (p.decode("utf-8", "replace") for p in parts)
            node = Node(ids[0], ids[1:], (name, email, int(when or 0), subject))
            section = None
        elif node is None:
            continue
        elif m.group(2) is not None:
            if decode_path(m.group(7)) != path:
                raise Unsupported(f"{node.commit[:12]}: {path} was a directory")
            if node.sections:
                raise Unsupported(f"{node.commit[:12]}: two entries for one parent")
            old_mode, new_mode, status = m.group(2), m.group(3), m.group(6)
            if status == b"M" and old_mode[:2] != new_mode[:2]:
                status = b"T"
            if b"160000" in (old_mode, new_mode):
                status = b"T"
            section = Section(status, m.group(4).decode(), m.group(5).decode())
            node.sections.append(section)
        else:
            if section is None:
                raise Unsupported("a hunk before its file")
            section.hunks.append(hunk_numbers(m.group(8, 9, 10, 11)))
    if node is not None:
        yield node
