"""What an agent's session becomes, whichever agent wrote it (Claude Code, Codex): each
query's records chunked into L0 nodes under the token budget, each chunk anchored to the
edits its records made, and the agent's final reply to the query an L1 node over them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from poimen_memory.chunking import chunk_records
from poimen_memory.domain import ContentError, Level, MemoryNode, ProjectId, QueryId, Record, RunId
from poimen_memory.ingest.model import BadRecord, Draft, Parsed, SourceRef, TextAtHead

__all__ = ["TOOL_TEXT_LIMIT", "SessionQuery", "session_drafts", "tool_excerpt"]

# Tool output kept in a record, in characters: readable excerpts; the transcript keeps the rest.
TOOL_TEXT_LIMIT = 4000


def tool_excerpt(text: str) -> str:
    """``text`` cut to the excerpt limit. Redact first: a cut can split a secret's marker
    (a PEM block's END line, a key's closing quote) from the secret itself."""
    if len(text) <= TOOL_TEXT_LIMIT:
        return text
    return text[:TOOL_TEXT_LIMIT] + f"\n… ({len(text) - TOOL_TEXT_LIMIT} more characters)"


class SessionQuery(Protocol):
    """One prompt's query as a reader gathered it."""

    @property
    def query_id(self) -> QueryId: ...
    @property
    def source(self) -> SourceRef: ...
    @property
    def records(self) -> list[Record]: ...
    @property
    def final_reply(self) -> str | None: ...
    @property
    def final_at(self) -> datetime | None: ...


Q = TypeVar("Q", bound=SessionQuery)


def session_drafts(
    parsed: Parsed,
    queries: Sequence[Q],
    project: ProjectId,
    run_id: RunId,
    budget: int,
    edits_of: Callable[[Q, int], list[TextAtHead]],
) -> None:
    """Add the drafts of ``queries`` to ``parsed``: per query, its L1 (the final reply) and its
    L0 chunks (numbered on through the session), each anchored to ``edits_of(query, i)`` for
    the records ``i`` it holds. A query whose records cannot be chunked is a bad record."""
    next_t = 1
    for query in queries:
        if not query.records:
            continue
        try:
            chunks = chunk_records(query.records, budget=budget, first_t=next_t)
        except ContentError as exc:
            parsed.bad.append(BadRecord(query.source, str(exc)))
            continue
        next_t += len(chunks)
        l1_id: str | None = None
        if query.final_reply and query.final_at:
            l1 = MemoryNode(
                Level.L1,
                project,
                query.query_id,
                run_id,
                chunks[-1].t,
                query.final_reply,
                query.final_at,
            )
            l1_id = f"{query.query_id.value}/L1"
            parsed.drafts.append(Draft(l1_id, l1, query.source))
        position = 0
        for chunk in chunks:
            anchors = [
                edit
                for i in range(position, position + len(chunk.records))
                for edit in edits_of(query, i)
            ]
            position += len(chunk.records)
            node = MemoryNode(
                Level.L0,
                project,
                query.query_id,
                run_id,
                chunk.t,
                chunk.text,
                chunk.records[0].timestamp,
            )
            draft = Draft(
                f"{query.query_id.value}/t{chunk.t}",
                node,
                query.source,
                [l1_id] if l1_id else [],
                list(anchors),
            )
            parsed.drafts.append(draft)
