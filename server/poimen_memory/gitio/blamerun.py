"""One run of ``git blame --porcelain`` (or, for a whole file whose lines are wanted as git
finds them, ``--incremental``): its arguments (every line range checked first), the output
parsed as it streams, and what a failure means in our errors.

GitRepo.blame runs it with the repository's blame settings; only GitError subclasses leave.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from poimen_memory.domain import CommitSha
from poimen_memory.gitio.blame import Blame, BlameEntry, parse_incremental, parse_porcelain
from poimen_memory.gitio.errors import BinaryFile, GitError, GitFailed, UnsafeArgument, Untracked
from poimen_memory.gitio.runner import GitRunner, check_not_option, finish_stream

__all__ = ["LineRanges", "blame_args", "mark_shallow", "merged_ranges", "run_blame"]

LineRanges = tuple[int, int] | Sequence[tuple[int, int]]
"""One ``(start, end)`` range of lines (1-based, inclusive), or several."""


def blame_args(
    settings: Sequence[str],
    rev: CommitSha,
    path: str,
    lines: LineRanges | None,
    *,
    incremental: bool = False,
    since: CommitSha | None = None,
) -> list[str]:
    """The argument list of a blame of ``path`` at ``rev`` with the options ``settings``: of
    the whole file (``lines`` None), one range or several; ``incremental``: entries as git
    finds them (``--incremental``) rather than all at the end, in order (``--porcelain``).
    ``since``: git walks no further than that commit (``^since``); lines that reach it are
    its, marked boundary, at their line in its version of the file."""
    check_not_option("file", path)
    args = ["blame", "--incremental" if incremental else "--porcelain", *settings]
    if lines is not None and len(lines) == 0:
        raise UnsafeArgument("line: no lines to blame")
    ranges: Sequence[object] = (
        [] if lines is None else [lines] if isinstance(lines[0], int) else lines
    )
    for pair in ranges:
        if not (
            isinstance(pair, tuple)
            and len(pair) == 2
            and all(isinstance(n, int) for n in pair)
            and 1 <= pair[0] <= pair[1]
        ):
            raise UnsafeArgument(f"line: expected 1 <= start <= end, got {pair!r}")
        args.append(f"-L{pair[0]},{pair[1]}")
    bottom = [] if since is None else [f"^{since.value}"]
    return [*args, *bottom, rev.value, "--", path]


def merged_ranges(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Line ranges sorted, with overlapping and touching ones joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def run_blame(
    runner: GitRunner,
    root: Path,
    args: Sequence[str],
    config: Sequence[str],
    path: str,
    rev: CommitSha,
    *,
    complete: bool,
    on_entry: Callable[[BlameEntry], None] | None = None,
) -> Blame:
    """The blame ``args`` (from blame_args) asks for, parsed as git writes it (incremental
    output, each entry passed to ``on_entry``, when the args ask for it); a missing path or
    commit is Untracked, a range past the end of the file UnsafeArgument."""
    with runner.stream(root, args, config=config) as proc:
        assert proc.stdout is not None
        try:
            if "--incremental" in args[:2]:
                result = parse_incremental(proc.stdout, path, rev, on_entry)
            else:
                result = parse_porcelain(proc.stdout, path, rev, complete=complete)
        except BinaryFile:
            raise
        except GitFailed:
            finish_stream(proc, args)
            raise
        try:
            finish_stream(proc, args)
        except GitFailed as exc:
            raise _classify(exc, path, rev) from None
    return result


def _classify(exc: GitFailed, path: str, rev: CommitSha) -> GitError:
    if exc.cause in ("no such path", "no such ref"):
        return Untracked(f"{path} is not in commit {rev.short()}")
    if exc.cause == "beyond the end of the file":
        return UnsafeArgument(f"line: beyond the end of {path}")
    return exc


def mark_shallow(blame: Blame, shallow: bytes | None) -> Blame:
    """``blame`` with the commits a shallow clone grafted (named in ``shallow``, the file)
    marked boundary. With --root, git marks no boundary; in a shallow clone the grafted
    commits are one: their lines may be older than the commit says."""
    grafted = set((shallow or b"").decode("ascii", "replace").split())
    for sha in [s for s in blame.commits if s.value in grafted]:
        blame.commits[sha] = replace(blame.commits[sha], boundary=True)
    return blame
