"""Document lenses: every memory of a blamed file by current line, in blocks of lines that
share their memories, from the store's lens query (no node text is read). The query runs
while git blame still does: the lines blame reports go to the store a batch at a time, so
the lenses are ready about when the blame is."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from poimen_memory.domain import CommitInfo, CommitSha, ProjectId, RepoId
from poimen_memory.gitio import Blame, BlameEntry, BlameLine, Blamer
from poimen_memory.lookup.core import FileAt, LookupCore
from poimen_memory.lookup.located import LocatedLookups
from poimen_memory.lookup.results import DocumentMemories, LineMemory
from poimen_memory.store import Candidate, Store
from poimen_memory.store.evidence import LensBlock

__all__ = ["DocumentLenses", "LensStream", "blame_runs"]

BATCH_RUNS = 256
"""Runs a query of the stream waits for, unless ``BATCH_WAIT_S`` passes first."""
BATCH_WAIT_S = 0.05

_Key = tuple[str, str]  # a memory: (node, commit)


_before = (-1).__add__  # i -> i - 1, in C


class LensStream:
    """The memories by line of one blamed file, worked out as blame finds its lines: runs
    fed here go to the store's lens query in batches, one query at a time in a worker
    thread, and its blocks are merged as they come. Each line's memories come from the runs
    holding it alone; a memory is cited by its first anchor by (file, line_start, line_end)
    over every batch, as one query over all runs would cite it."""

    def __init__(self, store: Store, project: ProjectId, repo_id: RepoId) -> None:
        self._store = store
        self._project = project
        self._repo_id = repo_id
        self._cond = threading.Condition()
        self._pending: list[BlameEntry] = []
        self._fed = False
        self._closed = False
        self._error: BaseException | None = None
        self._worker: threading.Thread | None = None
        self._busy = False  # a batch is taken or waiting: flush() waits for it
        self._hurry = False
        # Written by one thread at a time (the worker, else the caller once it has ended).
        # line -> (its memories' keys, the memories as made then); keys made again later.
        self._lines: dict[int, tuple[tuple[_Key, ...], tuple[LineMemory, ...]]] = {}
        self._stale: set[_Key] = set()
        self._cited: dict[_Key, tuple[str, int, int]] = {}
        self._commits: dict[str, CommitInfo] = {}
        self._memory: dict[_Key, LineMemory] = {}
        # One string object per commit id and file name, whatever batch it came in: a
        # document's memories are kept (a few documents), each naming its commit and file.
        self._strings: dict[str, str] = {}

    def feed(self, entry: BlameEntry) -> None:
        """Lines blame has found (called from the thread reading git's output)."""
        with self._cond:
            if self._closed or self._error is not None:
                return
            self._fed = True
            self._busy = True
            self._pending.append(entry)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="poimen-lens", daemon=True)
                self._worker.start()
            self._cond.notify()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not (self._closed or self._hurry) and len(self._pending) < BATCH_RUNS:
                    self._cond.wait(BATCH_WAIT_S)  # let a batch gather
                batch, self._pending = self._pending, []
                if not batch:
                    return
                self._busy = True
            try:
                self._merge(self._store.lens_blocks(self._project, self._repo_id, batch))
            except BaseException as exc:  # said to the caller by finish()
                with self._cond:
                    self._error = exc
                    self._pending = []
                    self._busy = False
                    self._cond.notify_all()
                return
            with self._cond:
                self._busy = bool(self._pending)
                self._cond.notify_all()

    def _merge(self, blocks: Iterable[LensBlock]) -> None:
        keys: list[_Key] = []
        changed: list[_Key] = []
        blocks_keys: list[tuple[int, int, tuple[_Key, ...]]] = []
        for first, last, ids, nodes, commits, files, starts, ends in blocks:
            if nodes is not None:  # the first block: every memory of the batch, by id
                assert commits is not None
                assert files is not None
                assert starts is not None
                assert ends is not None
                same = self._strings.setdefault
                commits = list(map(same, commits, commits))
                files = list(map(same, files, files))
                keys = list(zip(nodes, commits, strict=True))
                for key, file, start, end in zip(keys, files, starts, ends, strict=True):
                    cited = (file, start, end)
                    known = self._cited.get(key)
                    if known is None or cited < known:
                        self._cited[key] = cited
                        changed.append(key)
            # (ids count from 1; map over C methods: no Python frame per memory)
            blocks_keys.append((first, last, tuple(map(keys.__getitem__, map(_before, ids)))))
        # Each memory as lenses show it, made as its batch comes (while blame runs), again
        # only when a later batch cites it by an earlier anchor (then the lines showing it
        # are made again at the end).
        unknown = {sha for _, sha in changed if sha not in self._commits}
        if unknown:
            self._commits.update(self._store.commits_by_sha(self._project, self._repo_id, unknown))
        for key in changed:
            file, start, end = self._cited[key]
            if key in self._memory:
                self._stale.add(key)
            self._memory[key] = (key[0], file, start, end, key[1])
        memory = self._memory
        for first, last, on_block in blocks_keys:
            shown = (on_block, tuple(map(memory.__getitem__, on_block)))
            self._lines.update(dict.fromkeys(range(first, last + 1), shown))

    def flush(self) -> None:
        """Wait until every entry fed so far is merged (or a query failed)."""
        with self._cond:
            self._hurry = True  # no waiting for a batch to gather
            self._cond.notify_all()
            while self._busy and self._error is None:
                self._cond.wait()
            self._hurry = False

    def cancel(self) -> None:
        """Stop: what is pending is dropped (the blame failed)."""
        with self._cond:
            self._closed = True
            self._pending = []
            self._cond.notify()

    def finish(self, blame: Blame) -> dict[int, tuple[LineMemory, ...]]:
        """The memories by current line, once every batch is merged; when nothing was fed
        (the blame came from a cache), its runs go to the store now, in one query.
        StoreUnavailable (or another failure of a query) is raised here."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            worker, fed = self._worker, self._fed
        if worker is not None:
            worker.join()
        if self._error is not None:
            raise self._error
        if not fed:
            self._merge(
                self._store.lens_blocks(self._project, self._repo_id, blame_runs(blame.lines))
            )
        stale = self._stale
        by_line: dict[int, tuple[LineMemory, ...]] = {}
        remade: dict[int, tuple[LineMemory, ...]] = {}  # one tuple per block, as built
        for line in sorted(self._lines):
            keys, shown = self._lines[line]
            if stale and not stale.isdisjoint(keys):
                again = remade.get(id(keys))
                if again is None:
                    again = remade[id(keys)] = tuple(self._memory[k] for k in keys)
                shown = again
            by_line[line] = shown
        return by_line

    @property
    def commits(self) -> dict[str, CommitInfo]:
        """The commits the memories ``finish`` gave are cited at, by id."""
        return self._commits


class DocumentLenses:
    """The memories of a whole blamed file (what code lenses show)."""

    def __init__(self, core: LookupCore, located: LocatedLookups) -> None:
        self._core = core
        self._located = located

    def stream(self, project: ProjectId, repo_id: RepoId) -> LensStream:
        """A stream to feed blame's entries to while it runs; ``complete`` ends it."""
        return LensStream(self._core.store, project, repo_id)

    def for_document(
        self, project: ProjectId, repo_id: RepoId, blame: Blame, blamer: Blamer
    ) -> DocumentMemories:
        """Every memory of a blamed file, by current line: the store works out, from what
        blame says the lines came from, the blocks of lines sharing memories (each with its
        citation) and their commits; no node text is read."""
        return self.complete(self.stream(project, repo_id), project, repo_id, blame, blamer)

    def prefetch(self, where: FileAt) -> list[Candidate] | None:
        """What ``complete`` will choose rewritten commits' anchors from, read meanwhile."""
        return self._located.prefetch_rewritten(where)

    def complete(
        self,
        stream: LensStream,
        project: ProjectId,
        repo_id: RepoId,
        blame: Blame,
        blamer: Blamer,
        known: Sequence[Candidate] | None = None,
    ) -> DocumentMemories:
        """The memories of ``blame``'s file from ``stream`` (fed as it was blamed, or not at
        all), with those of rewritten commits on lines with none at their origin (chosen
        from ``known`` when ``prefetch`` read them)."""
        by_line = stream.finish(blame)
        commits = dict(stream.commits)
        missed = [(o, o.line, o.line) for o in blame.lines if o.line not in by_line]
        rewritten: dict[int, list[LineMemory]] = {}
        where = FileAt(project, repo_id, blamer, blame.path, blame.rev)
        found = self._located.find_rewritten(where, missed, known=known)
        for f in found:
            e = f.evidence
            anchor, commit = e.anchor, e.commit.sha.value
            memory: LineMemory = (
                e.node.sha256.value,
                anchor.file,
                anchor.line_start,
                anchor.line_end,
                commit,
            )
            commits.setdefault(commit, e.commit)
            for line in f.lines:
                rewritten.setdefault(line, []).append(memory)
        for line, hits in rewritten.items():
            by_line[line] = tuple(dict.fromkeys((*by_line.get(line, ()), *hits)))
        return DocumentMemories(repo_id, blame.path, dict(sorted(by_line.items())), commits)


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
