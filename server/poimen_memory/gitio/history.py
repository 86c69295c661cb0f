"""What commits changed, for following memories across rewritten history.

A rebase, cherry-pick, amend or squash makes new commits out of old changes. To tell which
new commit carries an old one's lines, each commit's change is read once (gitio.patches
reads it): the lines it added, the hunks it made, and a patch id that is the same for the
same edits wherever they land.

``changes`` reads many commits through one ``git log -p -U0`` process per batch, parsed as it
streams; ``ancestors_of`` tells which commits are still reachable from a head. Commit ids
reach git on stdin or as validated hex, never as options. Only GitError subclasses leave here.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from poimen_memory.domain import CommitSha
from poimen_memory.gitio.diffs import line_hash
from poimen_memory.gitio.errors import GitFailed, UnknownCommit, UnsafeArgument
from poimen_memory.gitio.patches import LOG_ARGS, Change, FileChange, LogParser
from poimen_memory.gitio.repo import GitRepo
from poimen_memory.gitio.runner import finish_stream

__all__ = ["Change", "FileChange", "ancestors_of", "changes", "commits_since", "line_hash"]

BATCH = 256
"""Commits per ``git log`` process in changes()."""
PROCESSES = 4
"""At most this many git processes read changes at once (fewer on fewer cores)."""

IS_ANCESTOR_MAX = 8
"""Up to this many commits, one ``merge-base --is-ancestor`` each; more: one rev-list walk."""


def _check_commits(caller: str, shas: Iterable[object]) -> None:
    """UnsafeArgument unless every one of ``shas`` is a CommitSha (validated hex)."""
    for sha in shas:
        if not isinstance(sha, CommitSha):
            raise UnsafeArgument(f"{caller}: expected commit ids, got {type(sha).__name__}")


def changes(
    repo: GitRepo,
    commits: Iterable[CommitSha],
    *,
    max_lines: int = 20_000,
    on_progress: Callable[[int], None] | None = None,
) -> dict[CommitSha, Change]:
    """The changes of many commits, ``BATCH`` commits per git process, parsed as it streams
    (one process for all of a big history would outlast the runner's timeout).

    Each commit is diffed against its first parent (a merge too; a root commit against the
    empty tree), with renames found. Commits the repository lacks are absent from the
    result. A commit with more than ``max_lines`` added plus removed lines is kept as
    incomplete: no files, no patch id (its lines are read past, never held).
    ``on_progress`` gets the number of commits read so far, after each one."""
    wanted = list(dict.fromkeys(commits))
    _check_commits("changes", wanted)
    present = repo.existing([(sha, None) for sha in wanted])
    todo = [sha for sha in wanted if (sha, None) in present]
    if not todo:
        return {}
    out: dict[CommitSha, Change] = {}
    batches = [todo[start : start + BATCH] for start in range(0, len(todo), BATCH)]
    lock = threading.Lock()
    read = [0]

    def progress(_parsed: int) -> None:  # commits read so far, over every process
        with lock:
            read[0] += 1
            if on_progress is not None:
                on_progress(read[0])

    # Diffs cost git most of the time: batches go to as many git processes as there are
    # cores (at most PROCESSES), each parsed as it streams.
    workers = max(1, min(PROCESSES, os.cpu_count() or 1, len(batches)))
    if workers == 1:  # one process: read here, no thread started for it
        for batch in batches:
            out |= _changes_of(repo, batch, max_lines, progress)
        return out
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="poimen-log") as pool:
        for found in pool.map(lambda b: _changes_of(repo, b, max_lines, progress), batches):
            out |= found
    return out


def _changes_of(
    repo: GitRepo,
    todo: list[CommitSha],
    max_lines: int,
    on_progress: Callable[[int], None],
) -> dict[CommitSha, Change]:
    asked = set(todo)
    stdin = b"".join(sha.value.encode("ascii") + b"\n" for sha in todo)
    out: dict[CommitSha, Change] = {}
    parser = LogParser(max_lines=max_lines)
    with repo.runner.stream(repo.root, LOG_ARGS, stdin=subprocess.PIPE) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        # git reads every revision from stdin before it writes anything: no deadlock.
        try:
            proc.stdin.write(stdin)
        except OSError:
            pass  # git is gone: its exit status says why
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            for parsed, change in enumerate(parser.feed(proc.stdout), start=1):
                if change.commit in asked:
                    out[change.commit] = change
                on_progress(parsed)
        except GitFailed:
            if proc.poll() is not None:  # git ended early: what it says is the better error
                finish_stream(proc, LOG_ARGS)
            raise  # else git is stopped on the way out, never waited for
        finish_stream(proc, LOG_ARGS)
    return out


def ancestors_of(repo: GitRepo, commits: Iterable[CommitSha], head: CommitSha) -> set[CommitSha]:
    """Which of ``commits`` are ancestors of (or equal to) ``head``. Commits the repository
    lacks are not. Up to 8 existing commits: ``git merge-base --is-ancestor`` each; more: one
    ``git rev-list head`` walk, stopped once all are seen. UnknownCommit when the repository
    lacks ``head``."""
    wanted = list(dict.fromkeys(commits))
    _check_commits("ancestors_of", (*wanted, head))
    present = {sha for sha, _ in repo.existing([(sha, None) for sha in (*wanted, head)])}
    if head not in present:
        raise UnknownCommit(f"head: {head.value} is not a commit in {repo.root}")
    candidates = [sha for sha in wanted if sha in present]
    if len(candidates) <= IS_ANCESTOR_MAX:

        def is_ancestor(sha: CommitSha) -> bool:
            done = repo.runner.run(
                repo.root, ["merge-base", "--is-ancestor", sha.value, head.value], ok_codes=(0, 1)
            )
            return done.returncode == 0

        if len(candidates) <= 1:
            return {sha for sha in candidates if is_ancestor(sha)}
        # Each answer is a process of its own, mostly waiting on git: several at once.
        workers = max(1, min(PROCESSES, os.cpu_count() or 1, len(candidates)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="poimen-ancestry") as pool:
            answers = list(pool.map(is_ancestor, candidates))
        return {sha for sha, yes in zip(candidates, answers, strict=True) if yes}
    left = {sha.value: sha for sha in candidates}
    reached: set[CommitSha] = set()
    args = ["rev-list", head.value, "--"]
    with repo.runner.stream(repo.root, args) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            hit = left.get(raw.strip().decode("ascii", "replace"))
            if hit is not None:
                del left[hit.value]
                reached.add(hit)
                if not left:
                    return reached  # the rest of the walk is not needed: git is stopped
        finish_stream(proc, args)
    return reached


def commits_since(
    repo: GitRepo, base: CommitSha | None, head: CommitSha, limit: int
) -> set[CommitSha] | None:
    """The commits reachable from ``head`` and not from ``base`` (all of ``head``'s history
    when ``base`` is None); None when ``base`` is not an ancestor of ``head`` (another branch,
    or unknown here), when there are more than ``limit``, or when git cannot say."""
    _check_commits("commits_since", [sha for sha in (base, head) if sha is not None])
    if base is not None:
        ancestor = repo.runner.run(
            repo.root, ["merge-base", "--is-ancestor", base.value, head.value], ok_codes=(0, 1, 128)
        )
        if ancestor.returncode != 0:
            return None  # another line of history: nothing on it came after ``base``
    revs = [head.value] if base is None else [head.value, f"^{base.value}"]
    done = repo.runner.run(
        repo.root, ["rev-list", f"--max-count={limit + 1}", *revs, "--"], ok_codes=(0, 128)
    )
    if done.returncode != 0:
        return None
    found = {CommitSha(raw.decode("ascii")) for raw in done.stdout.split()}
    return None if len(found) > limit else found
