"""Claude Code session transcripts (``~/.claude/projects/<dir>/<session>.jsonl``).

Each line is an entry: ``user`` and ``assistant`` messages (content as text or blocks:
``text``, ``tool_use``, ``tool_result``), plus bookkeeping (``summary``, meta and command
entries) that is skipped. A user prompt starts a query (``query_id`` = the prompt's uuid; a
prompt without one gets an id derived from its session, line and text; a uuid given twice is a
bad record, and so are the records of its query, which never join another query):

* its records (prompt, assistant text, tool calls, tool results) become L0 chunks under the
  token budget, each anchored to the lines its Edit/Write/MultiEdit calls produced: the new
  text located once in the file at HEAD, kept where blame says it was committed no earlier
  than the edit. When HEAD does not hold them yet (the human commits later), the blocks of
  lines the edit added wait for a commit as pending anchors. What a call wrote is read from
  its result's ``structuredPatch`` when there is one (the file as written, a user's change in
  the permission prompt included), else from its input. An edit that changed nothing produced
  no lines and is only counted (``Parsed.noop_edits``): one whose old and new text are the
  same, one the tool refused (its result is an error), and one whose result shows an empty
  patch (a Write that creates a file has an empty patch too, and wrote every line);
* a subagent's transcript (``<session>/subagents/agent-*.jsonl``, its entries marked
  ``isSidechain`` with an ``agentId``) is read the same way, its task prompt as its query's
  first record; its nodes join the query of the parent session's prompt that started it
  (found in ``<session>.jsonl`` beside the ``subagents`` directory by the task's prompt);
* ``NotebookEdit`` calls are kept as records but not anchored: a notebook stores a cell's
  source as JSON strings, so the lines the agent wrote are not lines of the file;
* the agent's final reply to it becomes an L1 node, with edges from the query's L0 chunks.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from poimen_memory.chunking import DEFAULT_TOKEN_BUDGET
from poimen_memory.domain import (
    ContentError,
    ProjectId,
    Provenance,
    QueryId,
    Record,
    Role,
    RunId,
    parse_timestamp,
)
from poimen_memory.ingest.jsonl import iter_json_lines
from poimen_memory.ingest.model import BadRecord, Parsed, SourceRef, TextAtHead
from poimen_memory.ingest.sessions import session_drafts, tool_excerpt

__all__ = ["looks_like_claude_code", "parse_claude_code"]

_EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit"})
# The tools that start a subagent (named Task, and Agent in later releases).
_TASK_TOOLS = frozenset({"Task", "Agent"})


def looks_like_claude_code(obj: object) -> bool:
    """Whether a parsed line is a Claude Code transcript entry."""
    return (
        isinstance(obj, Mapping)
        and "sessionId" in obj
        and obj.get("type") in ("user", "assistant", "system", "summary")
    )


@dataclass(slots=True)
class _Edit:
    file: str
    text: str
    at: datetime
    added: tuple[tuple[str, ...], ...] = ()


@dataclass(slots=True)
class _Query:
    query_id: QueryId
    source: SourceRef
    records: list[Record] = field(default_factory=list)
    edits: dict[int, list[_Edit]] = field(default_factory=dict)  # record index -> edits
    final_reply: str | None = None
    final_at: datetime | None = None


def _blocks(content: object) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def _tool_result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")


def _is_subagent_task(entry: Mapping[str, Any]) -> bool:
    """Whether an entry is the task a subagent's transcript opens with: the parent's prompt
    to it, the root of the subagent's conversation."""
    return (
        entry.get("type") == "user"
        and entry.get("isSidechain") is True
        and isinstance(entry.get("agentId"), str)
        and entry.get("parentUuid") is None
    )


def _is_prompt(entry: Mapping[str, Any], blocks: list[Mapping[str, Any]]) -> bool:
    if entry.get("isMeta") or entry.get("isCompactSummary"):
        return False
    if entry.get("isSidechain"):
        return False
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    if not texts or any(b.get("type") == "tool_result" for b in blocks):
        return False
    first = texts[0].lstrip()
    # Slash-command bookkeeping is not a question.
    return not first.startswith(("<command-", "<local-command-", "Caveat: The messages below"))


def _prompt_text(blocks: list[Mapping[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()


def _parent_queries(path: Path) -> dict[str, QueryId]:
    """For a subagent's transcript (``<session>/subagents/agent-*.jsonl``), the parent
    session's queries by the prompts of the subagents they started (the ``prompt`` of a
    ``Task``/``Agent`` call): the query a subagent's work belongs to. Empty when the path is
    not laid out so, or the parent's transcript is not there."""
    path = path.absolute()
    if path.parent.name != "subagents" or not path.parent.parent.name:
        return {}
    parent = path.parent.parent.with_name(path.parent.parent.name + ".jsonl")
    if not parent.is_file():
        return {}
    found: dict[str, QueryId] = {}
    current: QueryId | None = None
    for _, entry in iter_json_lines(parent):
        if not isinstance(entry, Mapping) or entry.get("type") not in ("user", "assistant"):
            continue
        message = entry.get("message")
        blocks = _blocks(message.get("content")) if isinstance(message, Mapping) else []
        if entry["type"] == "user" and _is_prompt(entry, blocks):
            uuid = entry.get("uuid")
            current = QueryId(uuid) if isinstance(uuid, str) and uuid.strip() else None
            continue
        for block in blocks:
            tool_input = block.get("input")
            if (
                current is not None
                and block.get("type") == "tool_use"
                and block.get("name") in _TASK_TOOLS
                and isinstance(tool_input, Mapping)
                and isinstance(tool_input.get("prompt"), str)
            ):
                found.setdefault(tool_input["prompt"].strip(), current)
    return found


def _prompt_id(uuid: object, source: SourceRef, prompts: dict[str, SourceRef]) -> QueryId:
    """The query id of a prompt: its uuid, once per transcript. A prompt with no uuid gets a
    placeholder, replaced by ``_derived_id`` once its text is read."""
    if uuid is None:
        return QueryId(f"prompt-line-{source.line}")
    if not isinstance(uuid, str) or not uuid.strip():
        raise ContentError(f"uuid: expected a non-empty string, got {uuid!r}")
    if uuid in prompts:
        raise ContentError(f"uuid: {uuid!r} is already the prompt at line {prompts[uuid].line}")
    prompts[uuid] = source
    return QueryId(uuid)


def _derived_id(entry: Mapping[str, Any], query: _Query) -> QueryId:
    """A stable id for a prompt with no uuid, from its session, its line and its (redacted)
    text: the same transcript always gives the same id, two prompts never share one."""
    seed = [str(entry.get("sessionId")), str(query.source.line), *(r.text for r in query.records)]
    digest = hashlib.sha256("\0".join(seed).encode("utf-8", "surrogatepass")).hexdigest()
    return QueryId(f"prompt-{digest[:16]}")


def _relative(file_path: object, cwd: str | None, repo_root: Path) -> str | None:
    """The tool's file as a path in the repository, or None when it lies outside it."""
    if not isinstance(file_path, str) or not file_path:
        return None
    candidate = PurePosixPath(file_path)
    bases = [PurePosixPath(repo_root.as_posix())]
    if cwd:
        bases.append(PurePosixPath(cwd))
    for base in bases:
        try:
            rel = candidate.relative_to(base)
        except ValueError:
            continue
        text = rel.as_posix()
        if text and text != "." and ".." not in rel.parts:
            return text
    if not candidate.is_absolute() and ".." not in candidate.parts:
        return candidate.as_posix()
    return None


def _tool_use_record_text(name: str, tool_input: Mapping[str, Any], shown_path: str) -> str:
    if name == "Edit":
        return (
            f"[Edit {shown_path}]\n--- before\n{tool_input.get('old_string', '')}\n"
            f"+++ after\n{tool_input.get('new_string', '')}"
        )
    if name == "MultiEdit":
        parts = [f"[MultiEdit {shown_path}]"]
        for edit in tool_input.get("edits") or []:
            if isinstance(edit, Mapping):
                parts.append(
                    f"--- before\n{edit.get('old_string', '')}\n+++ after\n"
                    f"{edit.get('new_string', '')}"
                )
        return "\n".join(parts)
    if name == "Write":
        return f"[Write {shown_path}]\n{tool_input.get('content', '')}"
    return f"[{name}] {json.dumps(tool_input, ensure_ascii=False, sort_keys=True)}"


def _edits_of(
    name: str, tool_input: Mapping[str, Any], file: str, at: datetime
) -> tuple[list[_Edit], int]:
    """The texts an edit call wrote, and how many of its edits changed nothing (old text the
    same as the new)."""
    if name == "Edit":
        pairs = [(tool_input.get("old_string"), tool_input.get("new_string"))]
    elif name == "MultiEdit":
        pairs = [
            (e.get("old_string"), e.get("new_string"))
            for e in tool_input.get("edits") or []
            if isinstance(e, Mapping)
        ]
    else:
        pairs = [(None, tool_input.get("content"))]
    noop = sum(1 for old, new in pairs if isinstance(new, str) and old == new)
    edits = [
        _Edit(file, new, at, _added(old if isinstance(old, str) else "", new))
        for old, new in pairs
        if isinstance(new, str) and new.strip() and old != new
    ]
    return edits, noop


def _added(old: str, new: str) -> tuple[tuple[str, ...], ...]:
    """The runs of lines of ``new`` that ``old`` does not have there (all of it, for a new
    file's content)."""
    before, after = old.split("\n") if old else [], new.strip("\n").split("\n")
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return tuple(
        tuple(after[j1:j2])
        for tag, _, _, j1, j2 in matcher.get_opcodes()
        if tag in ("insert", "replace") and j2 > j1
    )


def _patched(result: object, file: str, at: datetime) -> list[_Edit] | None:
    """What a call wrote, from its result's ``structuredPatch`` (hunks of ``-``, ``+`` and
    context lines): per hunk, its new side located as the edit, its ``+`` runs as the lines
    added. None when the result has no usable patch."""
    patch = result.get("structuredPatch") if isinstance(result, Mapping) else None
    if not isinstance(patch, list) or not patch:
        return None
    edits = []
    for hunk in patch:
        lines = hunk.get("lines") if isinstance(hunk, Mapping) else None
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            return None
        new_side = [x[1:] for x in lines if x[:1] in ("+", " ")]
        added: list[list[str]] = []
        previous = ""
        for x in lines:
            if x[:1] == "+":
                if previous != "+":
                    added.append([])
                added[-1].append(x[1:])
            if x[:1] in ("+", " "):
                previous = x[:1]
        text = "\n".join(new_side)
        if added and text.strip():
            edits.append(_Edit(file, text, at, tuple(tuple(b) for b in added)))
    return edits


def _changed_nothing(block: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    """Whether a tool result says its call changed no file: the tool refused it (an error:
    "No changes to make", "String to replace not found", ...), or its patch is empty and it
    did not create the file (a Write that creates one records ``"type": "create"`` and an
    empty patch)."""
    if block.get("is_error") is True:
        return True
    result = entry.get("toolUseResult")
    return (
        isinstance(result, Mapping)
        and result.get("structuredPatch") == []
        and result.get("type") != "create"
    )


def parse_claude_code(
    path: Path,
    project: ProjectId,
    repo_root: Path,
    budget: int = DEFAULT_TOKEN_BUDGET,
    redact: Callable[[str], str] = str,
) -> Parsed:
    """Parse one session transcript into L0 chunk drafts and L1 reply drafts. ``redact``
    rewrites record text (secrets out) before hashing; edits are located with their real text."""
    parsed = Parsed()
    queries: list[_Query] = []
    current: _Query | None = None  # None: before the first prompt, or after a bad one
    prompts: dict[str, SourceRef] = {}  # uuid -> the prompt that has it
    edit_calls: dict[str, tuple[_Query, int]] = {}  # tool_use id -> its query and record
    run_id: RunId | None = None
    parents: dict[str, QueryId] | None = None  # a subagent's: its parent's queries, by task
    source_id = str(path)
    for number, entry in iter_json_lines(path, parsed.incomplete):
        source = SourceRef(str(path), number)
        if isinstance(entry, BadRecord):
            parsed.bad.append(entry)
            continue
        if not isinstance(entry, Mapping) or entry.get("type") not in ("user", "assistant"):
            continue
        message = entry.get("message")
        blocks = _blocks(message.get("content")) if isinstance(message, Mapping) else []
        # A subagent's task opens its own transcript; a sidechain inside a session's is the
        # parent query's work.
        task = _is_subagent_task(entry) and not queries and bool(_prompt_text(blocks))
        prompt = entry["type"] == "user" and (task or _is_prompt(entry, blocks))
        if prompt:
            current = None  # until this prompt is known good, nothing joins the query before
        try:
            if run_id is None and isinstance(entry.get("sessionId"), str):
                agent = entry.get("agentId") if entry.get("isSidechain") else None
                suffix = f"/agent-{agent}" if isinstance(agent, str) else ""
                run_id = RunId(entry["sessionId"] + suffix)
            at = parse_timestamp("timestamp", entry.get("timestamp"))
            if not isinstance(message, Mapping):
                raise ContentError("message: expected an object")
            cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else None
            if prompt:
                query_id = _prompt_id(entry.get("uuid"), source, prompts)
                if task:
                    parents = _parent_queries(path) if parents is None else parents
                    query_id = parents.get(_prompt_text(blocks), query_id)
                current = _Query(query_id, source)
                queries.append(current)
            if current is None:
                continue  # bookkeeping before the first prompt, or a bad prompt's query
            query = current
            for offset, block in enumerate(blocks):
                kind = block.get("type")
                # offset: line of the transcript, then block within the line
                prov = Provenance(source_id, number * 1000 + offset)
                if kind == "text" and str(block.get("text", "")).strip():
                    text = redact(str(block["text"]))
                    role = Role.USER if entry["type"] == "user" else Role.ASSISTANT
                    query.records.append(Record(role, text, at, prov))
                    if role is Role.ASSISTANT and (
                        not entry.get("isSidechain") or parents is not None
                    ):
                        query.final_reply, query.final_at = text, at
                elif kind == "tool_use":
                    name = str(block.get("name", "tool"))
                    tool_input = (
                        block.get("input") if isinstance(block.get("input"), Mapping) else {}
                    )
                    assert isinstance(tool_input, Mapping)
                    raw_path = tool_input.get("file_path")
                    rel = _relative(raw_path, cwd, repo_root) if name in _EDIT_TOOLS else None
                    shown = rel or str(raw_path or "")
                    text = redact(_tool_use_record_text(name, tool_input, shown))
                    if name not in _EDIT_TOOLS:
                        text = tool_excerpt(text)  # an edit is kept whole: it is the evidence
                    query.records.append(Record(Role.ASSISTANT, text, at, prov))
                    if rel is not None:
                        edits, noop = _edits_of(name, tool_input, rel, at)
                        parsed.noop_edits += noop
                        query.edits.setdefault(len(query.records) - 1, []).extend(edits)
                        if isinstance(block.get("id"), str):
                            edit_calls[block["id"]] = (query, len(query.records) - 1)
                elif kind == "tool_result":
                    call = edit_calls.pop(str(block.get("tool_use_id")), None)
                    if call is not None and _changed_nothing(block, entry):
                        parsed.noop_edits += len(call[0].edits.pop(call[1], []))
                    elif call is not None and call[0].edits.get(call[1]):
                        first = call[0].edits[call[1]][0]
                        written = _patched(entry.get("toolUseResult"), first.file, first.at)
                        if written is not None:
                            call[0].edits[call[1]] = written
                    text = tool_excerpt(redact(_tool_result_text(block)))
                    if text.strip():
                        query.records.append(Record(Role.TOOL_RESULT, text, at, prov))
            if prompt and not isinstance(entry.get("uuid"), str):
                query.query_id = _derived_id(entry, query)
        except ContentError as exc:
            parsed.bad.append(BadRecord(source, str(exc)))
    if run_id is None:
        if queries:
            parsed.bad.append(BadRecord(queries[0].source, "sessionId: missing"))
        return parsed
    session_drafts(
        parsed,
        queries,
        project,
        run_id,
        budget,
        lambda q, i: [TextAtHead(e.file, e.text, e.at, e.added) for e in q.edits.get(i, [])],
    )
    return parsed
