"""The chunker: whole records under a token budget, t 1-based, oversize records alone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from poimen_memory.chunking import chunk_records
from poimen_memory.domain import ContentError, Provenance, Record, Role, approx_tokens

T0 = datetime(2026, 8, 15, tzinfo=UTC)


def rec(text: str, offset: int) -> Record:
    return Record(Role.ASSISTANT, text, T0, Provenance("s.jsonl", offset))


def test_packs_whole_records_under_budget_in_order() -> None:
    records = [rec("a" * 40, i) for i in range(10)]  # 10 tokens each by the default counter
    chunks = chunk_records(records, budget=25)
    assert [c.t for c in chunks] == [1, 2, 3, 4, 5]
    assert [len(c.records) for c in chunks] == [2, 2, 2, 2, 2]
    assert all(c.tokens <= 25 for c in chunks)
    assert [r for c in chunks for r in c.records] == records


def test_never_splits_a_record_and_oversize_record_is_its_own_chunk() -> None:
    records = [rec("small", 0), rec("x" * 400, 1), rec("tail", 2)]
    chunks = chunk_records(records, budget=20)
    assert [len(c.records) for c in chunks] == [1, 1, 1]
    big = chunks[1]
    assert big.records[0].text == "x" * 400
    assert big.tokens == 100 > 20
    assert [c.t for c in chunks] == [1, 2, 3]


def test_exact_budget_closes_chunk() -> None:
    chunks = chunk_records([rec("abcd" * 5, 0), rec("abcd", 1)], budget=5)
    assert [c.tokens for c in chunks] == [5, 1]


def test_pluggable_token_counter_and_first_t() -> None:
    by_words = chunk_records(
        [rec("one two three", 0), rec("four five", 1), rec("six", 2)],
        budget=4,
        count_tokens=lambda text: len(text.split()),
        first_t=7,
    )
    assert [(c.t, c.tokens) for c in by_words] == [(7, 3), (8, 3)]


def test_default_counter_counts_utf8_bytes() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1
    assert approx_tokens("ü" * 4) == 2  # 8 bytes


def test_empty_input_and_bad_budget() -> None:
    assert chunk_records([], budget=10) == []
    with pytest.raises(ContentError, match="budget: expected a positive integer, got 0"):
        chunk_records([rec("x", 0)], budget=0)
    with pytest.raises(ContentError, match="count_tokens: returned a negative count"):
        chunk_records([rec("x", 0)], budget=5, count_tokens=lambda _: -1)
