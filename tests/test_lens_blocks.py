"""Code lenses worked out by the store's lens_blocks query, against the rule written plainly:
on each current line, the memories of the anchors at that line's origin, in anchor order
(commit, file, line_start, node), each memory (node, commit) once and cited by its first
anchor that covers any line. Real Postgres, generated anchors and blames."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from poimen_memory.domain import (
    Anchor,
    CommitInfo,
    CommitSha,
    Level,
    MemoryNode,
    ProjectId,
    QueryId,
    RepoId,
    RunId,
)
from poimen_memory.gitio import Blame, BlameLine, Blamer, GitError
from poimen_memory.lookup import LookupService, build_service
from poimen_memory.lookup.origins import covered_lines, origin_index
from poimen_memory.lookup.results import Citation, LineMemory
from poimen_memory.lookup.service import _blame_runs
from poimen_memory.store import Batch, Store

REPO = RepoId("github.com/org/lens-blocks")
T0 = datetime(2026, 8, 15, 10, 30, tzinfo=UTC)
COMMITS = [CommitSha(c * 40) for c in "abc"]
FILES = ["src/a.py", "src/b.py"]
NODES = 6
PATH = "src/now.py"
HEAD = CommitSha("f" * 40)

# An anchor: (node, commit, file, line_start, extra lines); line_start 0 anchors the file.
AnchorSpec = tuple[int, int, int, int, int]
# A run of blamed lines: (commit, file, first original line, length).
RunSpec = tuple[int, int, int, int]


class _NoGit:
    """A blamer without git: lines left without memories look for rewritten commits, which
    need the file's text at HEAD; here there is none, so none are found."""

    @dataclass
    class _Repo:
        root: Path = Path("/nonexistent")

    repo = _Repo()

    def head_blob(self, rel: str, rev: CommitSha) -> bytes:
        raise GitError("no git here")


@pytest.fixture(scope="module")
def service(store: Store, tmp_path_factory: pytest.TempPathFactory) -> LookupService:
    return build_service(store, cache_path=tmp_path_factory.mktemp("lens") / "cache.db")


def _node(project: ProjectId, i: int) -> MemoryNode:
    return MemoryNode(
        level=Level.L0,
        project=project,
        query_id=QueryId("q1"),
        run_id=RunId("run-1"),
        t=1,
        text=f"memory {i}",
        created_at=T0,
        parents=(),
    )


def _commit(sha: CommitSha) -> CommitInfo:
    return CommitInfo(REPO, sha, f"change {sha.value[:1]}", "Alice", "alice@org.test", T0)


def _blame(runs: Sequence[RunSpec]) -> tuple[BlameLine, ...]:
    """Current lines 1, 2, ... from the runs in turn (runs may repeat original lines)."""
    lines: list[BlameLine] = []
    for c, f, orig, n in runs:
        for k in range(n):
            lines.append(BlameLine(len(lines) + 1, COMMITS[c], FILES[f], orig + k))
    return tuple(lines)


def _order(a: Anchor) -> tuple[str, str, int, str, int]:
    return (a.commit.value, a.file, a.line_start, a.node.value, a.line_end)


def plainly(
    lines: Sequence[BlameLine], anchors: Sequence[Anchor]
) -> dict[int, tuple[LineMemory, ...]]:
    """The rule line by line: the anchors at each line's origin (whole-file ones included)."""

    def covers(a: Anchor, o: BlameLine) -> bool:
        return (
            a.commit == o.commit
            and a.file == o.orig_path
            and (a.line_start == 0 or a.line_start <= o.orig_line <= a.line_end)
        )

    ordered = sorted(anchors, key=_order)
    cited: dict[tuple[str, str], Anchor] = {}
    for a in ordered:
        if any(covers(a, o) for o in lines):
            cited.setdefault((a.node.value, a.commit.value), a)
    by_line: dict[int, tuple[LineMemory, ...]] = {}
    for o in sorted(lines, key=lambda o: o.line):
        on_line = [cited[(a.node.value, a.commit.value)] for a in ordered if covers(a, o)]
        if on_line:
            by_line[o.line] = tuple(
                dict.fromkeys(
                    (c.node.value, c.file, c.line_start, c.line_end, c.commit.value)
                    for c in on_line
                )
            )
    return by_line


def anchor_by_anchor(
    lines: Sequence[BlameLine], anchors: Sequence[Anchor]
) -> dict[int, tuple[LineMemory, ...]]:
    """The rule as for_document applied it before lens_blocks: each anchor in order mapped
    to current lines through origin_index / covered_lines."""
    index = origin_index(lines)
    by_line: dict[int, list[LineMemory]] = {}
    shared: dict[tuple[str, str], LineMemory] = {}
    for a in sorted(anchors, key=_order):
        hits = covered_lines(index, a.commit, a.file, a.line_start, a.line_end)
        if not hits:
            continue
        memory = shared.setdefault(
            (a.node.value, a.commit.value),
            (a.node.value, a.file, a.line_start, a.line_end, a.commit.value),
        )
        for line in hits:
            by_line.setdefault(line, []).append(memory)
    return {k: tuple(dict.fromkeys(v)) for k, v in sorted(by_line.items())}


anchor_specs = st.lists(
    st.tuples(
        st.integers(0, NODES - 1),
        st.integers(0, len(COMMITS) - 1),
        st.integers(0, len(FILES) - 1),
        st.integers(0, 12),
        st.integers(0, 4),
    ),
    max_size=24,
)
run_specs = st.lists(
    st.tuples(
        st.integers(0, len(COMMITS) - 1),
        st.integers(0, len(FILES) - 1),
        st.integers(1, 14),
        st.integers(1, 6),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(specs=anchor_specs, runs=run_specs)
# One anchor over lines of two runs of its commit, with a run of another commit between.
@example(specs=[(0, 0, 0, 3, 3)], runs=[(0, 0, 1, 4), (1, 0, 4, 2), (0, 0, 5, 3)])
# A line repeated: two current lines from one original line, with a partial overlap.
@example(specs=[(0, 0, 0, 2, 2), (1, 0, 0, 4, 1)], runs=[(0, 0, 1, 3), (0, 0, 3, 3)])
# Several anchors of one node (one starting where the other does), several nodes on a line,
# a whole-file anchor, and one node at two commits (two memories).
@example(
    specs=[
        *[(0, 0, 0, 2, 3), (0, 0, 0, 2, 1), (0, 0, 0, 5, 0), (1, 0, 0, 3, 0), (2, 0, 0, 0, 0)],
        *[(0, 1, 0, 1, 2), (3, 0, 1, 1, 4)],
    ],
    runs=[(0, 0, 1, 6), (1, 0, 1, 3), (0, 1, 2, 2)],
)
def test_lens_blocks_follow_the_rule(
    store: Store,
    service: LookupService,
    specs: list[AnchorSpec],
    runs: list[RunSpec],
) -> None:
    project = ProjectId(f"lens-{uuid.uuid4().hex[:10]}")
    nodes = [_node(project, i) for i in range(NODES)]
    anchors = list(
        dict.fromkeys(
            Anchor(
                project,
                nodes[n].sha256,
                REPO,
                COMMITS[c],
                FILES[f],
                start,
                start + extra if start else 0,
            )
            for n, c, f, start, extra in specs
        )
    )
    store.insert_batch(Batch(nodes=nodes, commits=[_commit(c) for c in COMMITS], anchors=anchors))
    lines = _blame(runs)
    expected = plainly(lines, anchors)
    assert anchor_by_anchor(lines, anchors) == expected  # the reference is the old rule

    blame = Blame(PATH, HEAD, lines, {})
    got = service.for_document(project, REPO, blame, cast(Blamer, _NoGit()))
    assert got.by_line == expected
    assert list(got.by_line) == list(expected)
    for m in {m for ms in got.by_line.values() for m in ms}:  # each cited at its commit
        _, file, start, end, sha = m
        assert got.citation(m) == Citation(REPO, file, start, end, _commit(CommitSha(sha)))

    # Fed as blame finds lines: one line at a time, in an order of their own, each line a
    # query of its own (a memory cited in several, each by its first anchor there).
    stream = service._lenses.stream(project, REPO)
    for o in sorted(lines, key=lambda o: (o.line * 7919) % 101):
        stream.feed((o.commit, o.orig_path, o.orig_line, o.line, 1))
        stream.flush()
    assert stream.finish(blame) == expected

    blocks = store.lens_blocks(project, REPO, _blame_runs(lines))
    spans = [(first, last) for first, last, *_ in blocks]
    assert spans == sorted(spans)
    # Blocks are maximal: neighbours either leave a gap or differ in memories.
    for (_, last), (first, _) in itertools.pairwise(spans):
        assert first > last
        if first == last + 1:
            assert got.by_line[last] != got.by_line[first]


def test_no_runs_no_blocks(store: Store) -> None:
    assert store.lens_blocks(ProjectId("lens-none"), REPO, []) == []
