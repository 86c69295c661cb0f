"""``remember``: a memory an agent records from inside its session, on lines of a file as
they are in the work tree now; and the pending anchors of lines not committed yet.

Lines the work tree shares with HEAD (mapped as an editor buffer is) are anchored at their
origin through blame, as at ingest. Lines HEAD does not have are kept as *pending anchors*:
the hash of each line's text, on top of the HEAD they were written on. ``resolve_file`` looks
for them once a commit after that base holds them:

- only lines blame attributes to commits after the base count (not in the base's history),
  and only while the base is an ancestor of HEAD (another branch's commits never count);
- the pending lines are matched, in order, against those lines of the file at HEAD, and a
  run of matched lines is kept only when its text occurs exactly once among them;
- the kept runs must hold enough of the remembered lines to be them: at least half, and two
  when two or more were remembered, counting only lines with three or more non-blank
  characters (on both sides: a remembered blank or brace is not counted as wanted either),
  all within twice the remembered length;
- the kept lines are anchored at their origin as at ingest, and the pending anchors placed
  are settled, in the same transaction (another of the node's, not placed yet, waits on: a
  later commit may hold it). Lines that were edited before the commit never match: the
  memory is not shown on what it did not describe.

Pending anchors expire (``settings.pending_days``); expired ones are never used. A line's
hash is taken after secrets are redacted from it. Files git never commits (inside ``.git``,
ignored) are refused.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from difflib import SequenceMatcher

from poimen_memory.domain import (
    Anchor,
    CommitSha,
    ContentError,
    Level,
    MemoryNode,
    PendingAnchor,
    ProjectId,
    QueryId,
    RepoId,
    RunId,
    pending_line_hash,
)
from poimen_memory.gitio import (
    BlameLine,
    Blamer,
    EmptyRepository,
    GitError,
    commits_since,
    line_hash,
)
from poimen_memory.gitio.files import read_regular_file
from poimen_memory.gitio.linemap import buffer_lines, head_lines, map_buffer_to_head
from poimen_memory.ingest.enrich import enrich
from poimen_memory.ingest.model import Draft, LinesAtHead, SourceRef
from poimen_memory.ingest.redact import Redactor
from poimen_memory.store import NOTIFY_CHANNEL, Batch, Settled, Store

__all__ = [
    "MAX_WORK_FILE",
    "PENDING_DAYS",
    "RUN_ID",
    "RememberRejected",
    "Remembered",
    "pending_hash",
    "remember",
    "resolve_file",
]

PENDING_DAYS = 14.0
MAX_WORK_FILE = 8 << 20  # a larger file in the work tree is not read
# Commits after a pending anchor's base looked through at most; further, it waits to expire.
MAX_COMMITS_SINCE = 10_000
RUN_ID = RunId("remember")
_SOURCE = SourceRef("remember", 1)


class RememberRejected(ContentError):
    """A ``remember`` that cannot be recorded; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True, slots=True)
class Remembered:
    """What ``remember`` stored: the L0 (and the L1 over it), whether the L0 is new, its
    anchors at their origin, the lines that wait for a commit, and the secrets taken out."""

    node: MemoryNode
    brief: MemoryNode | None
    created: bool
    anchors: list[Anchor]
    pending: list[PendingAnchor]
    redacted: dict[str, int]


def remember(
    store: Store,
    blamer: Blamer,
    repo_id: RepoId,
    project: ProjectId,
    *,
    file: str,
    start: int,
    end: int,
    text: str,
    brief: str | None = None,
    query_id: QueryId,
    pending_days: float = PENDING_DAYS,
    now: datetime | None = None,
) -> Remembered:
    """Record ``text`` on lines ``start..end`` of ``file`` as the work tree has them now, in
    one transaction; idempotent (the nodes' identity is their content). Secrets are redacted
    before anything is hashed. RememberRejected names a bad field; GitError and the store's
    errors pass through."""
    repo = blamer.repo
    at = now or datetime.now(UTC)
    redactor = Redactor()
    clean = redactor(text)
    summary = None if brief is None else redactor(brief)
    l1 = (
        None if summary is None else MemoryNode(Level.L1, project, query_id, RUN_ID, 0, summary, at)
    )
    l0 = MemoryNode(
        Level.L0, project, query_id, RUN_ID, 0, clean, at, () if l1 is None else (l1.sha256,)
    )
    work = _work_lines(blamer, file)
    if end > len(work):
        field = "line" if start == end else "lines"
        raise RememberRejected(field, f"{end} is beyond the end of {file} ({len(work)} lines)")
    try:
        head: CommitSha | None = repo.head()
    except EmptyRepository:
        head = None
    mapping = _work_to_head(blamer, file, head, work)
    committed: list[LinesAtHead] = []
    waiting: list[list[int]] = []  # runs of work-tree lines HEAD does not have
    for n in range(start, end + 1):
        at_head = mapping[n - 1]
        if at_head is None:
            if waiting and waiting[-1][-1] == n - 1:
                waiting[-1].append(n)
            else:
                waiting.append([n])
        elif committed and committed[-1].end == at_head - 1:
            committed[-1] = LinesAtHead(file, committed[-1].start, at_head)
        else:
            committed.append(LinesAtHead(file, at_head, at_head))
    anchors: list[Anchor] = []
    commits = []
    if committed:
        draft = Draft("remember", l0, _SOURCE, anchors=list(committed))
        found = enrich(repo, blamer, [draft], project, repo_id)
        if found.bad:
            raise RememberRejected("file", found.bad[0].reason.removeprefix("anchors: "))
        anchors = found.anchors.get("remember", [])
        commits = list(found.commits.values())
    expires = at + timedelta(days=pending_days)
    pending = [
        PendingAnchor(
            project,
            l0.sha256,
            repo_id,
            file,
            head,
            run[0],
            tuple(pending_hash(work[n - 1]) for n in run),
            at,
            expires,
        )
        for run in waiting
    ]
    known = store.node_levels(project, {l0.sha256})
    nodes = [n for n in (l1, l0) if n is not None]
    store.expire_pending(project)
    store.insert_batch(
        Batch(nodes=nodes, commits=commits, anchors=anchors, pending=pending),
        notify=(NOTIFY_CHANNEL, _payload(project, repo_id)),
    )
    return Remembered(l0, l1, l0.sha256 not in known, anchors, pending, dict(redactor.counts))


def pending_hash(text: str) -> int:
    """A pending line's hash, of its text with secrets redacted (so a secret in a line the
    agent wrote is never kept, even hashed)."""
    return pending_line_hash(Redactor()(text))


def _payload(project: ProjectId, repo_id: RepoId) -> str:
    return json.dumps({"project": project.value, "repo": repo_id.value})


def _work_lines(blamer: Blamer, file: str) -> list[str]:
    """The lines of ``file`` in the work tree (a regular file, reached through no link)."""
    root = blamer.repo.root
    if any(part.lower() == ".git" for part in file.split("/")):
        raise RememberRejected("file", f"{file} is inside .git, not a file of the work tree")
    if blamer.repo.is_ignored(file):
        raise RememberRejected("file", f"{file} is ignored by git: its lines are never committed")
    data = read_regular_file(root, root / file, MAX_WORK_FILE)
    if data is None:
        raise RememberRejected(
            "file",
            f"{file} is not a regular file of at most {MAX_WORK_FILE} bytes in the work tree "
            f"at {root}",
        )
    if blamer.repo.is_binary(data):
        raise RememberRejected("file", f"{file} is a binary file")
    return buffer_lines(data.decode("utf-8", "surrogateescape"))


def _work_to_head(
    blamer: Blamer, file: str, head: CommitSha | None, work: list[str]
) -> list[int | None]:
    """For each work-tree line, the HEAD line it is (None: HEAD does not have it)."""
    if head is None:
        return [None] * len(work)
    try:
        data = blamer.head_blob(file, head)
    except GitError:
        return [None] * len(work)  # not in HEAD: a new file
    head_text = data.decode("utf-8", "surrogateescape")
    return map_buffer_to_head(head_text, "\n".join(work) + "\n")


# -- resolving pending anchors ----------------------------------------------------------------


def resolve_file(
    store: Store,
    blamer: Blamer,
    repo_id: RepoId,
    project: ProjectId,
    file: str,
    head: CommitSha | None = None,
) -> int:
    """Anchor the pending lines of ``file`` that a commit after their base now holds (see
    the module's docstring); returns how many anchors were added. Nothing pending, or
    nothing committed yet: 0, and no git process is run."""
    waiting = store.pending_in_file(project, repo_id, file)
    if not waiting:
        return 0
    repo = blamer.repo
    try:
        head = head or repo.head()
        data = blamer.head_blob(file, head)
        blame = blamer.blame_file(file, head)
    except GitError:
        return 0
    texts = head_lines(data.decode("utf-8", "surrogateescape"))
    hashes = [pending_hash(t) for t in texts]
    significant = [line_hash(t) is not None for t in texts]
    by_base: dict[CommitSha | None, list[PendingAnchor]] = defaultdict(list)
    for row in waiting:
        by_base[row.base].append(row)
    drafts: list[Draft] = []
    settled: list[Settled] = []
    nodes = {n.sha256: n for n in store.get_nodes(project, {r.node for r in waiting})}
    for base, rows in by_base.items():
        if base == head:
            continue  # nothing committed since
        try:
            after = commits_since(repo, base, head, MAX_COMMITS_SINCE)
        except GitError:
            after = None
        if after is None:
            continue
        new = [o is not None and o.commit in after for o in _by_line(blame.lines, len(hashes))]
        for row in rows:
            node = nodes.get(row.node)
            placed = _place(row.line_hashes, hashes, new, significant)
            if node is None or not placed:
                continue
            requests = [LinesAtHead(file, first, last) for first, last in placed]
            drafts.append(Draft(f"{len(drafts)}", node, _SOURCE, anchors=list(requests)))
            settled.append(Settled(project, repo_id, row.node, file, row.line_hashes))
    if not drafts:
        return 0
    found = enrich(repo, blamer, drafts, project, repo_id)
    anchors = [a for d in drafts for a in found.anchors.get(d.local_id, [])]
    if not anchors:
        return 0
    counts = store.insert_batch(
        Batch(commits=list(found.commits.values()), anchors=anchors, settled=settled),
        notify=(NOTIFY_CHANNEL, _payload(project, repo_id)),
    )
    return counts.anchors


def _by_line(lines: Sequence[BlameLine], count: int) -> list[BlameLine | None]:
    """Blamed lines by position (index i: line i + 1), padded to ``count``."""
    out: list[BlameLine | None] = list(lines[:count])
    return out + [None] * (count - len(out))


def _place(
    wanted: Sequence[int],
    hashes: Sequence[int],
    new: Sequence[bool],
    significant: Sequence[bool] | None = None,
) -> list[tuple[int, int]]:
    """The HEAD line ranges (1-based, inclusive) holding runs of the ``wanted`` lines, in
    order, among the ``new`` lines only; a run whose text occurs more than once among them is
    left out (never guess). The runs kept must hold enough of the remembered lines to be
    them: at least half, and two when two or more were remembered, counting only
    ``significant`` lines (a ``}`` or a blank proves nothing), all within twice the
    remembered length; else nothing is placed."""
    seq: list[object] = [
        h if is_new else ("old", i) for i, (h, is_new) in enumerate(zip(hashes, new, strict=True))
    ]
    matcher = SequenceMatcher(None, list(wanted), seq, autojunk=False)
    placed = []
    for i, j, size in matcher.get_matching_blocks():
        if size == 0:
            continue
        run = list(wanted[i : i + size])
        if _occurrences(run, seq) == 1:
            placed.append((j + 1, j + size))
    lines = [n for first, last in placed for n in range(first, last + 1)]
    if not lines:
        return []
    # Of the remembered lines, those that could prove something: a line whose text is one the
    # file has as a blank or a brace proves nothing (a changed line counts, unknown as it is).
    trivial = (
        set()
        if significant is None
        else {h for h, sig in zip(hashes, significant, strict=True) if not sig}
    )
    count = max(1, sum(1 for h in wanted if h not in trivial))
    proven = sum(1 for n in lines if significant is None or significant[n - 1])
    span = lines[-1] - lines[0] + 1
    if proven < max((count + 1) // 2, min(count, 2)) or span > 2 * len(wanted):
        return []
    return placed


def _occurrences(run: list[int], seq: Sequence[object]) -> int:
    """How many times ``run`` occurs as consecutive items of ``seq`` (stops counting at 2)."""
    n, found = len(run), 0
    first = run[0]
    for j, item in enumerate(seq):
        if item == first and list(seq[j : j + n]) == run:
            found += 1
            if found > 1:
                break
    return found
