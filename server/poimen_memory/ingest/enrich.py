"""Git enrichment at ingest: anchor requests -> anchors at origin commits, with commit metadata
read from the real repository (message, .mailmap-normalized author, author date, patch id).

Every anchor is stored at its origin: lines named at HEAD or at a past commit are mapped
through blame at that commit (ingest.anchoring places each request); lines named at a past
commit are also kept literally there (for lookups by commit). Origin anchors carry the hash of
each line's text and their place in their commit's change, so that they are found again if that
commit is rewritten (lookup.rewrites).

Every request is resolved with a bounded number of git processes: one to resolve commit ids
(and one more to tell ambiguous prefixes from unknown ones, when some do not resolve), one for
the blobs, one blame per file at HEAD and per (commit, file) named (cached), one for all commit
metadata and one for all their changes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from poimen_memory.domain import (
    Anchor,
    CommitInfo,
    CommitSha,
    ContentError,
    ProjectId,
    RepoId,
    is_commit_prefix,
)
from poimen_memory.gitio import Blame, BlameLine, Blamer, EmptyRepository, GitError, GitRepo
from poimen_memory.gitio.blamerun import merged_ranges
from poimen_memory.gitio.diffs import line_hash
from poimen_memory.gitio.history import Change, changes
from poimen_memory.ingest.anchoring import (
    EDIT_CLOCK_SKEW,
    BadRequest,
    Gathered,
    LocatedEdits,
    Run,
    edit_lines,
    resolve,
)
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

Progress = Callable[[str, int, int], None]
# Files at most this big are read for the texts of lines whose commit's change was too big to
# read (a bigger one leaves those lines' texts unknown, as before).
MAX_TEXT_BYTES = 8 * 1024 * 1024


@dataclass(slots=True)
class Enriched:
    """Anchors per draft (by local id), the commits they need, and the drafts that failed."""

    anchors: dict[str, list[Anchor]] = field(default_factory=dict)
    commits: dict[CommitSha, CommitInfo] = field(default_factory=dict)
    bad: list[BadRecord] = field(default_factory=list)
    unlocated: int = 0  # edits and trace ranges not placed with certainty (left unanchored)
    bad_ids: set[str] = field(default_factory=set)  # local ids of the drafts reported bad
    # Edits HEAD does not hold yet, per draft (by local id), and the HEAD they were met at.
    waiting: dict[str, list[TextAtHead]] = field(default_factory=dict)
    head: CommitSha | None = None

    def reject(self, draft: Draft, reason: str) -> None:
        """Report ``draft`` bad."""
        self.bad.append(BadRecord(draft.source, reason))
        self.bad_ids.add(draft.local_id)


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
    except EmptyRepository as exc:
        # No commit yet: edits wait for the first one; nothing else can be placed.
        for d in wanted:
            if all(isinstance(r, TextAtHead) for r in d.anchors):
                texts = [r for r in d.anchors if isinstance(r, TextAtHead)]
                out.waiting[d.local_id] = [r for r in texts if r.text.strip()]
            else:
                out.reject(d, f"anchors: {exc}")
        return out
    except GitError as exc:
        return _rejected(out, wanted, exc)

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
        return _rejected(out, wanted, exc)
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
        return _rejected(out, wanted, exc)

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
            raise BadRequest(f"{file}: {found}")
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
            ranges = merged_ranges(named.get(key, []))
            own = _added_by(changed.get(at), file, ranges) if by_diff else {}
            rest = [r for r in ranges if r[0] not in own]
            try:
                found = repo.blame(file, at, rest) if rest else None
                origins_at[key] = own | ({} if found is None else {o.line: o for o in found.lines})
            except GitError:
                origins_at[key] = None
        return origins_at[key]

    # The lines at HEAD the edits of each file ask about: one blame of them all per file.
    edited: dict[str, set[int]] = defaultdict(set)
    located: LocatedEdits = {}
    for d in wanted:
        for r in d.anchors:
            if isinstance(r, TextAtHead):
                edited[r.file].update(edit_lines(r, blobs.get((head, r.file)), located))
    partial: dict[str, Blame] = {}

    def head_lines(file: str, lines: Sequence[int]) -> Blame:
        """The origins of ``lines`` of ``file`` at HEAD: its whole-file blame where one is
        kept and the commit it is kept by (the last to touch the file) is known without
        asking git, else git's blame of just the lines asked about (those and the file's
        edited lines, once). A session's few edited lines in a long file cost git the
        commits since they were written, not the file's whole history (nor a whole-file
        blame written to the cache: that one is the editor's to make)."""
        kept = blames.get((file, head))
        if isinstance(kept, Blame):
            return kept
        whole = blamer.cached(file, head, find_last=False)
        if whole is not None:
            return whole
        known = partial.get(file)
        if known is None or any(known.origin(n) is None for n in lines):
            asked = sorted(edited.pop(file, set()) | set(lines))
            try:
                known = repo.blame(file, head, merged_ranges([(n, n) for n in asked]))
            except GitError as exc:
                raise BadRequest(f"{file}: {exc}") from None
            partial[file] = known
        return known

    git = Gathered(
        repo, head, resolved, ambiguous, blobs, present, blame_at, lines_at, head_lines,
        located=located,
    )  # fmt: skip
    # Each run with the path its request named the lines at (where they were seen).
    pending: dict[str, list[tuple[Run, str]]] = defaultdict(list)
    out.head = head
    for d in wanted:
        met = len(git.waiting)
        try:
            for r in d.anchors:
                pending[d.local_id].extend((run, r.file) for run in resolve(r, git))
        except BadRequest as exc:
            out.reject(d, f"anchors: {exc}")
            pending.pop(d.local_id, None)
            del git.waiting[met:]
        if len(git.waiting) > met:
            out.waiting[d.local_id] = git.waiting[met:]
    out.unlocated += git.unlocated
    if on_progress and to_blame:
        on_progress("blaming at past commits", len(to_blame), len(to_blame))

    # 3. commit metadata from the repository, for every commit an anchor points at, and the
    #    changes of the commits origin anchors point at (one process each).
    needed = {run[0] for runs in pending.values() for run, _ in runs}
    origins = {run[0] for runs in pending.values() for run, _ in runs if run[4]}
    try:
        infos = repo.commits(needed, repo_id)
        changed |= _changes(repo, origins - set(changed), on_progress)
    except GitError as exc:
        _rejected(out, [d for d in wanted if d.local_id in pending], exc)
        return Enriched(bad=out.bad, bad_ids=out.bad_ids)
    by_id = {d.local_id: d for d in wanted}
    read: dict[tuple[CommitSha, str], bytes | None] = {}

    def text_at(commit: CommitSha, path: str) -> bytes | None:
        """The file at a commit (remembered), for the texts of lines its change is too big
        to have been read for."""
        if (commit, path) not in read:
            try:
                read[(commit, path)] = repo.blobs([(commit, path)])[(commit, path)]
            except GitError:
                read[(commit, path)] = None
        return read[(commit, path)]

    for local_id, runs in pending.items():
        draft = by_id[local_id]
        missing = [run[0] for run, _ in runs if run[0] not in infos]
        if missing:
            out.reject(draft, f"anchors: commit {missing[0].value} has no metadata")
            continue
        # One anchor per place; where a literal anchor is also an origin one, the origin wins.
        places: dict[tuple[CommitSha, str, int, int], bool] = {}
        seen_at: dict[tuple[CommitSha, str, int, int], str] = {}
        for (commit, path, first, last, at_origin), seen in runs:
            places[(commit, path, first, last)] = (
                places.get((commit, path, first, last), False) or at_origin
            )
            seen_at.setdefault((commit, path, first, last), seen)
        try:
            anchors = [
                _anchor(project, draft, repo_id, place, changed, text_at, seen_at[place])
                if at_origin
                else _anchor(project, draft, repo_id, place, {}, found_in=seen_at[place])
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


def _rejected(out: Enriched, drafts: Sequence[Draft], exc: GitError) -> Enriched:
    """``out``, with each of ``drafts`` reported bad for what git said."""
    for d in drafts:
        out.reject(d, f"anchors: {exc}")
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
    texts: Callable[[CommitSha, str], bytes | None] | None = None,
    found_in: str | None = None,
) -> Anchor:
    """An anchor, with its lines' hashes and place in the change when its commit added them.
    Lines of a change too big to be read (``Change.complete`` false) that blame says the
    commit wrote get their hashes from the file at the commit (``texts``): the same texts,
    with no place in the change (lookups then know which lines may carry the memory).
    ``found_in``: the path the lines were named at (kept when it is not the anchor's own)."""
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
    elif change is not None and not change.complete and first > 0 and texts is not None:
        data = texts(commit, path)
        lines = None if data is None or len(data) > MAX_TEXT_BYTES else data.split(b"\n")
        # Lines all too short to hash (a `}`, a blank line) are told by no text: stored as
        # unknown (StoredAnchor.line_hashes), as every such anchor is.
        if lines is not None and last <= len(lines):
            hashes = tuple(line_hash(line) for line in lines[first - 1 : last])
    return Anchor(
        project, draft.node.sha256, repo_id, commit, path, first, last, hashes, added_from,
        found_in=None if found_in == path else found_in,
    )  # fmt: skip


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
