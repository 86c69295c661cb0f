"""Memories of rewritten commits: a line whose blame origin S carries no anchor may have been
recorded on a commit that HEAD's history no longer contains, whose change landed as S (rebase,
cherry-pick, amend, fixup, squash merge, force-pushed rewrite).

Precision comes first. An anchor of a commit O is shown on a line of S only when
- O is not S, is not an ancestor of HEAD (its lines show where blame puts them), and is no
  newer than S;
- and either S's change is O's change (same patch id) and the line sits at the same place in
  it, with the same text ("same-change");
- or the line's text (whitespace ignored, at least 3 characters) occurs once in S's change,
  once in the file, and among the recorded anchors at exactly one place, in this file (or the
  one it was renamed from), of a commit most of whose recorded lines S's change holds
  ("squash": a line copied elsewhere is not where the change landed);
- or, next to such a line, it is the same anchor's next (or previous) line, with the same text
  (a line too short to hash: with matched lines on both sides) -- in a lookup of a whole file
  (code lens) only. A lookup of a range of lines decides each line alone, as a lookup of that
  one line does, so that both show a line the same memories.

A miss costs one indexed query (anchors by line-text hash); only
when that finds candidates does git run: first to tell which candidate commits are still in
HEAD's history (usually all: then nothing more runs), then one process for S's change; both
answers are remembered. What is found is
stored as a commit alias (old -> new), shared by everyone using the store.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cachetools import LRUCache

from poimen_memory.domain import CommitSha, ProjectId, RepoId, Sha256Hash
from poimen_memory.errors import StoreUnavailable
from poimen_memory.gitio import BlameLine, GitError, GitRepo
from poimen_memory.gitio.history import Change, ancestors_of, changes, line_hash
from poimen_memory.lookup.results import How, Landed
from poimen_memory.store import Alias, Candidate, Evidence, Store
from poimen_memory.store.connector import StoreRejected
from poimen_memory.store.rewrites import MAX_CANDIDATES

__all__ = ["Found", "Miss", "Rewrites", "file_hashes"]

log = logging.getLogger(__name__)

# At most this many landing commits are examined per lookup (a lens over a file of many
# commits); their changes are read in one git process.
MAX_LANDING = 512
# Changes and ancestry answers remembered, per repository and commit.
CHANGES = 1024
ANCESTRY = 4096


@dataclass(frozen=True, slots=True)
class Miss:
    """A line whose origin carries no anchor: its origin, its line as the caller numbers it,
    and the hash of its text."""

    origin: BlameLine
    line: int
    text_hash: int | None


@dataclass(frozen=True, slots=True)
class Found:
    """Evidence of a rewritten commit, how it landed, and the caller's lines it is shown on."""

    evidence: Evidence
    landed: Landed
    lines: tuple[int, ...]


def file_hashes(data: bytes) -> list[int | None]:
    """The text hash of every line of a file (index i: line i + 1)."""
    return [line_hash(line) for line in data.split(b"\n")]


class Rewrites:
    """Finds the anchors of rewritten commits for lines that have none at their origin."""

    def prefetch(
        self, project: ProjectId, repo_id: RepoId, hashes: Iterable[int | None]
    ) -> list[Candidate] | None:
        """Every candidate holding one of a file's line texts (``hashes``), to choose from
        once blame has said which lines have nothing at their origin (``find``'s ``known``):
        read while blame runs. None when there are too many to read whole."""
        wanted = {h for h in hashes if h is not None}
        if not wanted:
            return []
        # In the statement's order with no file first: ``find`` puts its own first.
        found = self.store.rewrite_candidates(project, repo_id, wanted, [], "")
        return found if len(found) < MAX_CANDIDATES else None

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._changes: LRUCache[tuple[str, CommitSha], Change | None] = LRUCache(CHANGES)
        self._ancestry: LRUCache[tuple[str, CommitSha, CommitSha], bool] = LRUCache(ANCESTRY)

    def find(
        self,
        project: ProjectId,
        repo_id: RepoId,
        repo: GitRepo,
        head: CommitSha,
        misses: Sequence[Miss],
        file_counts: Counter[int | None],
        *,
        alone: bool = False,
        known: Sequence[Candidate] | None = None,
    ) -> list[Found]:
        """What the rewritten commits say of ``misses``; ``file_counts`` counts the text
        hashes of the file's lines at HEAD (text seen twice there is never matched on text).
        ``alone``: each line is decided as a lookup of that line alone decides it (no line
        follows its matched neighbours, and the anchors of the other lines' landing commits
        count as places a text was recorded at). ``known``: every candidate for the file's
        texts, read before (``prefetch``), chosen from instead of asking the store."""
        hashes = {m.text_hash for m in misses if m.text_hash is not None}
        if not hashes:
            return []
        landing = list(dict.fromkeys(m.origin.commit for m in misses))
        paths = Counter(m.origin.orig_path for m in misses)
        exclude, path = [] if alone else landing, paths.most_common(1)[0][0]
        candidates = (
            self.store.rewrite_candidates(project, repo_id, hashes, exclude, path)
            if known is None
            else self.store.candidates_among(known, hashes, exclude, path)
        )
        if not candidates:
            return []
        # Commits still in HEAD's history are never re-matched: drop them before any change
        # is read (usually every candidate goes here, and nothing more runs). They still count
        # when telling whether a text was recorded at one place only.
        everyone = candidates
        gone = self._not_in_history(repo, head, {c.commit for c in candidates})
        candidates = [c for c in candidates if c.commit in gone]
        if not candidates:
            return []
        # A bounded read may have left places out: then no text counts as recorded once.
        places = _places(everyone) if len(everyone) < MAX_CANDIDATES else None
        offered = {h for c in candidates for h in c.line_hashes if h is not None}
        hopeful = {m.origin.commit for m in misses if m.text_hash in offered}
        by_landing: dict[CommitSha, list[Miss]] = defaultdict(list)
        for m in misses:
            if m.origin.commit in hopeful:  # all its lines: trivial ones may match by place
                by_landing[m.origin.commit].append(m)
        # (candidate, landed) -> lines; the landing commits with the most lines to match first.
        chosen: dict[tuple[Candidate, Landed], list[int]] = defaultdict(list)
        ranked = sorted(by_landing.items(), key=lambda item: -len(item[1]))[:MAX_LANDING]
        landings = self.changes_of(repo, [s for s, _ in ranked])
        for s, group in ranked:
            change = landings[s]
            if change is None or not change.complete:
                continue
            older = [c for c in candidates if c.author_date.timestamp() <= change.committer_time]
            at: dict[tuple[str, int], list[_Hit]] = {}
            rest: dict[tuple[str, int], Miss] = {}
            shown_on: dict[tuple[str, int], int] = {}
            for miss in group:
                key = (miss.origin.orig_path, miss.origin.orig_line)
                shown_on[key] = miss.line
                hits = _match(miss, change, older, file_counts, places)
                if hits:
                    at[key] = hits
                else:
                    rest[key] = miss
            if not alone:
                _extend(at, rest, change)
            for key, hits in at.items():
                for candidate, how, _ in hits:
                    chosen[(candidate, Landed(candidate.commit, s, how))].append(shown_on[key])
        if not chosen:
            return []
        rows = self.store.evidence_of(project, repo_id, [c for c, _ in chosen])
        by_place = {
            (
                r.node.sha256,
                r.anchor.commit,
                r.anchor.file,
                r.anchor.line_start,
                r.anchor.line_end,
            ): r
            for r in rows
        }
        found: list[Found] = []
        for (c, landed), lines in chosen.items():
            row = by_place.get((c.node, c.commit, c.file, c.line_start, c.line_end))
            if row is not None:
                found.append(Found(row, landed, tuple(sorted(set(lines)))))
        new = {Alias(f.landed.recorded, f.landed.landed, f.landed.how) for f in found}
        self._remember(project, repo_id, sorted(new, key=lambda a: (a.new.value, a.old.value)))
        return found

    def change(self, repo: GitRepo, commit: CommitSha) -> Change | None:
        """What ``commit`` changed (first parent), remembered; None when git cannot say."""
        return self.changes_of(repo, [commit])[commit]

    def changes_of(
        self, repo: GitRepo, commits: Sequence[CommitSha]
    ) -> dict[CommitSha, Change | None]:
        """What ``commits`` changed; those not remembered are read in one git process."""
        root = str(repo.root)
        with self._lock:
            known = {c: self._changes[(root, c)] for c in commits if (root, c) in self._changes}
        unknown = [c for c in dict.fromkeys(commits) if c not in known]
        if unknown:
            try:
                found = changes(repo, unknown)
            except GitError as exc:
                log.debug("no changes read: %s", exc)
                found = {}
            with self._lock:
                for c in unknown:
                    known[c] = self._changes[(root, c)] = found.get(c)
        return known

    def _not_in_history(
        self, repo: GitRepo, head: CommitSha, commits: Iterable[CommitSha]
    ) -> set[CommitSha]:
        """Which of ``commits`` HEAD's history does not contain (remembered per HEAD)."""
        root = str(repo.root)
        answers: dict[CommitSha, bool] = {}
        unknown: list[CommitSha] = []
        with self._lock:
            for c in commits:
                hit = self._ancestry.get((root, head, c))
                if hit is None:
                    unknown.append(c)
                else:
                    answers[c] = hit
        if unknown:
            try:
                inside = ancestors_of(repo, unknown, head)
            except GitError as exc:
                log.debug("ancestry not known: %s", exc)
                return {c for c, ancestor in answers.items() if not ancestor}
            with self._lock:
                for c in unknown:
                    answers[c] = self._ancestry[(root, head, c)] = c in inside
        return {c for c, ancestor in answers.items() if not ancestor}

    def _remember(self, project: ProjectId, repo_id: RepoId, aliases: list[Alias]) -> None:
        try:
            self.store.record_aliases(project, repo_id, aliases)
        except (StoreUnavailable, StoreRejected) as exc:
            log.debug("aliases not stored: %s", exc)


_Hit = tuple[Candidate, How, int]
"""A candidate anchor a line shows, how its change landed, and which of its lines it is."""


_Place = tuple[CommitSha, str, int]


def _places(candidates: Sequence[Candidate]) -> dict[int, set[_Place]]:
    """Text hash -> the places (commit, file, line) it was recorded at, among candidates."""
    out: dict[int, set[_Place]] = defaultdict(set)
    for c in candidates:
        for i, known in enumerate(c.line_hashes):
            if known is not None:
                out[known].add((c.commit, c.file, c.line_start + i))
    return out


def _match(
    miss: Miss,
    change: Change,
    candidates: Sequence[Candidate],
    file_counts: Counter[int | None],
    recorded: dict[int, set[_Place]] | None,
) -> list[_Hit]:
    """The candidate anchors ``miss``'s line may show, how its change landed, and where.
    ``recorded``: where each text was recorded, among every candidate (None: not known)."""
    origin = miss.origin
    file_change = change.files.get(origin.orig_path)
    if file_change is None:
        return []
    h = file_change.hash_at(origin.orig_line)
    k = file_change.ordinal(origin.orig_line)
    if k is None or h != miss.text_hash:
        return []
    # The same change under a new id: the same place in it, with the same text (a line too
    # short to hash matches here by its place alone: the change is the same).
    if change.patch_id is not None:
        same = [
            c
            for c in candidates
            if c.patch_id == change.patch_id
            and c.file == file_change.path
            and c.added_from is not None
            and c.added_from <= k <= c.added_from + (c.line_end - c.line_start)
            and _hash_in(c, k - c.added_from) == h
        ]
        if same:
            return [(c, "same-change", k - (c.added_from or 0)) for c in same]
    # Inside a larger or edited change: text seen once in the change, once in the file, and
    # recorded at one place, in this file (or the one it was renamed from), by a commit most
    # of whose recorded lines the change holds (a line copied elsewhere is not its landing).
    if h is None or recorded is None:
        return []
    # The landing commit's own anchors are not places of another commit's text (a lookup
    # of one line leaves them out; a lookup of a range, they are its other lines').
    if sum(1 for place in recorded.get(h, ()) if place[0] != change.commit) != 1:
        return []
    if change.hash_count(h) != 1 or file_counts.get(h, 0) != 1:
        return []
    files = {file_change.path, file_change.old_path}
    hits: list[_Hit] = [
        (c, "squash", i)
        for c in candidates
        if c.file in files and _mostly_in(c, change)
        for i, known in enumerate(c.line_hashes)
        if known == h
    ]
    return hits


def _mostly_in(candidate: Candidate, change: Change) -> bool:
    """Whether the change added at least half of the candidate's recorded lines (by text)."""
    known = [h for h in candidate.line_hashes if h is not None]
    held = sum(1 for h in known if change.hash_count(h) > 0)
    return bool(known) and 2 * held >= len(known)


def _extend(
    at: dict[tuple[str, int], list[_Hit]], rest: dict[tuple[str, int], Miss], change: Change
) -> None:
    """Lines next to matched lines: a line of the change whose neighbour shows an anchor's
    line i, and whose text is that anchor's line i +/- 1, shows it too (text seen elsewhere
    is then told apart by its place). A line too short to hash needs a matched neighbour on
    both sides, at the same anchor. Repeated until nothing more is found."""
    grown = True
    while grown and rest:
        grown = False
        for key, _ in list(rest.items()):
            path, n = key
            file_change = change.files.get(path)
            if file_change is None or file_change.ordinal(n) is None:
                continue
            h = file_change.hash_at(n)
            above = _follow(at.get((path, n - 1), []), 1, h)
            below = _follow(at.get((path, n + 1), []), -1, h)
            both = [hit for hit in above if hit in below]
            hits = both if h is None or (above and below) else above or below
            if hits:
                at[key] = hits
                del rest[key]
                grown = True


def _follow(hits: list[_Hit], step: int, h: int | None) -> list[_Hit]:
    """The anchors' next (``step`` 1) or previous (-1) lines, where their text hash is ``h``."""
    out: list[_Hit] = []
    for c, how, i in hits:
        j = i + step
        if 0 <= j < len(c.line_hashes) and c.line_hashes[j] == h:
            out.append((c, how, j))
    return out


def _hash_in(candidate: Candidate, index: int) -> int | None:
    hashes = candidate.line_hashes
    return hashes[index] if 0 <= index < len(hashes) else None


def landed_nodes(found: Iterable[Found]) -> dict[Sha256Hash, Landed]:
    """node -> how it landed (the first found for it)."""
    out: dict[Sha256Hash, Landed] = {}
    for f in found:
        out.setdefault(f.evidence.node.sha256, f.landed)
    return out
