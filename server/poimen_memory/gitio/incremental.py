"""Blame from a checkpoint: the whole-file blame at a descendant, from a cached one.

``git blame`` recomputes a file's history from scratch at every new HEAD. Yet blame is a
function of (commit, path, line): git hands each line of a commit to the first parent where
it is unchanged (to the first parent whose blob is identical, if any; through rename
detection when the path is new in that parent) and blames the commit for what is left. So
once the whole-file blame at a commit A is known, the blame at a descendant C needs only
the commits between them that touched the file:

1. ``git log --parents --diff-merges=separate -p -U0 A..C -- path`` gives those commits, with
   history simplified as blame walks it (a merge whose blob equals a parent's follows that
   parent), their rewritten parents and, per parent, the hunks of the diff blame makes
   (gitio.blamelog reads it);
2. the lines of C are pushed down through the hunks, newest first, as runs of lines;
3. lines that reach A take A's blame; a rename is followed into the renamed-from path; lines
   that reach any other commit outside A..C (a side branch forked below A) are blamed there
   with ``git blame -L``, only those lines.

Everything blame could read differently is pinned on the command line (diff algorithm,
indent heuristic as configured for both, no textconv, all merges' parents), and where this
cannot be exact it is not tried (``Unsupported``, logged at debug): move detection, grafts,
replace refs and shallow history, a configured diff algorithm, an ignored revision inside
the walk (its fuzzy matching is git's own), a path that is a directory or changes type,
too long a walk. A hover after HEAD moved asks for one line only: git blames it over the
commits since the checkpoint (``line_since``). The contract is checked by ``mem blame
--verify`` and by tests that compare every line with ``git blame --porcelain``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from cachetools import LRUCache

from poimen_memory.domain import CommitSha
from poimen_memory.gitio.blame import Blame, BlameCommit, BlameLine, commit_time
from poimen_memory.gitio.blamelog import (
    MAX_WALK,
    Hunk,
    Node,
    Unsupported,
    blob_hunks,
    load_history,
    real_parents,
    renamed_from,
)
from poimen_memory.gitio.blamerun import merged_ranges
from poimen_memory.gitio.errors import GitError
from poimen_memory.gitio.files import read_regular_file
from poimen_memory.gitio.meanwhile import Meanwhile
from poimen_memory.gitio.refs import Stamps, stamps_of
from poimen_memory.gitio.repo import GitRepo
from poimen_memory.gitio.runner import check_not_option

__all__ = [
    "MAX_WALK",
    "Unsupported",
    "blame_from",
    "checkpoint_candidates",
    "line_since",
    "supported",
    "touching",
]

log = logging.getLogger(__name__)

MAX_BOUNDARY = 8
"""Commits outside the walk whose lines are blamed with ``git blame -L``; more: git blames."""
MAX_RENAMES = 8
"""Renames followed in one incremental blame."""
CANDIDATES = 256
"""Commits touching the file, newest first, searched for a cached checkpoint."""


# A run of lines: lines start..start+length-1 of the commit's blob are lines at..at+length-1
# of the blamed file.
_Run = tuple[int, int, int]


def supported(repo: GitRepo) -> str | None:
    """Why incremental blame cannot be exact in ``repo`` (None: it can). What .git holds is
    looked at again only when one of the files it was read from changed (a hover after HEAD
    moved asks this first); the configuration as GitPython's shared readers give it."""
    if repo.detect_moves:
        return "move detection is on"
    try:
        algorithm = repo.config_values("diff", "algorithm")
    except (ValueError, KeyError, OSError):
        return "the configuration is unreadable"
    if algorithm and algorithm[-1].lower() not in ("myers", "default"):
        return f"diff.algorithm is {algorithm[-1]!r}"
    common = repo.common_dir or repo.root / ".git"
    paths = (
        common / "shallow",
        common / "info" / "grafts",
        common / "refs" / "replace",
        common / "packed-refs",
    )
    stamps = tuple(stamps_of(str(p)) for p in paths)
    key = (str(common), str(repo.root))  # (links below the work tree are refused)
    with _HISTORY_LOCK:
        known = _HISTORY.get(key)
    if known is not None and known[0] == stamps:
        return known[1]
    reason = _history_unsupported(repo.root, *paths)
    with _HISTORY_LOCK:
        _HISTORY[key] = (stamps, reason)
    return reason


_HISTORY: LRUCache[tuple[str, str], tuple[tuple[Stamps, ...], str | None]] = LRUCache(maxsize=64)
_HISTORY_LOCK = threading.Lock()


def _history_unsupported(
    root: Path, shallow: Path, grafts: Path, replace: Path, packed: Path
) -> str | None:
    """Why what .git holds beside the objects keeps the walk from being git's (None: it
    does not)."""
    if read_regular_file(root, shallow) is not None:
        return "the clone is shallow"
    if grafts.exists():
        return "the repository has grafts"
    if replace.is_dir() and any(replace.iterdir()):
        return "the repository has replace refs"
    if b" refs/replace/" in (read_regular_file(root, packed) or b""):
        return "the repository has replace refs"
    return None


def touching(repo: GitRepo, path: str, rev: CommitSha, limit: int) -> list[CommitSha]:
    """Up to ``limit`` commits at or before ``rev`` that touched ``path``, newest first (the
    first is the one its blame at ``rev`` is keyed by); a bounded walk."""
    check_not_option("file", path)
    done = repo.runner.run(
        repo.root,
        ["rev-list", f"--max-count={limit}", rev.value, "--", path],
        ok_codes=(0, 128),
    )
    if done.returncode != 0:
        return []
    return [CommitSha(s) for s in done.stdout.decode("ascii", "replace").split()]


def checkpoint_candidates(
    repo: GitRepo, path: str, last: CommitSha, limit: int = CANDIDATES
) -> list[CommitSha]:
    """Up to ``limit`` commits before ``last`` that touched ``path``, newest first."""
    return [c for c in touching(repo, path, last, limit + 1) if c != last][:limit]


def blame_from(
    repo: GitRepo,
    checkpoint: Blame,
    target: CommitSha,
    path: str,
    known: Callable[[CommitSha, str], Blame | None] | None = None,
    line: int | None = None,
) -> Blame:
    """The whole-file blame of ``path`` at ``target`` (the last commit that touched it), from
    ``checkpoint``: the whole-file blame of the same path at an ancestor of ``target``.
    ``known`` may answer with a cached whole-file blame of another commit: lines that reach
    a commit outside the walk use it instead of git blame. With ``line``, only that line is
    traced (a partial blame: a hover's answer, without the rest of the file's bookkeeping).
    Unsupported when the answer could differ from git's."""
    walk = _walk_from(repo, checkpoint, path, known)
    if line is not None:
        return _line_from(walk, repo, path, target, line)
    count = _count_lines(repo.blob(target, path))
    walk.run(path, target, [(1, count, 1)], count)
    return walk.finish(path, target)


def line_since(
    repo: GitRepo, checkpoint: Blame, head: CommitSha, path: str, line: int
) -> BlameLine | None:
    """The origin of ``line`` of ``path`` at ``head``, from ``checkpoint`` (a whole-file blame
    of the same path, kept from before HEAD moved): git blames the line over the commits
    since the checkpoint only (``git blame -L n,n ^checkpoint head``); a line that reaches the
    checkpoint is the checkpoint's line it reached. git's walk is the full blame's until it
    stops, and the full blame goes on from the checkpoint's version of the file as the
    checkpoint's own blame did (no ignore-revs, no move detection: a line's fate does not
    depend on which lines travel with it). None when git stops elsewhere (a commit the
    checkpoint's history holds, reached through another side of a merge). Unsupported where
    the answer could differ from git's; a line past the end is git's UnsafeArgument."""
    _check_exact_from(repo, checkpoint, path)
    if not repo.blames_by_diff():
        raise Unsupported("ignore-revs are in force")
    if head == checkpoint.rev:
        # (``^C C`` leaves git nothing to blame but the work tree's file.)
        return checkpoint.origin(line)
    found = repo.blame(path, head, (line, line), since=checkpoint.rev)
    entry = found.origin(line)
    if entry is None or not entry.commit.value.strip("0"):
        return None
    commit = found.commits.get(entry.commit)
    if commit is not None and not commit.boundary:
        return entry
    if entry.commit != checkpoint.rev or entry.orig_path != path:
        return None
    before = checkpoint.origin(entry.orig_line)
    return None if before is None else replace(before, line=line)


def _walk_from(
    repo: GitRepo,
    checkpoint: Blame,
    path: str,
    known: Callable[[CommitSha, str], Blame | None] | None,
) -> _Walk:
    """A walk from ``checkpoint``, or Unsupported where its answer could differ from git's."""
    _check_exact_from(repo, checkpoint, path)
    return _Walk(repo, checkpoint, known)


def _check_exact_from(repo: GitRepo, checkpoint: Blame, path: str) -> None:
    """Unsupported unless ``checkpoint`` is a whole-file blame of ``path`` and ``repo`` is
    one where an answer continued from it can be git's (``supported``)."""
    if not checkpoint.complete or checkpoint.path != path:
        raise Unsupported("the checkpoint is not a whole-file blame of this path")
    reason = supported(repo)
    if reason is not None:
        raise Unsupported(reason)


def _line_from(walk: _Walk, repo: GitRepo, path: str, target: CommitSha, line: int) -> Blame:
    """The partial blame of ``line`` alone: traced while another thread reads the file at
    ``target`` for its number of lines (the walk's git process need not wait for it); a line
    past the end has no origin, whatever the walk made of it."""
    reading = Meanwhile(lambda: repo.blob(target, path), "poimen-line-count")
    failure: Exception | None = None
    try:
        walk.run(path, target, [(line, 1, line)], line)
    except (GitError, LookupError) as exc:  # past the end, it may not map
        failure = exc
    finally:
        reading.wait()
    if not 1 <= line <= _count_lines(reading.result()):
        return Blame(path=path, rev=target, lines=(), commits={}, complete=False)
    if failure is not None:
        raise failure
    return walk.finish(path, target, partial=True)


def _count_lines(data: bytes) -> int:
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


class _Walk:
    """One incremental blame: origins of the target's lines, filled in as runs resolve."""

    def __init__(
        self,
        repo: GitRepo,
        checkpoint: Blame,
        known: Callable[[CommitSha, str], Blame | None] | None = None,
    ) -> None:
        self.repo = repo
        self.known = known
        self.checkpoint = checkpoint
        self.base = checkpoint.rev
        self.ignored = repo.ignored_revisions()
        self.authors: dict[str, tuple[str, str, int, str]] = {}
        self.boundary: dict[tuple[str, str], list[_Run]] = {}
        self.renames = 0
        self.out: list[tuple[str, str, int] | None] = []
        self.extra_commits: dict[CommitSha, BlameCommit] = {}

    def run(self, path: str, tip: CommitSha, runs: list[_Run], size: int) -> None:
        """Resolve ``runs`` of ``path`` at ``tip`` (which touched it) into self.out."""
        if len(self.out) < size:
            self.out.extend([None] * (size - len(self.out)))
        self._walk(path, tip, runs)
        self._blame_boundary()

    def _walk(self, path: str, tip: CommitSha, runs: list[_Run]) -> None:
        if tip == self.base and path == self.checkpoint.path:
            self._from_checkpoint(path, runs)
            return
        nodes = load_history(self.repo, self.base, path, tip)
        if tip.value not in nodes:
            self._outside(tip.value, path, runs)
            return
        children: dict[str, int] = dict.fromkeys(nodes, 0)
        for node in nodes.values():
            for parent in dict.fromkeys(node.parents):
                if parent in children:
                    children[parent] += 1
        pending: dict[str, list[_Run]] = {tip.value: list(runs)}
        ready = [sha for sha, n in children.items() if n == 0]
        done = 0
        while ready:
            sha = ready.pop()
            done += 1
            node = nodes[sha]
            todo = pending.pop(sha, [])
            if todo:
                self._pass(node, path, sorted(todo), nodes, pending)
            for parent in dict.fromkeys(node.parents):
                if parent in children:
                    children[parent] -= 1
                    if children[parent] == 0:
                        ready.append(parent)
        if done != len(nodes):
            raise Unsupported("the history read is not a DAG below the target")
        for sha, left in pending.items():
            if left:
                self._outside(sha, path, left)

    def _pass(
        self,
        node: Node,
        path: str,
        runs: list[_Run],
        nodes: dict[str, Node],
        pending: dict[str, list[_Run]],
    ) -> None:
        if node.commit in self.ignored:
            raise Unsupported(f"{node.commit[:12]} is an ignored revision inside the walk")
        self.authors[node.commit] = node.author
        if not node.parents:
            self._blame(node.commit, path, runs)
            return
        if len(node.sections) != len(node.parents):
            # git prints no diff against a parent with the very same file (one it does not
            # simplify the merge to: a parent below the checkpoint). That parent takes all.
            own = self.repo.blob_id(node.commit, path)
            for parent in node.parents:
                if own is not None and self.repo.blob_id(parent, path) == own:
                    self._hand(parent, path, path, runs, nodes, pending)
                    return
            raise Unsupported(f"{node.commit[:12]}: a diff per parent was expected")
        own_blob = node.sections[0].new_blob
        # Pass 0: the parents that have the path; one with the very same blob takes all.
        origins: list[tuple[str, str, str, list[Hunk]] | None] = []
        for parent, section in zip(node.parents, node.sections, strict=True):
            if section.status == b"M":
                if section.old_blob == own_blob:
                    self._hand(parent, path, path, runs, nodes, pending)
                    return
                origins.append((parent, path, section.old_blob, section.hunks))
            elif section.status == b"A":
                origins.append(None)
            else:
                raise Unsupported(f"{node.commit[:12]}: {path} changed type")
        # Pass 1: the others through rename detection, as blame's find_rename does. It runs
        # against the commit's real parent: the one the simplified history names for the
        # path may lie further down, with other files changed since.
        real: list[str] | None = None
        for i, parent in enumerate(node.parents):
            if origins[i] is not None:
                continue
            if real is None:
                real = real_parents(self.repo, node.commit)
                if len(real) != len(node.parents):
                    raise Unsupported(f"{node.commit[:12]}: parents merged by simplification")
            parent = real[i]
            found = renamed_from(self.repo, parent, node.commit, path)
            if found is None:
                continue
            source, blob = found
            if blob == own_blob:
                self._hand(parent, source, path, runs, nodes, pending)
                return
            origins[i] = (parent, source, blob, [])
        seen: set[str] = set()
        for origin in origins:
            if origin is None or not runs:
                continue
            parent, source, blob, hunks = origin
            if blob in seen:
                continue  # an earlier parent with the same blob took these lines
            seen.add(blob)
            if source != path:
                hunks = blob_hunks(self.repo, blob, own_blob)
            passed, runs = _split(runs, hunks)
            if passed:
                self._hand(parent, source, path, passed, nodes, pending)
        if runs:
            self._blame(node.commit, path, runs)

    def _hand(
        self,
        parent: str,
        source: str,
        path: str,
        runs: list[_Run],
        nodes: dict[str, Node],
        pending: dict[str, list[_Run]],
    ) -> None:
        """Give ``runs`` (numbered in ``parent``'s ``source``) to that parent."""
        if source == path and parent in nodes:
            pending.setdefault(parent, []).extend(runs)
        elif source != path:
            self.renames += 1
            if self.renames > MAX_RENAMES:
                raise Unsupported("too many renames")
            self._walk(source, self.repo.last_commit(source, CommitSha(parent)), runs)
        else:
            self._outside(parent, source, runs)

    def _blame(self, commit: str, path: str, runs: list[_Run]) -> None:
        for start, length, at in runs:
            for k in range(length):
                self.out[at - 1 + k] = (commit, path, start + k)

    def _from_checkpoint(self, path: str, runs: list[_Run]) -> None:
        lines = self.checkpoint.lines
        for start, length, at in runs:
            if start + length - 1 > len(lines):
                raise Unsupported("the checkpoint is shorter than its file")
            for k in range(length):
                origin = lines[start - 1 + k]
                self.out[at - 1 + k] = (origin.commit.value, origin.orig_path, origin.orig_line)

    def _outside(self, commit: str, path: str, runs: list[_Run]) -> None:
        if commit == self.base.value and path == self.checkpoint.path:
            self._from_checkpoint(path, runs)
        else:
            self.boundary.setdefault((commit, path), []).extend(runs)

    def _blame_boundary(self) -> None:
        if len(self.boundary) > MAX_BOUNDARY:
            raise Unsupported(f"{len(self.boundary)} commits outside the walk to blame")
        todo, self.boundary = self.boundary, {}
        for (commit, path), runs in todo.items():
            blame = self.known(CommitSha(commit), path) if self.known is not None else None
            if blame is None or not blame.complete or blame.path != path:
                blame = self.repo.blame(
                    path, CommitSha(commit), merged_ranges([(s, s + n - 1) for s, n, _ in runs])
                )
            self.extra_commits.update(blame.commits)
            for start, length, at in runs:
                for k in range(length):
                    origin = blame.origin(start + k)
                    if origin is None:
                        raise Unsupported(f"git blame at {commit[:12]} lacks line {start + k}")
                    self.out[at - 1 + k] = (origin.commit.value, origin.orig_path, origin.orig_line)

    def finish(self, path: str, target: CommitSha, *, partial: bool = False) -> Blame:
        lines: list[BlameLine] = []
        commits: dict[CommitSha, BlameCommit] = {}
        known = self.checkpoint.commits
        ids: dict[str, CommitSha] = {}
        for i, origin in enumerate(self.out):
            if origin is None:
                if partial:
                    continue
                raise Unsupported(f"line {i + 1} was never resolved")
            sha = ids.get(origin[0])
            if sha is not None:
                lines.append(BlameLine(i + 1, sha, origin[1], origin[2]))
                continue
            sha = ids[origin[0]] = CommitSha(origin[0])
            lines.append(BlameLine(i + 1, sha, origin[1], origin[2]))
            found = known.get(sha) or self.extra_commits.get(sha)
            if found is None:
                name, email, when, summary = self.authors[sha.value]
                found = BlameCommit(sha, name, email, commit_time(when), summary, False)
            commits[sha] = found
        return Blame(
            path=path, rev=target, lines=tuple(lines), commits=commits, complete=not partial
        )


def _unchanged(hunks: Sequence[Hunk]) -> Iterator[tuple[int, int, int]]:
    """(new start, old start, length) of the blocks a diff left alone, then one open block."""
    new_at, old_at = 1, 1
    for old_start, old_count, new_start, new_count in hunks:
        new_first = new_start if new_count else new_start + 1
        old_first = old_start if old_count else old_start + 1
        if new_first - new_at != old_first - old_at:
            raise Unsupported("hunks that do not line up")
        if new_first > new_at:
            yield new_at, old_at, new_first - new_at
        new_at, old_at = new_first + new_count, old_first + old_count
    yield new_at, old_at, -1  # everything after the last hunk


def _split(runs: list[_Run], hunks: Sequence[Hunk]) -> tuple[list[_Run], list[_Run]]:
    """Runs (sorted) cut into those a parent has unchanged (renumbered to its lines) and the
    rest."""
    passed: list[_Run] = []
    kept: list[_Run] = []
    blocks = list(_unchanged(hunks))
    b = 0
    for start, length, at in runs:
        pos, end = start, start + length
        while pos < end:
            while b < len(blocks) and blocks[b][2] >= 0 and blocks[b][0] + blocks[b][2] <= pos:
                b += 1
            new_start, old_start, size = blocks[b]
            block_end = end if size < 0 else new_start + size
            if pos < new_start:
                stop = min(end, new_start)
                kept.append((pos, stop - pos, at + pos - start))
                pos = stop
                continue
            stop = min(end, block_end)
            passed.append((old_start + pos - new_start, stop - pos, at + pos - start))
            pos = stop
    return passed, kept
