"""Earlier versions of a line: the memories of the lines that a line's change replaced.

From the change S that produced the line (its blame origin), take the lines removed by the
hunk that holds it, blame them at S's first parent, and look memories up at their origins;
then again from those origins, up to a depth. What is found is labelled as being about an
earlier version (replaced by S, on S's date): never shown as if it were about the line now.
"""

from __future__ import annotations

from collections.abc import Callable

from poimen_memory.domain import CommitInfo, CommitSha, ProjectId, RepoId, Sha256Hash
from poimen_memory.gitio import BlameLine, Blamer, GitError
from poimen_memory.gitio.history import Change
from poimen_memory.lookup.origins import match_evidence, origin_runs
from poimen_memory.lookup.results import Earlier
from poimen_memory.store import Evidence, Store

__all__ = ["MAX_REPLACED_LINES", "earlier_versions"]

# Replaced lines followed per version: a line that replaced a whole file is not worth a
# thousand lookups.
MAX_REPLACED_LINES = 64


def earlier_versions(
    store: Store,
    project: ProjectId,
    repo_id: RepoId,
    blamer: Blamer,
    origin: BlameLine,
    depth: int,
    change_of: Callable[[CommitSha], Change | None],
) -> list[tuple[Evidence, Earlier]]:
    """Memories of the versions ``origin``'s line replaced, ``depth`` versions back, nearest
    first; each node once (at the nearest version it was found)."""
    found: list[tuple[Evidence, Earlier]] = []
    seen: set[Sha256Hash] = set()
    frontier = [origin]
    for level in range(1, depth + 1):
        replaced: dict[BlameLine, CommitInfo] = {}
        for o in frontier:
            lines, info = _replaced(blamer, repo_id, o, change_of)
            if info is not None:
                for line in lines:
                    replaced.setdefault(line, info)
        pairs = list(replaced.items())[:MAX_REPLACED_LINES]
        if not pairs:
            break
        origins = [line for line, _ in pairs]
        replaced_by = dict(pairs)
        rows = store.evidence_for_runs(project, repo_id, origin_runs(origins))
        matched, _ = match_evidence(rows, origins)
        for row in matched:
            if row.node.sha256 in seen:
                continue
            a = row.anchor
            cause = next(
                (
                    info
                    for line, info in replaced_by.items()
                    if line.commit == a.commit
                    and line.orig_path == a.file
                    and (a.line_start == 0 or a.line_start <= line.orig_line <= a.line_end)
                ),
                None,
            )
            if cause is None:
                continue
            seen.add(row.node.sha256)
            found.append((row, Earlier(cause, level)))
        frontier = origins
    return found


def _replaced(
    blamer: Blamer,
    repo_id: RepoId,
    origin: BlameLine,
    change_of: Callable[[CommitSha], Change | None],
) -> tuple[list[BlameLine], CommitInfo | None]:
    """The origins of the lines the hunk holding ``origin``'s line removed, blamed at its
    commit's parent, and that commit's metadata."""
    change = change_of(origin.commit)
    if change is None or change.parent is None or not change.complete:
        return [], None
    file_change = change.files.get(origin.orig_path)
    removed = None if file_change is None else file_change.replaced(origin.orig_line)
    if removed is None:
        return [], None
    path, first, last = removed
    last = min(last, first + MAX_REPLACED_LINES - 1)
    try:
        blame = blamer.repo.blame(path, change.parent, (first, last))
        info = blamer.repo.commits([origin.commit], repo_id).get(origin.commit)
    except GitError:
        return [], None
    lines = [o for o in (blame.origin(n) for n in range(first, last + 1)) if o is not None]
    return lines, info
