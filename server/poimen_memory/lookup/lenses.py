"""Document lenses: every memory of a blamed file by current line, in blocks of lines that
share their memories, from one store query (no node text is read)."""

from __future__ import annotations

from collections.abc import Iterable

from poimen_memory.domain import CommitSha, ProjectId, RepoId, Sha256Hash
from poimen_memory.domain.ids import trusted
from poimen_memory.gitio import Blame, BlameLine, Blamer
from poimen_memory.lookup.core import FileAt, LookupCore
from poimen_memory.lookup.located import LocatedLookups
from poimen_memory.lookup.results import Citation, DocumentMemories, LineMemory, citation_of

__all__ = ["DocumentLenses", "blame_runs"]


class DocumentLenses:
    """The memories of a whole blamed file (what code lenses show)."""

    def __init__(self, core: LookupCore, located: LocatedLookups) -> None:
        self._core = core
        self._located = located

    def for_document(
        self, project: ProjectId, repo_id: RepoId, blame: Blame, blamer: Blamer
    ) -> DocumentMemories:
        """Every memory of a blamed file, by current line: one store query works out, from
        what blame says the lines came from, the blocks of lines sharing memories (each with
        its citation) and their commits; no node text is read."""
        blocks, commits = self._core.store.lens_blocks(project, repo_id, blame_runs(blame.lines))
        by_line: dict[int, tuple[LineMemory, ...]] = {}
        # One LineMemory per (node, commit): lenses need who and when, not each anchor.
        memories: list[LineMemory] = []
        for first, last, ids, *every in blocks:
            if every[0] is not None:  # the first block: every memory, by id from 1
                # Values the store checked on the way in: not checked again, one by one.
                memories = [
                    LineMemory(
                        trusted(Sha256Hash, node),
                        Citation(repo_id, file, start, end, commits[sha]),
                    )
                    for node, sha, file, start, end in zip(*every, strict=True)
                ]
            on_block = tuple(memories[i - 1] for i in ids)
            by_line.update(dict.fromkeys(range(first, last + 1), on_block))
        missed = [(o, o.line, o.line) for o in blame.lines if o.line not in by_line]
        rewritten: dict[int, list[LineMemory]] = {}
        where = FileAt(project, repo_id, blamer, blame.path, blame.rev)
        found = self._located.find_rewritten(where, missed)
        for f in found:
            memory = LineMemory(f.evidence.node.sha256, citation_of(f.evidence))
            for line in f.lines:
                rewritten.setdefault(line, []).append(memory)
        for line, hits in rewritten.items():
            by_line[line] = tuple(dict.fromkeys((*by_line.get(line, ()), *hits)))
        return DocumentMemories(repo_id, blame.path, dict(sorted(by_line.items())))


def blame_runs(lines: Iterable[BlameLine]) -> list[tuple[CommitSha, str, int, int, int]]:
    """Blamed lines as the store's lens_blocks takes them: runs ``(commit, original path,
    first original line, first current line, length)`` of consecutive current lines from
    consecutive original lines of one file at one commit."""
    runs: list[tuple[CommitSha, str, int, int, int]] = []
    for o in lines:
        if runs:
            commit, path, orig_first, first, n = runs[-1]
            if (
                o.commit == commit
                and o.orig_path == path
                and o.orig_line == orig_first + n
                and o.line == first + n
            ):
                runs[-1] = (commit, path, orig_first, first, n + 1)
                continue
        runs.append((o.commit, o.orig_path, o.orig_line, o.line, 1))
    return runs
