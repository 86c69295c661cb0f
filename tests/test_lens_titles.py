"""Code lens titles and blocks against the rule written plainly: runs of consecutive lines
with memories, at most 20 lines long, each memory once (its first occurrence), titled with
the count, the first names of their commits' authors newest first (two, then ``+n``) and the
newest commit's summary; the file's total above them. Generated documents: memories shared
by neighbouring lines (as the store's blocks give them, one tuple for many lines, or each
line its own), commits of one date, authors of one first name or none."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from poimen_memory.domain import CommitInfo, CommitSha, RepoId
from poimen_memory.lookup.results import NODE, DocumentMemories, LineMemory
from poimen_memory.lsp.lenses import build_lenses

REPO = RepoId("github.com/org/lens-titles")
T0 = datetime(2026, 8, 15, 10, 30, tzinfo=UTC)
NAMES = [("Alice Smith", "a@x"), ("Alice Jones", "aj@x"), ("Bob", "b@x"), ("", "nobody@x"),
         ("Carol White", "c@x")]  # fmt: skip


def _reference(uri: str, doc: DocumentMemories) -> list[tuple[int, str, object]]:
    def count(n: int) -> str:
        return f"{n} memor{'y' if n == 1 else 'ies'}"

    def title(memories: Iterable[LineMemory]) -> str:
        newest_first = sorted(
            memories, key=lambda m: doc.citation(m).commit.author_date, reverse=True
        )
        parts = [count(len(dict.fromkeys(m[NODE] for m in newest_first)))]
        authors: list[str] = []
        for m in newest_first:
            commit = doc.citation(m).commit
            name = commit.author_name.split(" ")[0] or commit.author_email
            if name not in authors:
                authors.append(name)
        if authors:
            more = f" +{len(authors) - 2}" if len(authors) > 2 else ""
            parts.append(", ".join(authors[:2]) + more)
        if newest_first:
            summary = doc.citation(newest_first[0]).commit.summary
            parts.append(summary if len(summary) <= 48 else summary[:47] + "…")
        return " · ".join(parts)

    blocks = []
    current: dict[str, LineMemory] = {}
    first = last = 0
    for line in sorted(doc.by_line):
        if current and (line != last + 1 or line - first >= 20):
            blocks.append((first, last, tuple(current.values())))
            current = {}
        if not current:
            first = line
        last = line
        for m in doc.by_line[line]:
            current.setdefault(m[NODE], m)
    if current:
        blocks.append((first, last, tuple(current.values())))
    out: list[tuple[int, str, object]] = []
    if doc.by_line:
        total = len({m[NODE] for ms in doc.by_line.values() for m in ms})
        out.append((0, f"{count(total)} in this file", {"uri": uri}))
    for first, last, memories in blocks:
        out.append((first - 1, title(memories), {"uri": uri, "lines": [first, last]}))
    return out


@st.composite
def documents(draw: st.DrawFn) -> DocumentMemories:
    commits = [
        CommitInfo(
            REPO, CommitSha(f"{k:x}" * 40), draw(st.sampled_from(["Fix", "A" * 60, "Tune it"])),
            *draw(st.sampled_from(NAMES)),
            T0 + timedelta(hours=draw(st.integers(0, 3))),  # several commits of one date
        )
        for k in range(1, draw(st.integers(1, 6)) + 1)
    ]  # fmt: skip
    memories: list[LineMemory] = [
        (f"{k:064x}", "src/a.rs", k, k, draw(st.sampled_from(commits)).sha.value)
        for k in range(1, draw(st.integers(1, 12)) + 1)
    ]
    by_line: dict[int, tuple[LineMemory, ...]] = {}
    line = 0
    for _ in range(draw(st.integers(0, 8))):
        line += draw(st.integers(1, 3))  # gaps end a block
        shown = tuple(draw(st.lists(st.sampled_from(memories), min_size=1, max_size=5)))
        for _ in range(draw(st.integers(1, 30))):  # long runs split at 20 lines
            by_line[line] = shown if draw(st.booleans()) else tuple(shown)
            line += 1
    return DocumentMemories(REPO, "src/a.rs", by_line, {c.sha.value: c for c in commits})


@settings(max_examples=300, deadline=None)
@given(doc=documents(), summary=st.booleans())
def test_lens_titles_and_blocks_follow_the_rule(doc: DocumentMemories, summary: bool) -> None:
    uri = "file:///w/src/a.rs"
    want = _reference(uri, doc)
    if not summary:
        want = [w for w in want if w[0] != 0 or "lines" in w[2]]  # type: ignore[operator]
    got = [
        (lens.range.start.line, lens.command.title, lens.command.arguments[0])
        for lens in build_lenses(uri, doc, summary)
        if lens.command is not None and lens.command.arguments
    ]
    assert got == want
