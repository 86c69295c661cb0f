"""Git enrichment at ingest: anchor requests -> anchors at origin commits, with commit metadata
read from the real repository (message, .mailmap-normalized author, author date).

Every request is resolved with a bounded number of git processes: one to resolve commit ids
(and one more to tell ambiguous prefixes from unknown ones, when some do not resolve), one for
the blobs, one blame per file at HEAD (cached), one for all commit metadata.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from poimen_memory.domain import (
    Anchor,
    CommitInfo,
    CommitSha,
    ContentError,
    ProjectId,
    RepoId,
    is_commit_prefix,
)
from poimen_memory.gitio import Blame, BlameLine, Blamer, GitError, GitRepo
from poimen_memory.ingest.model import (
    BadRecord,
    Draft,
    LinesAtCommit,
    LinesAtHead,
    TextAtHead,
    WholeFile,
)

__all__ = ["EDIT_CLOCK_SKEW", "Enriched", "enrich"]


# An edit's lines count as produced by it only if committed no earlier than this before it.
EDIT_CLOCK_SKEW = timedelta(minutes=2)


@dataclass(slots=True)
class Enriched:
    """Anchors per draft (by local id), the commits they need, and the drafts that failed."""

    anchors: dict[str, list[Anchor]] = field(default_factory=dict)
    commits: dict[CommitSha, CommitInfo] = field(default_factory=dict)
    bad: list[BadRecord] = field(default_factory=list)
    unlocated: int = 0  # edits that could not be placed with certainty (left unanchored)
    bad_ids: set[str] = field(default_factory=set)  # local ids of the drafts reported bad

    def reject(self, draft: Draft, reason: str) -> None:
        """Report ``draft`` bad."""
        self.bad.append(BadRecord(draft.source, reason))
        self.bad_ids.add(draft.local_id)


class _Bad(Exception):
    pass


def _runs(origins: Sequence[BlameLine]) -> list[tuple[CommitSha, str, int, int]]:
    """Group origins into (commit, path, first, last) runs of consecutive original lines."""
    runs: list[tuple[CommitSha, str, int, int]] = []
    for o in origins:
        if runs:
            commit, path, first, last = runs[-1]
            if commit == o.commit and path == o.orig_path and o.orig_line == last + 1:
                runs[-1] = (commit, path, first, o.orig_line)
                continue
        runs.append((o.commit, o.orig_path, o.orig_line, o.orig_line))
    return runs


def enrich(
    repo: GitRepo,
    blamer: Blamer,
    drafts: Sequence[Draft],
    project: ProjectId,
    repo_id: RepoId,
) -> Enriched:
    """Resolve every draft's anchor requests; a draft whose requests fail is reported bad."""
    out = Enriched()
    wanted = [d for d in drafts if d.anchors]
    if not wanted:
        return out
    try:
        head = repo.head()
    except GitError as exc:
        for d in wanted:
            out.reject(d, f"anchors: {exc}")
        return out

    # 1. commit ids named by the input, all at once.
    names = {
        r.commit
        for d in wanted
        for r in d.anchors
        if isinstance(r, LinesAtCommit | WholeFile) and r.commit is not None
    }
    valid = {n for n in names if is_commit_prefix(n)}
    try:
        resolved = repo.resolve_commits(valid)
    except GitError as exc:
        for d in wanted:
            out.reject(d, f"anchors: {exc}")
        return out
    ambiguous = _ambiguous(repo, sorted(n for n, sha in resolved.items() if sha is None))

    # 2. files: existence at the named commits (one batch-check; reading every version of a
    #    busy file to count its lines would cost minutes), texts at HEAD for edits and lines.
    at_commit: set[tuple[CommitSha, str]] = set()
    head_specs: set[tuple[CommitSha, str]] = set()
    for d in wanted:
        for r in d.anchors:
            if isinstance(r, LinesAtCommit | WholeFile) and r.commit is not None:
                sha = resolved.get(r.commit)
                if sha is not None:
                    at_commit.add((sha, r.file))
            elif isinstance(r, TextAtHead | LinesAtHead):
                head_specs.add((head, r.file))
    try:
        blobs = repo.blobs(head_specs)
        present = {(s, p) for s, p in repo.existing(at_commit) if p is not None}
    except GitError as exc:
        for d in wanted:
            out.reject(d, f"anchors: {exc}")
        return out

    blames: dict[str, Blame | GitError] = {}

    def blame_at_head(file: str) -> Blame:
        if file not in blames:
            try:
                blames[file] = blamer.blame_file(file, head)
            except GitError as exc:
                blames[file] = exc
        found = blames[file]
        if isinstance(found, GitError):
            raise _Bad(f"{file}: {found}")
        return found

    pending: dict[str, list[tuple[CommitSha, str, int, int]]] = defaultdict(list)
    for d in wanted:
        try:
            for r in d.anchors:
                pending[d.local_id].extend(
                    _resolve(r, repo, head, resolved, ambiguous, blobs, present, blame_at_head, out)
                )
        except _Bad as exc:
            out.reject(d, f"anchors: {exc}")
            pending.pop(d.local_id, None)

    # 3. commit metadata from the repository, for every commit an anchor points at.
    needed = {commit for runs in pending.values() for commit, *_ in runs}
    try:
        infos = repo.commits(needed, repo_id)
    except GitError as exc:
        for d in wanted:
            if d.local_id in pending:
                out.reject(d, f"anchors: {exc}")
        return Enriched(bad=out.bad, bad_ids=out.bad_ids)
    by_id = {d.local_id: d for d in wanted}
    for local_id, runs in pending.items():
        draft = by_id[local_id]
        missing = [c for c, *_ in runs if c not in infos]
        if missing:
            out.reject(draft, f"anchors: commit {missing[0].value} has no metadata")
            continue
        try:
            anchors = [
                Anchor(project, draft.node.sha256, repo_id, commit, path, first, last)
                for commit, path, first, last in dict.fromkeys(runs)
            ]
        except ContentError as exc:
            out.reject(draft, f"anchors: {exc}")
            continue
        out.anchors[local_id] = anchors
        for a in anchors:
            out.commits[a.commit] = infos[a.commit]
    return out


def _ambiguous(repo: GitRepo, prefixes: Sequence[str]) -> set[str]:
    """Which of these unresolved commit prefixes name several objects (one git process)."""
    if not prefixes:
        return set()
    # Asked bare: with ^{commit} git answers "missing" for an ambiguous prefix too.
    asked = "".join(f"{p.lower()}\n" for p in prefixes).encode("ascii")
    try:
        done = repo.runner.run(repo.root, ["cat-file", "--batch-check"], stdin=asked)
    except GitError:
        return set()  # then they are reported as not in the repository, as before
    answers = done.stdout.decode("ascii", "replace").splitlines()
    return {p for p, a in zip(prefixes, answers, strict=False) if a.endswith(" ambiguous")}


def _resolve(
    request: object,
    repo: GitRepo,
    head: CommitSha,
    resolved: dict[str, CommitSha | None],
    ambiguous: set[str],
    blobs: dict[tuple[CommitSha, str], bytes | None],
    present: set[tuple[CommitSha, str]],
    blame_of: Callable[[str], Blame],
    out: Enriched,
) -> list[tuple[CommitSha, str, int, int]]:
    if isinstance(request, LinesAtCommit | WholeFile) and request.commit is not None:
        if not is_commit_prefix(request.commit):
            raise _Bad(f"commit: {request.commit!r} is not a commit id (4 to 64 hex digits)")
        sha = resolved.get(request.commit)
        if sha is None and request.commit in ambiguous:
            raise _Bad(
                f"commit {request.commit!r} is ambiguous in the repository at {repo.root} "
                "(several objects start with it); give more digits"
            )
        if sha is None:
            raise _Bad(f"commit {request.commit!r} is not in the repository at {repo.root}")
        if (sha, request.file) not in present:
            raise _Bad(f"{request.file} is not in commit {sha.short()}")
        if isinstance(request, WholeFile):
            return [(sha, request.file, 0, 0)]
        return [(sha, request.file, request.start, request.end)]
    if isinstance(request, WholeFile):
        try:
            last = repo.last_commit(request.file, head)
        except GitError as exc:
            raise _Bad(str(exc)) from None
        return [(last, request.file, 0, 0)]
    if isinstance(request, LinesAtHead):
        if blobs.get((head, request.file)) is None:
            raise _Bad(f"{request.file} is not in HEAD ({head.short()})")
        blame = blame_of(request.file)
        if request.end > len(blame.lines):
            raise _Bad(
                f"lines {request.start}-{request.end}: {request.file} has {len(blame.lines)} "
                "lines at HEAD"
            )
        return _runs(blame.lines[request.start - 1 : request.end])
    if isinstance(request, TextAtHead):
        return _locate_edit(request, blobs.get((head, request.file)), blame_of, out)
    raise _Bad(f"unknown anchor request {request!r}")


def _locate_edit(
    request: TextAtHead,
    data: bytes | None,
    blame_of: Callable[[str], Blame],
    out: Enriched,
) -> list[tuple[CommitSha, str, int, int]]:
    """Lines the edit produced, or nothing when they cannot be placed with certainty."""
    needle = request.text.strip("\n")
    if data is None or not needle.strip():
        out.unlocated += 1
        return []
    text = data.decode("utf-8", "surrogateescape")
    first = text.find(needle)
    if first < 0 or text.find(needle, first + 1) >= 0:
        out.unlocated += 1  # gone since, or ambiguous: never guess
        return []
    start = text.count("\n", 0, first) + 1
    end = start + needle.count("\n")
    try:
        blame = blame_of(request.file)
    except _Bad:
        out.unlocated += 1
        return []
    kept = []
    for origin in blame.lines[start - 1 : end]:
        commit = blame.commits[origin.commit]
        # Lines older than the edit existed before it: the edit did not produce them.
        if commit.author_time >= request.not_before - EDIT_CLOCK_SKEW and not commit.boundary:
            kept.append(origin)
    if not kept:
        out.unlocated += 1
    return _runs(kept)
