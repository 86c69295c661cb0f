"""Blamed lines grouped the way the store is asked: runs of original lines, and the index
from an anchor's original lines back to the current lines they became."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from poimen_memory.domain import CommitSha, Sha256Hash
from poimen_memory.gitio import BlameLine
from poimen_memory.lookup.requests import MAX_LINE
from poimen_memory.store import Evidence

__all__ = [
    "OriginIndex",
    "covered_lines",
    "match_evidence",
    "origin_index",
    "origin_runs",
]

OriginIndex = dict[tuple[CommitSha, str], list[tuple[int, int]]]


def origin_runs(origins: Iterable[BlameLine]) -> list[tuple[CommitSha, str, int, int]]:
    """Original lines grouped into runs ``(commit, path, first, last)`` of consecutive lines."""
    by_source: dict[tuple[CommitSha, str], list[int]] = {}
    for o in origins:
        by_source.setdefault((o.commit, o.orig_path), []).append(o.orig_line)
    runs: list[tuple[CommitSha, str, int, int]] = []
    for (commit, path), lines in by_source.items():
        lines.sort()
        start = prev = lines[0]
        for n in lines[1:]:
            if n != prev + 1:
                runs.append((commit, path, start, prev))
                start = n
            prev = n
        runs.append((commit, path, start, prev))
    return runs


def origin_index(
    origins: Iterable[BlameLine],
) -> OriginIndex:
    """(commit, original path) -> sorted (original line, current line)."""
    index: OriginIndex = {}
    for o in origins:
        index.setdefault((o.commit, o.orig_path), []).append((o.orig_line, o.line))
    for entries in index.values():
        entries.sort()
    return index


def covered_lines(
    index: OriginIndex,
    commit: CommitSha,
    file: str,
    start: int,
    end: int,
) -> list[int]:
    """Current lines whose origin falls in an anchor (``start == 0``: the whole file)."""
    entries = index.get((commit, file), [])
    if start == 0:
        return [current for _, current in entries]
    lo = bisect.bisect_left(entries, (start, -1))
    hi = bisect.bisect_right(entries, (end, MAX_LINE))
    return [current for _, current in entries[lo:hi]]


def match_evidence(
    rows: Sequence[Evidence], origins: Sequence[BlameLine]
) -> tuple[list[Evidence], dict[Sha256Hash, list[int]]]:
    """Keep the evidence whose anchor covers an origin line; note which current lines."""
    index = origin_index(origins)
    matched: list[Evidence] = []
    lines_of: dict[Sha256Hash, list[int]] = {}
    for row in rows:
        a = row.anchor
        hits = covered_lines(index, a.commit, a.file, a.line_start, a.line_end)
        if hits:
            matched.append(row)
            lines_of.setdefault(row.node.sha256, []).extend(hits)
    return matched, lines_of
