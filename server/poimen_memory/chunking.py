"""Records -> chunks under a token budget, never splitting a record.

Records are packed greedily in order. A chunk closes when the next record would take it over
the budget. A single record larger than the budget is never cut: it becomes a chunk of its
own (over budget), because a split record would anchor half an edit to code it did not make.
Turn indexes ``t`` count from 1 within the run.
"""

from __future__ import annotations

from collections.abc import Iterable

from poimen_memory.domain import Chunk, ContentError, Record, TokenCounter, approx_tokens

__all__ = ["DEFAULT_TOKEN_BUDGET", "chunk_records"]

DEFAULT_TOKEN_BUDGET = 2048


def chunk_records(
    records: Iterable[Record],
    budget: int = DEFAULT_TOKEN_BUDGET,
    count_tokens: TokenCounter = approx_tokens,
    first_t: int = 1,
) -> list[Chunk]:
    """Pack ``records`` into chunks of at most ``budget`` tokens each, in order.

    ``count_tokens`` is applied to each record's text; the chunk's ``tokens`` is the sum.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ContentError(f"budget: expected a positive integer, got {budget!r}")
    chunks: list[Chunk] = []
    current: list[Record] = []
    current_tokens = 0
    t = first_t

    def close() -> None:
        nonlocal current, current_tokens, t
        if current:
            chunks.append(Chunk(t=t, records=tuple(current), tokens=current_tokens))
            t += 1
            current, current_tokens = [], 0

    for record in records:
        n = count_tokens(record.text)
        if n < 0:
            raise ContentError(f"count_tokens: returned a negative count ({n})")
        if current and current_tokens + n > budget:
            close()
        current.append(record)
        current_tokens += n
        if current_tokens >= budget:
            close()
    close()
    return chunks
