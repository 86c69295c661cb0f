"""Buffer line -> HEAD line: precise (equal text, in order, never a guess) and linear."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poimen_memory.gitio.linemap import (
    buffer_lines,
    head_lines,
    map_buffer_to_head,
    map_lines,
)

# A small alphabet makes repeated lines (the hard case) common.
few_lines = st.lists(st.sampled_from(["a", "b", "c", "}", ""]), max_size=40)
many_lines = st.lists(st.text(alphabet="abcxyz}", max_size=3), max_size=60)


@st.composite
def edited(draw: st.DrawFn, lines: st.SearchStrategy[list[str]]) -> tuple[list[str], list[str]]:
    """(head, buffer): the buffer is head with up to three regions replaced."""
    head = draw(lines)
    buf = list(head)
    for _ in range(draw(st.integers(0, 3))):
        start = draw(st.integers(0, len(buf)))
        end = draw(st.integers(start, min(len(buf), start + 5)))
        buf[start:end] = draw(lines.map(lambda x: x[:4]))
    return head, buf


def _common_ends(head: list[str], buf: list[str]) -> tuple[int, int]:
    shorter = min(len(head), len(buf))
    prefix = 0
    while prefix < shorter and head[prefix] == buf[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shorter and head[-1 - suffix] == buf[-1 - suffix]:
        suffix += 1
    return prefix, suffix


def _check_pairs(head: list[str], buf: list[str], mapping: list[int | None]) -> None:
    assert len(mapping) == len(buf)
    previous = 0
    for index, target in enumerate(mapping):
        if target is None:
            continue
        assert 1 <= target <= len(head)
        assert head[target - 1] == buf[index], (index, target)
        assert target > previous  # strictly increasing
        previous = target


@settings(max_examples=500, deadline=None)
@given(edited(few_lines) | edited(many_lines))
def test_mapped_pairs_have_equal_text_and_increase(pair: tuple[list[str], list[str]]) -> None:
    head, buf = pair
    _check_pairs(head, buf, map_lines(head, buf))


@settings(max_examples=500, deadline=None)
@given(edited(few_lines) | edited(many_lines))
def test_unchanged_prefix_and_suffix_map_exactly(pair: tuple[list[str], list[str]]) -> None:
    head, buf = pair
    mapping = map_lines(head, buf)
    prefix, suffix = _common_ends(head, buf)
    shorter = min(len(head), len(buf))
    if prefix + suffix <= shorter or len(head) == len(buf):
        exact_prefix, exact_suffix = prefix, min(suffix, shorter - prefix)
    else:
        # A block inserted or deleted inside a run of repeated lines: the lines it may have
        # shifted are ambiguous (None), the lines outside that run are exact.
        exact_prefix, exact_suffix = shorter - suffix, shorter - prefix
        for index in range(exact_prefix, len(buf) - exact_suffix):
            assert mapping[index] is None, index
    for index in range(exact_prefix):
        assert mapping[index] == index + 1, index
    for k in range(exact_suffix):
        assert mapping[len(buf) - 1 - k] == len(head) - k, k


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 10_000), unique=True, max_size=80),
    st.lists(st.tuples(st.integers(0, 80), st.integers(0, 3), st.integers(0, 3)), max_size=5),
)
def test_distinct_lines_map_to_where_they_came_from(
    ids: list[int], edits: list[tuple[int, int, int]]
) -> None:
    head = [f"line {i}" for i in ids]
    # Keep track of where each buffer line came from: a HEAD index, or None for a typed one.
    buf: list[tuple[str, int | None]] = [(line, n + 1) for n, line in enumerate(head)]
    for serial, (at, removed, added) in enumerate(edits):
        at = min(at, len(buf))
        typed = [(f"typed {serial}.{k}", None) for k in range(added)]
        buf[at : at + removed] = typed
    mapping = map_lines(head, [line for line, _ in buf])
    assert mapping == [origin for _, origin in buf]


@given(few_lines | many_lines)
def test_an_unchanged_buffer_maps_to_itself(lines: list[str]) -> None:
    assert map_lines(lines, list(lines)) == list(range(1, len(lines) + 1))


def test_a_typed_line_has_no_origin() -> None:
    head = "fn a() {\n    x();\n}\n"
    buffer = "fn a() {\n    x();\n    typed();\n}\n"
    assert map_buffer_to_head(head, buffer) == [1, 2, None, 3]


def test_an_insertion_among_repeated_lines_leaves_the_ambiguous_lines_unmapped() -> None:
    head = ["fn a() {", "}", "}", "fn b() {"]
    buf = ["fn a() {", "}", "}", "}", "fn b() {"]
    # Which "}" is new cannot be known: none of them is attached to a HEAD line.
    assert map_lines(head, buf) == [1, None, None, None, 4]


def test_line_breaks_are_gits_for_head_and_the_editors_for_the_buffer() -> None:
    assert head_lines("a\r\nb\x0cc\nd") == ["a", "b\x0cc", "d"]
    assert buffer_lines("a\r\nb\x0cc\rd\n") == ["a", "b\x0cc", "d"]
    assert map_buffer_to_head("one\r\ntwo\r\n", "one\ntwo\nthree\n") == [1, 2, None]
    # A form feed or U+2028 is not a line break for either (str.splitlines says it is).
    assert map_buffer_to_head("x\x0cy\nz\n", "x\x0cy\nnew\nz\n") == [1, None, 2]
    assert map_buffer_to_head("p\u2028q\nr\n", "p\u2028q\nr\n") == [1, 2]


def test_past_the_work_bound_lines_stay_unmapped_not_guessed() -> None:
    head = [f"u{i}" for i in range(5_000)]
    buf = ["typed", *head[:2_500], "typed too", *head[2_500:], "typed at the end"]
    bounded = map_lines(head, buf, work_per_line=0)
    _check_pairs(head, buf, bounded)
    assert map_lines(head, buf) == [None, *range(1, 2_501), None, *range(2_501, 5_001), None]


def _repeated_with_edits(n: int, ends: bool) -> tuple[str, str]:
    head = ["    step();\n"] * n
    buf = list(head)
    buf[n // 2] = "    typed();\n"
    if ends:  # edits near both ends too: the common prefix and suffix are short
        buf.insert(1, "// typed at the top\n")
        buf.insert(len(buf) - 1, "// typed at the end\n")
    return "".join(head), "".join(buf)


@pytest.mark.parametrize("ends", [False, True])
def test_eighteen_thousand_repeated_lines_with_edits_map_in_well_under_a_second(
    ends: bool,
) -> None:
    head, buf = _repeated_with_edits(18_000, ends)
    started = time.perf_counter()
    mapping = map_buffer_to_head(head, buf)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5, elapsed
    _check_pairs(head_lines(head), buffer_lines(buf), mapping)
    assert mapping[0] == 1
    assert mapping[-1] == 18_000


def test_code_like_repeated_lines_map_fully_and_fast() -> None:
    head = [f"fn item_{i // 100}() {{" if i % 100 == 0 else "    step();" for i in range(18_000)]
    buf = list(head)
    buf.insert(1, "// typed at the top")
    buf[5_001] = "    step(); // changed"
    buf.insert(len(buf) - 2, "// typed at the end")
    started = time.perf_counter()
    mapping = map_lines(head, buf)
    assert time.perf_counter() - started < 0.5
    _check_pairs(head, buf, mapping)
    assert mapping[9_001] == 9_001  # "fn item_90() {", shifted by the line typed at the top
    assert sum(m is not None for m in mapping) == 18_000 - 1


@pytest.mark.parametrize("ends", [False, True])
def test_two_hundred_thousand_lines_map_within_a_few_seconds(ends: bool) -> None:
    head, buf = _repeated_with_edits(200_000, ends)
    started = time.perf_counter()
    map_buffer_to_head(head, buf)
    assert time.perf_counter() - started < 3
    code = "".join(f"fn f{i}() {{\n    step();\n}}\n\n" for i in range(50_000))
    lines = code.splitlines(keepends=True)
    lines[3] = "typed\n"
    lines[100_000:100_001] = []
    lines.insert(len(lines) - 3, "typed\n")
    started = time.perf_counter()
    mapping = map_buffer_to_head(code, "".join(lines))
    assert time.perf_counter() - started < 3
    assert sum(m is not None for m in mapping) > 199_000
