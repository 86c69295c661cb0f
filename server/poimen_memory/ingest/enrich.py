"""Git enrichment at ingest: anchor requests -> anchors at origin commits, with commit metadata
read from the real repository (message, .mailmap-normalized author, author date, patch id).

Every anchor is stored at its origin: lines named at HEAD or at a past commit are mapped
through blame at that commit; lines named at a past commit are also kept literally there (for
lookups by commit). Origin anchors carry the hash of each line's text and their place in their
commit's change, so that they are found again if that commit is rewritten (lookup.rewrites).

Every request is resolved with a bounded number of git processes: one to resolve commit ids
(and one more to tell ambiguous prefixes from unknown ones, when some do not resolve), one for
the blobs, one blame per file at HEAD and per (commit, file) named (cached), one for all commit
metadata and one for all their changes.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
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
from poimen_memory.gitio.history import Change, changes
from poimen_memory.ingest.model import (
    BadRecord,
    Draft,
    LinesAtCommit,
    LinesAtHead,
    TextAtHead,
    TraceRange,
    WholeFile,
)

__all__ = ["EDIT_CLOCK_SKEW", "Enriched", "enrich"]


# An edit's lines count as produced by it only if committed no earlier than this before it.
EDIT_CLOCK_SKEW = timedelta(minutes=2)

Progress = Callable[[str, int, int], None]
# (commit, path, first line, last line, at the lines' origin); (0, 0): the whole file.
_Run = tuple[CommitSha, str, int, int, bool]


@dataclass(slots=True)
class Enriched:
    """Anchors per draft (by local id), the commits they need, and the drafts that failed."""

    anchors: dict[str, list[Anchor]] = field(default_factory=dict)
    commits: dict[CommitSha, CommitInfo] = field(default_factory=dict)
    bad: list[BadRecord] = field(default_factory=list)
    unlocated: int = 0  # edits and trace ranges not placed with certainty (left unanchored)
    bad_ids: set[str] = field(default_factory=set)  # local ids of the drafts reported bad

    def reject(self, draft: Draft, reason: str) -> None:
        """Report ``draft`` bad."""
        self.bad.append(BadRecord(draft.source, reason))
        self.bad_ids.add(draft.local_id)


class _Bad(Exception):
    pass


def _runs(origins: Sequence[BlameLine]) -> list[_Run]:
    """Group origins into (commit, path, first, last) runs of consecutive original lines."""
    runs: list[_Run] = []
    for o in origins:
        if runs:
            commit, path, first, last, _ = runs[-1]
            if commit == o.commit and path == o.orig_path and o.orig_line == last + 1:
                runs[-1] = (commit, path, first, o.orig_line, True)
                continue
        runs.append((o.commit, o.orig_path, o.orig_line, o.orig_line, True))
    return runs


def enrich(
    repo: GitRepo,
    blamer: Blamer,
    drafts: Sequence[Draft],
    project: ProjectId,
    repo_id: RepoId,
    on_progress: Progress | None = None,
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
    } | {r.revision for d in wanted for r in d.anchors if isinstance(r, TraceRange)}
    valid = {n for n in names if is_commit_prefix(n)}
    try:
        resolved = repo.resolve_commits(valid)
    except GitError as exc:
        for d in wanted:
            out.reject(d, f"anchors: {exc}")
        return out
    ambiguous = _ambiguous(repo, sorted(n for n, sha in resolved.items() if sha is None))

    # 2. files: existence at the named commits (one batch-check), texts at HEAD for edits and
    #    lines.
    at_commit: set[tuple[CommitSha, str]] = set()
    head_specs: set[tuple[CommitSha, str]] = set()
    for d in wanted:
        for r in d.anchors:
            name = r.revision if isinstance(r, TraceRange) else getattr(r, "commit", None)
            if isinstance(r, LinesAtCommit | WholeFile | TraceRange) and name is not None:
                sha = resolved.get(name)
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

    blames: dict[tuple[str, CommitSha], Blame | GitError] = {}
    past = {
        (resolved[r.revision], r.file)
        for d in wanted
        for r in d.anchors
        if isinstance(r, TraceRange) and resolved.get(r.revision) is not None
    }
    # Lines named at past commits: one blame per (commit, file) of just those lines.
    named: dict[tuple[CommitSha, str], list[tuple[int, int]]] = defaultdict(list)
    for d in wanted:
        for r in d.anchors:
            at = resolved.get(r.commit) if isinstance(r, LinesAtCommit) else None
            if isinstance(r, LinesAtCommit) and at is not None:
                named[(at, r.file)].append((r.start, r.end))
    # One progress count over every (commit, file) blamed at a past commit.
    to_blame = past | set(named)
    blamed: set[tuple[CommitSha, str]] = set()

    def blaming(key: tuple[CommitSha, str]) -> None:
        if on_progress and key in to_blame and key not in blamed:
            on_progress("blaming at past commits", len(blamed), len(to_blame))
            blamed.add(key)

    def blame_at(file: str, at: CommitSha) -> Blame:
        if (file, at) not in blames:
            blaming((at, file))
            try:
                blames[(file, at)] = blamer.blame_file(file, at)
            except GitError as exc:
                blames[(file, at)] = exc
        found = blames[(file, at)]
        if isinstance(found, GitError):
            raise _Bad(f"{file}: {found}")
        return found

    origins_at: dict[tuple[CommitSha, str], dict[int, BlameLine] | None] = {}
    # What the named commits changed (one process): lines a commit added are its own, and
    # need no blame when blame would say so too (no ignore-revs, no moves, not a merge).
    try:
        changed = _changes(repo, {at for at, _ in named}, on_progress)
        by_diff = repo.blames_by_diff()
    except GitError:
        changed, by_diff = {}, False

    def lines_at(file: str, at: CommitSha) -> dict[int, BlameLine] | None:
        """Origins of the named lines of ``file`` at ``at``; None when some range is past
        the end of the file (or git cannot say)."""
        key = (at, file)
        if key not in origins_at:
            blaming(key)
            ranges = _merged(named.get(key, []))
            own = _added_by(changed.get(at), file, ranges) if by_diff else {}
            rest = [r for r in ranges if r[0] not in own]
            try:
                found = repo.blame(file, at, rest) if rest else None
                origins_at[key] = own | ({} if found is None else {o.line: o for o in found.lines})
            except GitError:
                origins_at[key] = None
        return origins_at[key]

    git = _Git(repo, head, resolved, ambiguous, blobs, present, blame_at, lines_at)
    pending: dict[str, list[_Run]] = defaultdict(list)
    for d in wanted:
        try:
            for r in d.anchors:
                pending[d.local_id].extend(_resolve(r, git, out))
        except _Bad as exc:
            out.reject(d, f"anchors: {exc}")
            pending.pop(d.local_id, None)
    if on_progress and to_blame:
        on_progress("blaming at past commits", len(to_blame), len(to_blame))

    # 3. commit metadata from the repository, for every commit an anchor points at, and the
    #    changes of the commits origin anchors point at (one process each).
    needed = {commit for runs in pending.values() for commit, *_ in runs}
    origins = {commit for runs in pending.values() for commit, *_, at_origin in runs if at_origin}
    try:
        infos = repo.commits(needed, repo_id)
        changed |= _changes(repo, origins - set(changed), on_progress)
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
        # One anchor per place; where a literal anchor is also an origin one, the origin wins.
        places: dict[tuple[CommitSha, str, int, int], bool] = {}
        for commit, path, first, last, at_origin in runs:
            places[(commit, path, first, last)] = (
                places.get((commit, path, first, last), False) or at_origin
            )
        try:
            anchors = [
                _anchor(project, draft, repo_id, place, changed if at_origin else {})
                for place, at_origin in places.items()
            ]
        except ContentError as exc:
            out.reject(draft, f"anchors: {exc}")
            continue
        out.anchors[local_id] = anchors
        for a in anchors:
            info = infos[a.commit]
            change = changed.get(a.commit)
            if change is not None and change.patch_id is not None:
                info = replace(info, patch_id=change.patch_id)
            out.commits[a.commit] = info
    return out


def _changes(
    repo: GitRepo, commits: set[CommitSha], on_progress: Progress | None
) -> dict[CommitSha, Change]:
    """The changes of ``commits`` in one git process, with progress."""
    if not commits:
        return {}
    total = len(commits)

    def step(done: int) -> None:
        if on_progress:
            on_progress("reading changes", done, total)

    found = changes(repo, sorted(commits, key=lambda c: c.value), on_progress=step)
    step(total)
    return found


def _anchor(
    project: ProjectId,
    draft: Draft,
    repo_id: RepoId,
    place: tuple[CommitSha, str, int, int],
    changed: dict[CommitSha, Change],
) -> Anchor:
    """An anchor, with its lines' hashes and place in the change when its commit added them."""
    commit, path, first, last = place
    hashes: tuple[int | None, ...] | None = None
    added_from: int | None = None
    change = changed.get(commit)
    file_change = None if change is None or first == 0 else change.files.get(path)
    if file_change is not None:
        start, end = file_change.ordinal(first), file_change.ordinal(last)
        if start is not None and end is not None and end - start == last - first:
            added_from = start
            hashes = tuple(file_change.hash_at(n) for n in range(first, last + 1))
    return Anchor(
        project, draft.node.sha256, repo_id, commit, path, first, last, hashes, added_from
    )


def _added_by(
    change: Change | None, file: str, ranges: Sequence[tuple[int, int]]
) -> dict[int, BlameLine]:
    """The lines of whole ``ranges`` that ``change`` (not a merge) added to ``file``: their
    origin is the commit itself, at that line."""
    if change is None or change.merge or not change.complete:
        return {}
    file_change = change.files.get(file)
    if file_change is None:
        return {}
    own: dict[int, BlameLine] = {}
    for start, end in ranges:
        lines = range(start, end + 1)
        if all(file_change.ordinal(n) is not None for n in lines):
            own |= {n: BlameLine(n, change.commit, file, n) for n in lines}
    return own


def _merged(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Line ranges sorted, with overlapping and touching ones joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
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


@dataclass(frozen=True, slots=True)
class _Git:
    """What resolving a request may ask of the repository, gathered in batches beforehand."""

    repo: GitRepo
    head: CommitSha
    resolved: dict[str, CommitSha | None]
    ambiguous: set[str]
    blobs: dict[tuple[CommitSha, str], bytes | None]
    present: set[tuple[CommitSha, str]]
    blame_at: Callable[[str, CommitSha], Blame]
    lines_at: Callable[[str, CommitSha], dict[int, BlameLine] | None]

    def commit(self, name: str, field_name: str = "commit") -> CommitSha:
        """The commit a request names; _Bad naming it when it is malformed, ambiguous or
        not in the repository."""
        if not is_commit_prefix(name):
            raise _Bad(f"{field_name}: {name!r} is not a commit id (4 to 64 hex digits)")
        sha = self.resolved.get(name)
        if sha is None and name in self.ambiguous:
            raise _Bad(
                f"{field_name} {name!r} is ambiguous in the repository at {self.repo.root} "
                "(several objects start with it); give more digits"
            )
        if sha is None:
            raise _Bad(f"{field_name} {name!r} is not in the repository at {self.repo.root}")
        return sha


def _resolve(request: object, git: _Git, out: Enriched) -> list[_Run]:
    head = git.head
    if isinstance(request, TraceRange):
        return _place_trace(request, git, out)
    if isinstance(request, LinesAtCommit | WholeFile) and request.commit is not None:
        sha = git.commit(request.commit)
        if (sha, request.file) not in git.present:
            raise _Bad(f"{request.file} is not in commit {sha.short()}")
        if isinstance(request, WholeFile):
            return [(sha, request.file, 0, 0, False)]
        # The lines as named (for lookups by commit), and where blame at that commit says
        # they came from (for hovers, wherever the lines are now).
        found = git.lines_at(request.file, sha)
        wanted = range(request.start, request.end + 1)
        if found is None or any(n not in found for n in wanted):
            blame = git.blame_at(request.file, sha)  # some named range is past the end
            if request.end > len(blame.lines):
                raise _Bad(
                    f"lines {request.start}-{request.end}: {request.file} has "
                    f"{len(blame.lines)} lines in commit {sha.short()}"
                )
            found = {o.line: o for o in blame.lines}
        literal: _Run = (sha, request.file, request.start, request.end, False)
        return [literal, *_runs([found[n] for n in wanted])]
    if isinstance(request, WholeFile):
        try:
            last = git.repo.last_commit(request.file, head)
        except GitError as exc:
            raise _Bad(str(exc)) from None
        return [(last, request.file, 0, 0, False)]
    if isinstance(request, LinesAtHead):
        if git.blobs.get((head, request.file)) is None:
            raise _Bad(f"{request.file} is not in HEAD ({head.short()})")
        blame = git.blame_at(request.file, head)
        if request.end > len(blame.lines):
            raise _Bad(
                f"lines {request.start}-{request.end}: {request.file} has {len(blame.lines)} "
                "lines at HEAD"
            )
        return _runs(blame.lines[request.start - 1 : request.end])
    if isinstance(request, TextAtHead):
        return _locate_edit(
            request, git.blobs.get((head, request.file)), lambda f: git.blame_at(f, head), out
        )
    raise _Bad(f"unknown anchor request {request!r}")


def _place_trace(request: TraceRange, git: _Git, out: Enriched) -> list[_Run]:
    """An Agent Trace range at revision R: at R when blame at R says R produced its lines (as
    the spec describes ranges); else, as the spec's reference hook writes them (positions in
    the work tree on top of R, committed later), at the first later commit on HEAD's history
    that touched the file, when blame there says that commit produced the lines at those
    positions. The content hash, when given in a known form, must match too. Otherwise the
    range is left unanchored and counted: never placed on lines it did not produce."""
    revision = git.commit(request.revision, "vcs.revision")
    if (revision, request.file) in git.present:
        placed = _produced_by(request, revision, git)
        if placed is not None:
            return placed
    try:
        later = git.repo.next_commit_touching(request.file, revision, git.head)
    except GitError:
        later = None
    if later is not None:
        placed = _produced_by(request, later, git)
        if placed is not None:
            return placed
    out.unlocated += 1
    return []


def _produced_by(request: TraceRange, commit: CommitSha, git: _Git) -> list[_Run] | None:
    """The range as origin anchors at ``commit`` if ``commit`` produced every line of it."""
    try:
        blame = git.blame_at(request.file, commit)
    except _Bad:
        return None
    if request.end > len(blame.lines):
        return None
    lines = blame.lines[request.start - 1 : request.end]
    if any(o.commit != commit for o in lines):
        return None
    if request.content_hash is not None and not _hash_matches(request, commit, git):
        return None
    return _runs(lines)


def _hash_matches(request: TraceRange, commit: CommitSha, git: _Git) -> bool:
    """Whether the range's text at ``commit`` has the given content hash. Only ``sha256:<hex>``
    (of the lines joined by newlines, with or without a final one) can be checked; a hash in
    another form is not evidence either way and is passed over."""
    scheme, _, digest = (
        request.content_hash.partition(":") if request.content_hash else ("", "", "")
    )
    if scheme.lower() != "sha256" or not digest:
        return True
    try:
        data = git.repo.blob(commit, request.file)
    except GitError:
        return False
    lines = data.split(b"\n")[request.start - 1 : request.end]
    text = b"\n".join(line.removesuffix(b"\r") for line in lines)
    candidates = {hashlib.sha256(t).hexdigest() for t in (text, text + b"\n")}
    return digest.lower() in candidates


def _locate_edit(
    request: TextAtHead,
    data: bytes | None,
    blame_of: Callable[[str], Blame],
    out: Enriched,
) -> list[_Run]:
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
