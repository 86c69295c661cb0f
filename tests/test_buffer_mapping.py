"""Buffer line -> HEAD line among repeated lines (``}``, blank lines, one word again and
again), where a wrong bound on the common prefix and suffix would map two buffer lines to one
HEAD line, or give a typed line an origin."""

from __future__ import annotations

import itertools

from hypothesis import example, given, settings
from hypothesis import strategies as st

from poimen_memory.gitio.linemap import map_buffer_to_head, map_lines

ALPHABET = ["}", "", "x"]
heads = st.lists(st.sampled_from(ALPHABET), max_size=30)
blocks = st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=4)

# A buffer line: its text and the HEAD line (1-based) it is, or None for a typed line.
Tracked = list[tuple[str, int | None]]
Case = tuple[list[str], Tracked]


def tracked(head: list[str]) -> Tracked:
    return [(line, n) for n, line in enumerate(head, start=1)]


@st.composite
def edits(draw: st.DrawFn) -> Case:
    """HEAD, and a buffer after lines inserted, deleted and replaced anywhere."""
    head = draw(heads)
    buf = tracked(head)
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, len(buf)))
        removed = draw(st.integers(0, min(3, len(buf) - at)))
        typed = draw(st.lists(st.sampled_from(ALPHABET), max_size=3))
        buf[at : at + removed] = [(line, None) for line in typed]
    return head, buf


@st.composite
def one_block_typed(draw: st.DrawFn) -> Case:
    """HEAD, and a buffer that is HEAD with a block of lines typed at one place."""
    head = draw(heads)
    buf = tracked(head)
    at = draw(st.integers(0, len(buf)))
    buf[at:at] = [(line, None) for line in draw(blocks)]
    return head, buf


@st.composite
def blocks_typed(draw: st.DrawFn) -> Case:
    """HEAD, and a buffer that is HEAD with lines typed at several places (none deleted)."""
    head = draw(heads)
    buf = tracked(head)
    for _ in range(draw(st.integers(2, 4))):
        at = draw(st.integers(0, len(buf)))
        buf[at:at] = [(line, None) for line in draw(blocks)]
    return head, buf


def texts(buf: Tracked) -> list[str]:
    return [line for line, _ in buf]


def mapped(head: list[str], buf: list[str]) -> list[int | None]:
    """The mapping the editor lookups use, of the two texts as files."""
    return map_buffer_to_head("".join(f"{line}\n" for line in head),
                              "".join(f"{line}\n" for line in buf))  # fmt: skip


def check_mapping(head: list[str], buf: list[str], mapping: list[int | None]) -> None:
    """Every mapped pair has equal text; the HEAD lines increase strictly; none comes twice."""
    assert len(mapping) == len(buf)
    pairs = [(b, h) for b, h in enumerate(mapping) if h is not None]
    for b, h in pairs:
        assert 1 <= h <= len(head), (b, h)
        assert head[h - 1] == buf[b], (b, h)
    targets = [h for _, h in pairs]
    assert len(set(targets)) == len(targets), f"a HEAD line mapped twice: {mapping}"
    assert targets == sorted(targets), f"not increasing: {mapping}"


def typed_lines_given_an_origin(buf: Tracked, mapping: list[int | None]) -> list[int]:
    return [b for b, ((_, origin), to) in enumerate(zip(buf, mapping, strict=True))
            if origin is None and to is not None]  # fmt: skip


def fits(head: list[str], buf: list[str]) -> bool:
    """Whether ``head`` is ``buf`` with lines left out (a subsequence of it)."""
    rest = iter(buf)
    return all(any(line == other for other in rest) for line in head)


def explained_by_typing(head: list[str], buf: list[str], mapping: list[int | None]) -> bool:
    """Whether some way of typing lines into HEAD gives ``buf`` with every mapped line where
    the mapping puts it: between two mapped pairs, the HEAD lines between them fit in the
    buffer lines between them."""
    pairs = [(-1, 0), *((b, h) for b, h in enumerate(mapping) if h is not None)]
    pairs.append((len(buf), len(head) + 1))
    return all(
        fits(head[h1 : h2 - 1], buf[b1 + 1 : b2])
        for (b1, h1), (b2, h2) in itertools.pairwise(pairs)
    )


THE_ISSUES_CASE = (["x", "}", "}"], [("x", 1), ("}", 2), ("}", 3), ("}", None)])


@settings(max_examples=1000, deadline=None)
@given(edits())
@example(THE_ISSUES_CASE)
@example((["x", "}", "}"], [("x", 1), ("}", None), ("}", 2), ("}", 3)]))
def test_any_edit_among_repeated_lines_maps_in_order_to_equal_text(case: Case) -> None:
    head, buf = case
    check_mapping(head, texts(buf), mapped(head, texts(buf)))


@settings(max_examples=1000, deadline=None)
@given(one_block_typed())
@example(THE_ISSUES_CASE)
@example((["x", "}", "}"], [("x", 1), ("}", None), ("}", 2), ("}", 3)]))
@example((["}", "", "}"], [("}", 1), ("", 2), ("", None), ("}", None), ("}", 3)]))
def test_lines_typed_among_repeated_lines_map_to_nothing(case: Case) -> None:
    head, buf = case
    mapping = mapped(head, texts(buf))
    check_mapping(head, texts(buf), mapping)
    assert typed_lines_given_an_origin(buf, mapping) == []


@settings(max_examples=1000, deadline=None)
@given(blocks_typed())
def test_lines_typed_in_several_places_never_take_a_head_line_from_its_place(
    case: Case,
) -> None:
    """Typed in several places among repeated lines, the buffer may be told by more than one
    way of typing it (HEAD ``}``, buffer blank, ``}``, ``}``, ``}``: which ``}`` is HEAD's?).
    A typed line may then map only where one of those ways has that HEAD line: the mapping is
    always one of the ways of typing the buffer."""
    head, buf = case
    mapping = mapped(head, texts(buf))
    check_mapping(head, texts(buf), mapping)
    assert explained_by_typing(head, texts(buf), mapping), mapping


def test_a_closing_brace_typed_after_two_maps_no_line_twice() -> None:
    # HEAD x, }, }; the buffer has one more }: which one is new cannot be known, so none of
    # the three is given a HEAD line, and the x before them keeps its own.
    assert map_buffer_to_head("x\n}\n}\n", "x\n}\n}\n}\n") == [1, None, None, None]


def test_lines_outside_a_run_of_repeated_lines_keep_their_origin() -> None:
    head = ["fn a() {", "x", "}", "}", "", "fn b() {", "x", "}"]
    buf = ["fn a() {", "x", "}", "}", "}", "", "fn b() {", "x", "}"]
    mapping = map_lines(head, buf)
    check_mapping(head, buf, mapping)
    assert mapping == [1, 2, None, None, None, 5, 6, 7, 8]
