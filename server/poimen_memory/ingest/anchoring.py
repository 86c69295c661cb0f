"""Placing one anchor request of a draft on commit lines, for ingest.enrich.

A request names lines at HEAD, lines or a whole file at a commit, an edit's text, or an Agent
Trace range; each becomes runs of lines at the commits that produced them, as blame says. What
this asks of git was gathered in batches beforehand (Gathered); a request that cannot be
resolved raises BadRequest, and edits and trace ranges that cannot be placed with certainty
are left unanchored and counted, never guessed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from poimen_memory.domain import CommitSha, is_commit_prefix
from poimen_memory.gitio import Blame, BlameLine, GitError, GitRepo
from poimen_memory.gitio.files import read_regular_file
from poimen_memory.ingest.model import LinesAtCommit, LinesAtHead, TextAtHead, TraceRange, WholeFile

__all__ = ["EDIT_CLOCK_SKEW", "BadRequest", "Gathered", "Run", "resolve"]


# A work-tree file larger than this is not read for an Agent Trace range's lines.
MAX_WORK_TREE_FILE = 8 << 20
# An edit's lines count as produced by it only if committed no earlier than this before it.
EDIT_CLOCK_SKEW = timedelta(minutes=2)

# (commit, path, first line, last line, at the lines' origin); (0, 0): the whole file.
Run = tuple[CommitSha, str, int, int, bool]


class BadRequest(Exception):
    """An anchor request that cannot be resolved: the draft is reported bad with this."""


def _runs(origins: Sequence[BlameLine]) -> list[Run]:
    """Group origins into (commit, path, first, last) runs of consecutive original lines."""
    runs: list[Run] = []
    for o in origins:
        if runs:
            commit, path, first, last, _ = runs[-1]
            if commit == o.commit and path == o.orig_path and o.orig_line == last + 1:
                runs[-1] = (commit, path, first, o.orig_line, True)
                continue
        runs.append((o.commit, o.orig_path, o.orig_line, o.orig_line, True))
    return runs


@dataclass(slots=True)
class Gathered:
    """What resolving a request may ask of the repository, gathered in batches beforehand,
    and how many edits and trace ranges were left unanchored."""

    repo: GitRepo
    head: CommitSha
    resolved: dict[str, CommitSha | None]
    ambiguous: set[str]
    blobs: dict[tuple[CommitSha, str], bytes | None]
    present: set[tuple[CommitSha, str]]
    blame_at: Callable[[str, CommitSha], Blame]
    lines_at: Callable[[str, CommitSha], dict[int, BlameLine] | None]
    # The origins of some lines of a file at HEAD (BadRequest when git cannot say).
    head_lines: Callable[[str, Sequence[int]], Blame]
    unlocated: int = 0
    # Edits HEAD does not hold yet, in the order met: they wait for a commit.
    waiting: list[TextAtHead] = field(default_factory=list)
    # Where each edit's text is in its file at HEAD, as edit_lines found it (not again).
    located: LocatedEdits = field(default_factory=dict)

    def commit(self, name: str, field_name: str = "commit") -> CommitSha:
        """The commit a request names; BadRequest naming it when it is malformed, ambiguous or
        not in the repository."""
        if not is_commit_prefix(name):
            raise BadRequest(f"{field_name}: {name!r} is not a commit id (4 to 64 hex digits)")
        sha = self.resolved.get(name)
        if sha is None and name in self.ambiguous:
            raise BadRequest(
                f"{field_name} {name!r} is ambiguous in the repository at {self.repo.root} "
                "(several objects start with it); give more digits"
            )
        if sha is None:
            raise BadRequest(f"{field_name} {name!r} is not in the repository at {self.repo.root}")
        return sha


def resolve(request: object, git: Gathered) -> list[Run]:
    """The runs of lines ``request`` names, at the commits that produced them (with the lines
    as named, for a request at a commit); BadRequest when it cannot be resolved."""
    head = git.head
    if isinstance(request, TraceRange):
        return _place_trace(request, git)
    if isinstance(request, LinesAtCommit | WholeFile) and request.commit is not None:
        sha = git.commit(request.commit)
        if (sha, request.file) not in git.present:
            raise BadRequest(f"{request.file} is not in commit {sha.short()}")
        if isinstance(request, WholeFile):
            return [(sha, request.file, 0, 0, False)]
        # The lines as named (for lookups by commit), and where blame at that commit says
        # they came from (for hovers, wherever the lines are now).
        found = git.lines_at(request.file, sha)
        wanted = range(request.start, request.end + 1)
        if found is None or any(n not in found for n in wanted):
            blame = git.blame_at(request.file, sha)  # some named range is past the end
            if request.end > len(blame.lines):
                raise BadRequest(
                    f"lines {request.start}-{request.end}: {request.file} has "
                    f"{len(blame.lines)} lines in commit {sha.short()}"
                )
            found = {o.line: o for o in blame.lines}
        literal: Run = (sha, request.file, request.start, request.end, False)
        return [literal, *_runs([found[n] for n in wanted])]
    if isinstance(request, WholeFile):
        try:
            last = git.repo.last_commit(request.file, head)
        except GitError as exc:
            raise BadRequest(str(exc)) from None
        return [(last, request.file, 0, 0, False)]
    if isinstance(request, LinesAtHead):
        data = git.blobs.get((head, request.file))
        if data is None:
            raise BadRequest(f"{request.file} is not in HEAD ({head.short()})")
        count = _line_count(data.decode("utf-8", "surrogateescape"))
        if request.end > count:
            raise BadRequest(
                f"lines {request.start}-{request.end}: {request.file} has {count} lines at HEAD"
            )
        wanted = range(request.start, request.end + 1)
        origins = {o.line: o for o in git.head_lines(request.file, wanted).lines}
        if any(n not in origins for n in wanted):
            raise BadRequest(f"lines {request.start}-{request.end}: git did not blame them all")
        return _runs([origins[n] for n in wanted])
    if isinstance(request, TextAtHead):
        return _locate_edit(request, git.blobs.get((head, request.file)), git.head_lines, git)
    raise BadRequest(f"unknown anchor request {request!r}")


def _place_trace(request: TraceRange, git: Gathered) -> list[Run]:
    """An Agent Trace range at revision R, placed by what the record and the repository say.

    It may be read two ways: as the specification describes ranges (lines R produced, at
    their positions in R), or as its reference hook writes them (positions in the work tree
    edited on top of R, committed later, by L: the first later commit on HEAD's history that
    touched the file). Each reading is possible when blame says its commit produced every
    line at those positions. When both are, or the record says more, the evidence decides:

    - a ``sha256:`` content hash names the text: a reading whose text differs is out;
    - the record's timestamp: written after L was made, it names R for R's own lines (the
      hook would have named L); written before L, while the work tree held what L commits,
      it is the hook's;
    - with no later commit yet, a work tree whose lines at those positions differ from R's
      holds the record's lines, not committed: they wait for their commit (pending).

    What stays ambiguous is left unanchored and counted: never placed on lines it may not
    have produced."""
    revision = git.commit(request.revision, "vcs.revision")
    at_r = _produced_by(request, revision, git) if (revision, request.file) in git.present else None
    try:
        later = git.repo.next_commit_touching(request.file, revision, git.head)
    except GitError:
        later = None
    if later is None:
        work = _work_tree_lines(request, git)
        if work is not None and work != _lines_of(git, revision, request):
            # Uncommitted lines there: the record's, unless its hash says it is R's.
            if _checkable(request) and not _text_matches(request, work):
                return _placed(at_r, git)
            git.waiting.append(_waiting(request, work))
            return []
        return _placed(at_r, git)
    at_later = _produced_by(request, later, git)
    written = request.recorded_at
    try:
        made = git.repo.committed_at(later)
    except GitError:
        made = None
    if written is None or made is None or abs(written - made) < EDIT_CLOCK_SKEW:
        # No time to tell the readings apart: only one that is possible.
        return _placed(at_r if at_later is None else at_later if at_r is None else None, git)
    if written >= made:
        return _placed(at_r, git)  # a record made after L that names R is about R's lines
    if at_later is not None:
        return _placed(at_later, git)
    # Written before L, and L does not hold those lines there: R's reading stands only where
    # L kept R's lines at the same positions (the hook's would then have them unchanged).
    if at_r is not None and _kept_in_place(request, revision, later, git):
        return _placed(at_r, git)
    git.unlocated += 1
    return []


def _placed(runs: list[Run] | None, git: Gathered) -> list[Run]:
    if runs is None:
        git.unlocated += 1
        return []
    return runs


def _kept_in_place(
    request: TraceRange, revision: CommitSha, later: CommitSha, git: Gathered
) -> bool:
    """Whether ``later`` has R's lines of the range unchanged at the same positions."""
    try:
        blame = git.blame_at(request.file, later)
    except BadRequest:
        return False
    lines = blame.lines[request.start - 1 : request.end]
    return len(lines) == request.end - request.start + 1 and all(
        o.commit == revision and o.orig_line == o.line for o in lines
    )


def _lines_of(git: Gathered, commit: CommitSha, request: TraceRange) -> list[str] | None:
    try:
        data = git.repo.blob(commit, request.file)
    except GitError:
        return None
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    return lines[request.start - 1 : request.end] if request.end <= len(lines) else None


def _work_tree_lines(request: TraceRange, git: Gathered) -> list[str] | None:
    """The range's lines in the work tree now (None: no such file or lines, or not a regular
    file of the work tree)."""
    root = git.repo.root
    data = read_regular_file(root, root / request.file, MAX_WORK_TREE_FILE)
    if data is None:
        return None
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    if request.end > len(lines) or (request.end == len(lines) and lines[-1] == ""):
        return None
    return lines[request.start - 1 : request.end]


def _waiting(request: TraceRange, lines: list[str]) -> TextAtHead:
    """The range's work-tree lines as an edit waiting for its commit."""
    when = request.recorded_at or datetime.now(UTC)
    return TextAtHead(request.file, "\n".join(lines), when, (tuple(lines),))


def _produced_by(request: TraceRange, commit: CommitSha, git: Gathered) -> list[Run] | None:
    """The range as origin anchors at ``commit`` if ``commit`` produced every line of it."""
    try:
        blame = git.blame_at(request.file, commit)
    except BadRequest:
        return None
    if request.end > len(blame.lines):
        return None
    lines = blame.lines[request.start - 1 : request.end]
    if any(o.commit != commit for o in lines):
        return None
    if request.content_hash is not None and not _hash_matches(request, commit, git):
        return None
    return _runs(lines)


def _checkable(request: TraceRange) -> bool:
    """Whether the range's content hash can be checked: ``sha256:<hex>`` only."""
    scheme, _, digest = (request.content_hash or "").partition(":")
    return scheme.lower() == "sha256" and bool(digest)


def _text_matches(request: TraceRange, lines: list[str]) -> bool:
    """Whether ``lines`` have the range's sha256 content hash (of the lines joined by
    newlines, with or without a final one)."""
    digest = (request.content_hash or "").partition(":")[2].lower()
    text = "\n".join(line.removesuffix("\r") for line in lines).encode("utf-8", "surrogateescape")
    return digest in {hashlib.sha256(t).hexdigest() for t in (text, text + b"\n")}


def _hash_matches(request: TraceRange, commit: CommitSha, git: Gathered) -> bool:
    """Whether the range's text at ``commit`` has the given content hash. A hash in another
    form than ``sha256:<hex>`` is not evidence either way and is passed over."""
    if not _checkable(request):
        return True
    lines = _lines_of(git, commit, request)
    return lines is not None and _text_matches(request, lines)


@dataclass(frozen=True, slots=True)
class _Located:
    """Where an edit's text is in the file at HEAD."""

    whole: bool  # the whole text found once
    positions: list[int]  # the lines it added, there (blame decides which it produced)
    waiting: list[tuple[str, ...]]  # blocks of added lines HEAD does not hold
    twice: bool  # a block HEAD holds more than once
    ambiguous: bool  # the whole text more than once: never guessed


def _locate(request: TextAtHead, text: str) -> _Located:
    """The edit's text located once in ``text`` (the file at HEAD), and of it only the lines
    the edit added; when HEAD does not hold the whole text, each block of added lines alone."""
    needle = request.text.strip("\n")
    blocks = request.added_blocks()
    at = _line_of(text, needle)
    if at == _AMBIGUOUS:
        return _Located(False, [], [], False, True)
    positions: list[int] = []
    waiting: list[tuple[str, ...]] = []
    twice = False
    if at is not None:
        lines = needle.split("\n")
        offsets = _offsets(lines, blocks) or list(range(len(lines)))
        positions = [at + offset for offset in offsets]
    else:
        for block in blocks:
            found = _line_of(text, "\n".join(block)) if _proves(block) else None
            if found is None:
                waiting.append(block)
            elif found == _AMBIGUOUS:
                twice = True
            else:
                positions.extend(range(found, found + len(block)))
    count = _line_count(text)
    return _Located(at is not None, [n for n in positions if n <= count], waiting, twice, False)


LocatedEdits = dict[TextAtHead, "_Located"]
"""Edits located in their file at HEAD (by edit_lines, for _locate_edit)."""


def edit_lines(
    request: TextAtHead, data: bytes | None, located: LocatedEdits | None = None
) -> list[int]:
    """The lines of the file at HEAD (``data``) whose blame the edit's placing asks for: all
    of a file's edits are then blamed at once. Where the edit is goes into ``located``, so
    that placing it does not look again."""
    if data is None or not request.text.strip("\n").strip():
        return []
    found = _locate(request, data.decode("utf-8", "surrogateescape"))
    if located is not None:
        located[request] = found
    return found.positions


def _locate_edit(
    request: TextAtHead,
    data: bytes | None,
    blame_of: Callable[[str, Sequence[int]], Blame],
    git: Gathered,
) -> list[Run]:
    """Lines the edit produced, or nothing when they cannot be placed with certainty: its text
    located once in the file at HEAD, and of it only the lines the edit added (the rest is
    context it kept), where blame dates them no earlier than the edit. When HEAD does not
    hold the whole text (a neighbouring line was changed before the commit, or nothing is
    committed yet), each block of added lines is looked for alone; a block HEAD does not hold
    waits for a commit."""
    if not request.text.strip("\n").strip():
        git.unlocated += 1
        return []
    if data is None:
        git.waiting.append(request)
        return []
    found = git.located.get(request) or _locate(request, data.decode("utf-8", "surrogateescape"))
    if found.ambiguous:
        git.unlocated += 1  # never guess
        return []
    if found.waiting:
        blocks_text = "\n".join("\n".join(b) for b in found.waiting)
        git.waiting.append(
            TextAtHead(request.file, blocks_text, request.not_before, tuple(found.waiting))
        )
    positions = found.positions
    if not found.whole and not positions:
        if found.twice and not found.waiting:
            git.unlocated += 1  # HEAD holds what it added twice: left unanchored, counted
        return []
    try:
        blame = blame_of(request.file, positions) if positions else None
    except BadRequest:
        blame = None
    if blame is None:
        git.unlocated += 1
        return []
    origins = {o.line: o for o in blame.lines}
    kept = []
    for n in positions:
        origin = origins.get(n)
        if origin is None:
            continue
        commit = blame.commits[origin.commit]
        # Lines older than the edit existed before it: the edit did not produce them.
        if commit.author_time >= request.not_before - EDIT_CLOCK_SKEW and not commit.boundary:
            kept.append(origin)
    if not kept:
        git.unlocated += 1
    return _runs(kept)


_AMBIGUOUS = -1


def _line_count(text: str) -> int:
    """How many lines blame finds in ``text`` (a last line without a newline counts)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _line_of(text: str, needle: str) -> int | None:
    """The line ``needle`` starts on in ``text`` when it occurs there once; None when it does
    not occur, ``_AMBIGUOUS`` when it occurs more than once."""
    first = text.find(needle)
    if first < 0:
        return None
    if text.find(needle, first + 1) >= 0:
        return _AMBIGUOUS
    return text.count("\n", 0, first) + 1


def _offsets(lines: list[str], blocks: tuple[tuple[str, ...], ...]) -> list[int]:
    """The offsets in ``lines`` of the ``blocks`` of added lines, found in order (empty when
    one is not there: then every line counts)."""
    out: list[int] = []
    cursor = 0
    for block in blocks:
        n = len(block)
        for i in range(cursor, len(lines) - n + 1):
            if tuple(lines[i : i + n]) == block:
                out.extend(range(i, i + n))
                cursor = i + n
                break
        else:
            return []
    return out


def _proves(block: tuple[str, ...]) -> bool:
    """Whether a block holds a line that can be told apart (three non-blank characters)."""
    return any(len("".join(line.split())) >= 3 for line in block)
