"""Unsaved-buffer line mapping: which HEAD line each buffer line came from, in process.

A patience diff: the common prefix and suffix are matched first (edits are local, so this is
most of a file), then lines that occur exactly once in what is left of both sides anchor the
match (the longest increasing run of them), and the gaps between anchors are matched the same
way. Every step is linear in the lines it looks at, and the whole is bounded: past a budget of
work proportional to the file's length, what is left stays unmatched. A pure insertion or
deletion inside a run of repeated lines leaves the lines it could have shifted unmatched.

Precision over recall: a buffer line maps to a HEAD line with the same text, in order, or to
None (a typed line, or one that cannot be matched for certain). Line breaks are git's for HEAD
(``\\n``) and the editor's for the buffer (``\\n``, ``\\r\\n``, ``\\r``); a ``\\r`` before
git's ``\\n`` is part of the break.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence

__all__ = ["WORK_PER_LINE", "buffer_lines", "head_lines", "map_buffer_to_head", "map_lines"]

WORK_PER_LINE = 16
"""Lines looked at, per line of the two texts, before the rest is left unmatched."""

LineMap = list[int | None]


def head_lines(text: str) -> list[str]:
    """The lines of a HEAD blob as git counts them, without their breaks."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


def buffer_lines(text: str) -> list[str]:
    """The lines of an editor buffer as LSP counts them, without their breaks."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def map_buffer_to_head(head_text: str, buffer_text: str) -> LineMap:
    """For each buffer line (index 0-based), the 1-based HEAD line it is, or None."""
    return map_lines(head_lines(head_text), buffer_lines(buffer_text))


def map_lines(
    head: Sequence[str], buf: Sequence[str], work_per_line: int = WORK_PER_LINE
) -> LineMap:
    """For each line of ``buf``, the 1-based index of the same line in ``head``, or None.

    The pairs found have equal text and increase strictly; the lines before the first
    difference and after the last one map exactly (unless an insertion or deletion among
    repeated lines makes their place ambiguous: then those lines map to None)."""
    result: LineMap = [None] * len(buf)
    budget = work_per_line * (len(head) + len(buf)) + 1_000
    todo = [(0, len(head), 0, len(buf))]
    while todo:
        a_lo, a_hi, b_lo, b_hi = todo.pop()
        a_lo, a_hi, b_lo, b_hi = _strip_ends(head, buf, a_lo, a_hi, b_lo, b_hi, result)
        if a_lo == a_hi or b_lo == b_hi:
            continue
        size = (a_hi - a_lo) + (b_hi - b_lo)
        if size > budget:
            continue  # too much left to look at: unmatched, never guessed
        budget -= size
        anchors = _unique_anchors(head, buf, a_lo, a_hi, b_lo, b_hi)
        prev_a, prev_b = a_lo, b_lo
        for a, b in anchors:
            result[b] = a + 1
            if prev_a < a and prev_b < b:
                todo.append((prev_a, a, prev_b, b))
            prev_a, prev_b = a + 1, b + 1
        if anchors and prev_a < a_hi and prev_b < b_hi:
            todo.append((prev_a, a_hi, prev_b, b_hi))
    return result


def _strip_ends(
    head: Sequence[str],
    buf: Sequence[str],
    a_lo: int,
    a_hi: int,
    b_lo: int,
    b_hi: int,
    result: LineMap,
) -> tuple[int, int, int, int]:
    """Match the common prefix and suffix of head[a_lo:a_hi] and buf[b_lo:b_hi]; return the
    range between them. Where they overlap (one side is the other plus or minus a block of
    lines somewhere inside a repeated run), the lines the block could shift stay None."""
    shorter = min(a_hi - a_lo, b_hi - b_lo)
    prefix = 0
    while prefix < shorter and head[a_lo + prefix] == buf[b_lo + prefix]:
        prefix += 1
    suffix = 0
    while suffix < shorter and head[a_hi - 1 - suffix] == buf[b_hi - 1 - suffix]:
        suffix += 1
    if prefix + suffix <= shorter or a_hi - a_lo == b_hi - b_lo:
        # (Equal lengths overlap only when the two sides are equal: the prefix is all.)
        suffix = min(suffix, shorter - prefix)
        for k in range(prefix):
            result[b_lo + k] = a_lo + k + 1
        for k in range(suffix):
            result[b_hi - 1 - k] = a_hi - k
        return a_lo + prefix, a_hi - suffix, b_lo + prefix, b_hi - suffix
    # One side is the other with a block inserted at some point of [shorter - suffix, prefix].
    certain_prefix = shorter - suffix
    for k in range(certain_prefix):
        result[b_lo + k] = a_lo + k + 1
    certain_suffix = shorter - prefix
    for k in range(certain_suffix):
        result[b_hi - 1 - k] = a_hi - k
    return a_hi, a_hi, b_hi, b_hi


def _unique_anchors(
    head: Sequence[str], buf: Sequence[str], a_lo: int, a_hi: int, b_lo: int, b_hi: int
) -> list[tuple[int, int]]:
    """Pairs (head index, buffer index) of lines that occur once on each side, the longest
    run of them in the same order on both sides (patience sorting: O(k log k))."""
    in_head = Counter(head[a_lo:a_hi])
    in_buf = Counter(buf[b_lo:b_hi])
    where: dict[str, int] = {}
    for a in range(a_lo, a_hi):
        line = head[a]
        if in_head[line] == 1 and in_buf.get(line) == 1:
            where[line] = a
    if not where:
        return []
    pairs = [(where[buf[b]], b) for b in range(b_lo, b_hi) if buf[b] in where]
    return _longest_increasing(pairs)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of ``pairs`` (ordered by their second item) whose first items
    increase."""
    tails: list[int] = []  # tails[k]: the smallest head index ending a run of length k + 1
    tail_at: list[int] = []  # the index in pairs of that run's last pair
    back: list[int] = [-1] * len(pairs)
    for i, (a, _) in enumerate(pairs):
        k = bisect_left(tails, a)
        back[i] = tail_at[k - 1] if k else -1
        if k == len(tails):
            tails.append(a)
            tail_at.append(i)
        else:
            tails[k] = a
            tail_at[k] = i
    run: list[tuple[int, int]] = []
    i = tail_at[-1] if tail_at else -1
    while i >= 0:
        run.append(pairs[i])
        i = back[i]
    run.reverse()
    return run
