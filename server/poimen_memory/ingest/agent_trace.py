"""Agent Trace records (the open attribution format: files -> conversations -> ranges).

A record says which lines of which files, at ``vcs.revision``, came from which conversation
(and contributor). Each (file, conversation) becomes one L0 node anchored to its ranges
(placed through git at ingest: ``enrich``); the conversation URL is kept in the node's text
as its provenance, and names the query. Files may hold one record (JSON), a list of records,
or one record a line (JSONL).

Two optional objects describe who wrote the lines; they only shape the node's text, and a
value of another type is passed over:

- ``tool``: ``{"name": "claude-code", "version": "2.1.3"}`` (both optional) -> "via
  claude-code 2.1.3";
- ``contributor`` (per conversation): ``{"type": "ai", "model_id": "anthropic/claude-sonnet-4"}``
  -> "ai contribution by anthropic/claude-sonnet-4". ``type`` is the specification's "human",
  "ai", "mixed" or "unknown" (any other string is kept as written; absent reads "unknown");
  ``model_id`` is optional.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from poimen_memory import domain
from poimen_memory.domain import ContentError, ProjectId, check_repo_path, parse_timestamp
from poimen_memory.ingest.jsonl import iter_json_lines, read_json_document
from poimen_memory.ingest.model import BadRecord, Draft, Parsed, SourceRef, TraceRange

__all__ = ["looks_like_agent_trace", "parse_agent_trace"]


def looks_like_agent_trace(obj: object) -> bool:
    """Whether a parsed object is an Agent Trace record."""
    return isinstance(obj, Mapping) and "files" in obj and "vcs" in obj


def _records(path: Path, incomplete: list[SourceRef]) -> list[tuple[int, object]]:
    document = read_json_document(path)
    if document is None:  # not one JSON document: one record a line
        return list(iter_json_lines(path, incomplete))
    if isinstance(document.value, list):
        return [(1, item) for item in document.value]
    return [(1, document.value)]


def parse_agent_trace(path: Path, project: ProjectId, redact: Callable[[str], str] = str) -> Parsed:
    """Parse Agent Trace records into anchored L0 drafts (``redact`` applied to their text)."""
    parsed = Parsed()
    for index, (number, record) in enumerate(_records(path, parsed.incomplete)):
        source = SourceRef(str(path), number)
        if isinstance(record, BadRecord):
            parsed.bad.append(record)
            continue
        try:
            _record(record, project, source, index, parsed, redact)
        except ContentError as exc:
            parsed.bad.append(BadRecord(source, str(exc)))
    return parsed


def _get(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, str) and not value):
        raise ContentError(f"{where}{key}: expected {kind.__name__}, got {value!r}")
    return value


def _record(
    record: object,
    project: ProjectId,
    source: SourceRef,
    index: int,
    parsed: Parsed,
    redact: Callable[[str], str],
) -> None:
    if not isinstance(record, Mapping):
        raise ContentError(f"expected an Agent Trace record object, got {type(record).__name__}")
    record_id = _get(record, "id", str, "")
    created = parse_timestamp("timestamp", record.get("timestamp"))
    vcs = _get(record, "vcs", Mapping, "")
    if vcs.get("type") != "git":
        raise ContentError(f"vcs.type: only 'git' is supported, got {vcs.get('type')!r}")
    revision = _get(vcs, "revision", str, "vcs.")
    tool = record.get("tool") if isinstance(record.get("tool"), Mapping) else {}
    assert isinstance(tool, Mapping)
    tool_name = " ".join(str(tool[k]) for k in ("name", "version") if tool.get(k))
    run_id = domain.RunId(record_id)
    drafts: list[Draft] = []
    for f_i, file_entry in enumerate(_get(record, "files", list, "")):
        where = f"files[{f_i}]."
        if not isinstance(file_entry, Mapping):
            raise ContentError(f"files[{f_i}]: expected an object")
        file = check_repo_path(f"{where}path", file_entry.get("path"))
        for c_i, conv in enumerate(_get(file_entry, "conversations", list, where)):
            cwhere = f"{where}conversations[{c_i}]."
            if not isinstance(conv, Mapping):
                raise ContentError(f"{cwhere[:-1]}: expected an object")
            url = conv.get("url") if isinstance(conv.get("url"), str) else None
            contributor = (
                conv.get("contributor") if isinstance(conv.get("contributor"), Mapping) else {}
            )
            assert isinstance(contributor, Mapping)
            ranges = []
            for r_i, rng in enumerate(_get(conv, "ranges", list, cwhere)):
                rwhere = f"{cwhere}ranges[{r_i}]."
                if not isinstance(rng, Mapping):
                    raise ContentError(f"{rwhere[:-1]}: expected an object")
                start, end = rng.get("start_line"), rng.get("end_line")
                if not (isinstance(start, int) and isinstance(end, int) and 1 <= start <= end):
                    got = f"{start!r}, {end!r}"
                    raise ContentError(
                        f"{rwhere}start_line/end_line: expected 1 <= start <= end, got {got}"
                    )
                content_hash = rng.get("content_hash")
                if content_hash is not None and not isinstance(content_hash, str):
                    raise ContentError(
                        f"{rwhere}content_hash: expected a string, got {content_hash!r}"
                    )
                ranges.append((start, end, content_hash))
            if not ranges:
                continue
            who = str(contributor.get("type") or "unknown")
            model = contributor.get("model_id")
            spans = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b, _ in ranges)
            text = "\n".join(
                line
                for line in (
                    f"Agent Trace: {who} contribution"
                    + (f" by {model}" if model else "")
                    + (f" via {tool_name}" if tool_name else ""),
                    f"{file} lines {spans} at {revision[:12]}",
                    f"conversation: {url}" if url else f"trace record: {record_id}",
                )
            )
            seed = url or record_id
            query = domain.QueryId("conv-" + hashlib.sha256(seed.encode()).hexdigest()[:16])
            node = domain.MemoryNode(
                domain.Level.L0, project, query, run_id, 0, redact(text), created
            )
            drafts.append(
                Draft(
                    f"trace-{index}-{f_i}-{c_i}",
                    node,
                    source,
                    [],
                    [TraceRange(file, a, b, revision, h, created) for a, b, h in ranges],
                )
            )
    parsed.drafts.extend(drafts)
