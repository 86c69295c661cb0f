"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is a ``RolloutLine`` (openai/codex ``codex-rs/protocol/src/protocol.rs``):
``{"timestamp", "type", "payload"}`` with ``type`` one of ``session_meta`` (the session's id
and ``cwd``), ``turn_context`` (a turn's ``cwd``), ``response_item`` (the model's history:
messages, tool calls and their outputs, ``codex-rs/protocol/src/models.rs``) and ``event_msg``
(what the session did); other types are bookkeeping and skipped. The conversation is read from
the response items, like Claude Code's transcripts: a user message that is not context Codex
adds itself starts a query (``query_id`` = the message's id, else one derived from the session,
line and text):

* its records (prompt, assistant text, tool calls, tool outputs) become L0 chunks under the
  token budget, each anchored to the lines its patches produced, as Claude Code's edits are:
  per hunk, its new side located once in the file at HEAD (kept where blame says it was
  committed no earlier than the patch), its ``+`` runs as the lines added (all of an added
  file's); waiting for a commit as pending anchors when HEAD does not hold them yet;
* the agent's final reply to it becomes an L1 node, with edges from the query's L0 chunks.

What a patch changed is read from the event Codex records once it applied it: an
``item_completed`` ``FileChange`` item (``changes``: absolute path -> ``add`` with
``content``, ``update`` with ``unified_diff`` and ``move_path``, or ``delete``; ``status``),
or in earlier releases ``patch_apply_end`` (``success``, ``changes``). Its id is the call's,
except for a patch applied from a code-mode ``exec`` script, whose change joins the ``exec``
call still waiting for its output. A rollout without such events (older releases) gives the
raw patch instead: a ``custom_tool_call`` ``apply_patch``'s input, or the
``*** Begin Patch`` ... ``*** End Patch`` text of a shell call's arguments (``["apply_patch",
patch]``, a heredoc), with paths relative to the call's ``workdir`` or the turn's ``cwd``;
it counts only when the call's output says it succeeded. A patch that failed (its event says
so, or, with no event, its output does not show success) anchors nothing and is counted with
the edits that changed nothing, as is a hunk whose new side equals its old.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
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

__all__ = ["looks_like_codex", "parse_codex"]

_LINE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
_BEGIN_PATCH = "*** Begin Patch\n"
_END_PATCH = "\n*** End Patch"
_EXIT = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d{1,9})\s*$", re.MULTILINE)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
# Context Codex adds to the conversation as user messages: not the user's prompts.
_CONTEXT_TAG = re.compile(r"^<([A-Za-z_][\w-]*)[ >].*</\1>$", re.DOTALL)
_CONTEXT_PREFIXES = ("# AGENTS.md instructions for ",)


def looks_like_codex(obj: object) -> bool:
    """Whether a parsed line is a Codex rollout line."""
    return (
        isinstance(obj, Mapping)
        and obj.get("type") in _LINE_TYPES
        and isinstance(obj.get("payload"), Mapping)
        and "timestamp" in obj
    )


@dataclass(frozen=True, slots=True)
class _Edit:
    file: str
    text: str  # the lines located (a hunk's new side, an added file's content)
    added: tuple[tuple[str, ...], ...]  # the runs of lines added (empty: all of text)


@dataclass(slots=True)
class _Query:
    query_id: QueryId
    source: SourceRef
    records: list[Record] = field(default_factory=list)
    edits: dict[int, list[_Edit]] = field(default_factory=dict)  # record index -> edits
    edit_times: dict[int, datetime] = field(default_factory=dict)
    final_reply: str | None = None
    final_at: datetime | None = None


@dataclass(slots=True)
class _Call:
    query: _Query
    record: int
    raw_patch: bool  # its edits were read from the raw patch, to be confirmed
    settled: bool = False  # an event said what it changed


@dataclass(slots=True)
class _State:
    parsed: Parsed
    repo_root: Path
    redact: Callable[[str], str]
    cwd: str | None = None
    queries: list[_Query] = field(default_factory=list)
    current: _Query | None = None
    calls: dict[str, _Call] = field(default_factory=dict)  # call id -> its call, until output
    seen_ids: set[str] = field(default_factory=set)


def _texts(content: object, field_name: str) -> str:
    """The text of a message's content items (``input_text``, ``output_text``, ``text``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ContentError(f"{field_name}: expected a list of content items")
    return "\n".join(
        str(item.get("text", ""))
        for item in content
        if isinstance(item, Mapping) and item.get("type") in ("input_text", "output_text", "text")
    )


def _is_context(payload: Mapping[str, Any], text: str) -> bool:
    """Whether a user message is context Codex added (environment, instructions, ...)."""
    meta = payload.get("internal_chat_message_metadata_passthrough")
    kinds = meta.get("content_item_kinds") if isinstance(meta, Mapping) else None
    if isinstance(kinds, list) and kinds:
        return not any(isinstance(k, str) and k.startswith("user.") for k in kinds)
    stripped = text.strip()
    return bool(_CONTEXT_TAG.match(stripped)) or stripped.startswith(_CONTEXT_PREFIXES)


def _in_repo(path: str, base: str | None, repo_root: Path) -> str | None:
    """``path`` (absolute, or relative to ``base``) as a path in the repository; None when it
    lies outside it."""
    candidate = PurePosixPath(path)
    if not candidate.is_absolute() and base:
        candidate = PurePosixPath(base) / candidate
    bases = [PurePosixPath(repo_root.as_posix())]
    if base:
        bases.append(PurePosixPath(base))
    for root in bases:
        try:
            rel = candidate.relative_to(root)
        except ValueError:
            continue
        if rel.parts and ".." not in rel.parts:
            return rel.as_posix()
    if not candidate.is_absolute() and candidate.parts and ".." not in candidate.parts:
        return candidate.as_posix()
    return None


def _hunk_edits(file: str, lines: list[str]) -> tuple[list[_Edit], int]:
    """The edits of the hunks of a patch or unified diff body (``@@`` headers between hunks,
    lines of ``+``/``-``/context), and how many hunks changed nothing."""
    edits: list[_Edit] = []
    noop = 0
    hunks: list[list[str]] = [[]]
    for line in lines:
        if line.startswith("@@"):
            hunks.append([])
        elif line[:1] in ("+", "-", " ") or line == "":
            hunks[-1].append(line)
    for hunk in hunks:
        while hunk and hunk[-1] == "":
            hunk.pop()  # the end of the text, not an empty context line
        new_side = [x[1:] for x in hunk if x[:1] in ("+", " ") or x == ""]
        old = [x[1:] for x in hunk if x[:1] == "-"]
        added: list[list[str]] = []
        previous = ""
        for x in hunk:
            if x[:1] == "+":
                if previous != "+":
                    added.append([])
                added[-1].append(x[1:])
            if x[:1] != "-":
                previous = x[:1]
        plus = [x for run in added for x in run]
        if plus and plus == old:
            noop += 1
        elif added and "\n".join(new_side).strip():
            edits.append(_Edit(file, "\n".join(new_side), tuple(tuple(r) for r in added)))
    return edits, noop


def _added_file(file: str, content: str) -> list[_Edit]:
    return [_Edit(file, content, ())] if content.strip() else []


def _raw_patch_edits(patch: str, base: str | None, repo_root: Path) -> tuple[list[_Edit], int]:
    """The edits of an ``apply_patch`` patch (``*** Add File:`` / ``*** Update File:`` with an
    optional ``*** Move to:`` / ``*** Delete File:``), paths relative to ``base``."""
    edits: list[_Edit] = []
    noop = 0
    ops: list[tuple[str, str, list[str]]] = []  # kind, path, body lines
    for line in patch.split("\n"):
        for kind in ("Add", "Update", "Delete"):
            marker = f"*** {kind} File: "
            if line.startswith(marker):
                ops.append((kind, line[len(marker) :].strip(), []))
                break
        else:
            if line.startswith("*** Move to: ") and ops and ops[-1][0] == "Update":
                ops[-1] = ("Update", line[len("*** Move to: ") :].strip(), ops[-1][2])
            elif ops and not line.startswith("*** "):
                ops[-1][2].append(line)
    for kind, path, body in ops:
        file = _in_repo(path, base, repo_root)
        if file is None or kind == "Delete":
            continue
        if kind == "Add":
            edits += _added_file(file, "\n".join(x[1:] for x in body if x.startswith("+")))
        else:
            found, unchanged = _hunk_edits(file, body)
            edits += found
            noop += unchanged
    return edits, noop


def _change_edits(changes: object, base: str | None, repo_root: Path) -> tuple[list[_Edit], int]:
    """The edits of an event's ``changes`` (path -> FileChange: ``{"type": "add", "content"}``,
    ``{"type": "update", "unified_diff", "move_path"}``, ``{"type": "delete", ...}``; in
    earlier releases ``{"add": {...}}``, ``{"update": {...}}``, ``{"delete": {...}}``)."""
    if not isinstance(changes, Mapping):
        raise ContentError("changes: expected an object of path -> change")
    edits: list[_Edit] = []
    noop = 0
    for path, change in changes.items():
        if not isinstance(change, Mapping):
            raise ContentError(f"changes[{path!r}]: expected an object")
        kind = change.get("type")
        body: object = change
        if kind is None and len(change) == 1:
            kind, body = next(iter(change.items()))
        if not isinstance(body, Mapping) or kind not in ("add", "update", "delete"):
            raise ContentError(f"changes[{path!r}].type: expected add, update or delete")
        moved = body.get("move_path")
        file = _in_repo(moved if isinstance(moved, str) and moved else str(path), base, repo_root)
        if file is None or kind == "delete":
            continue
        if kind == "add":
            content = body.get("content")
            if not isinstance(content, str):
                raise ContentError(f"changes[{path!r}].content: expected text")
            edits += _added_file(file, content)
        else:
            diff = body.get("unified_diff")
            if not isinstance(diff, str):
                raise ContentError(f"changes[{path!r}].unified_diff: expected text")
            lines = diff.split("\n")
            # The diff's file headers, when it has them, are not lines of a hunk.
            start = next((i for i, x in enumerate(lines) if _HUNK.match(x)), 0)
            found, unchanged = _hunk_edits(file, lines[start:])
            edits += found
            noop += unchanged
    return edits, noop


def _strings(value: object) -> Iterator[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _call_patch(payload: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """The raw patch a call applies and the ``workdir`` it names, or None: a custom
    ``apply_patch`` call's input; a function call's arguments holding a whole patch (the
    ``apply_patch`` function, ``["apply_patch", patch]``, a shell heredoc). A code-mode
    ``exec`` script is JavaScript: what it changed is read from its events only."""
    name = payload.get("name")
    if payload.get("type") == "custom_tool_call":
        text = payload.get("input")
        if name == "apply_patch" and isinstance(text, str):
            found = _find_patch(text)
            return (found or text), None
        return None
    args: object = payload.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (json.JSONDecodeError, RecursionError):
            return None
    if payload.get("type") == "local_shell_call":
        args = payload.get("action")
    workdir = None
    if isinstance(args, Mapping):
        workdir = args.get("workdir", args.get("working_directory"))
    for text in _strings(args):
        found = _find_patch(text)
        if found:
            return found, workdir if isinstance(workdir, str) else None
    return None


def _find_patch(text: str) -> str | None:
    """The first ``*** Begin Patch`` ... ``*** End Patch`` in ``text`` (linear: one search
    for each marker)."""
    start = text.find(_BEGIN_PATCH)
    if start < 0:
        return None
    end = text.find(_END_PATCH, start + len(_BEGIN_PATCH) - 1)
    return None if end < 0 else text[start : end + len(_END_PATCH)]


def _output_text(output: object) -> str:
    """A call output's text: a string, content items, or (earlier releases) a JSON string
    ``{"output": ..., "metadata": {"exit_code": ...}}``."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(item.get("text", "")) for item in output if isinstance(item, Mapping))
    if isinstance(output, Mapping):
        return _output_text(output.get("content") or output.get("output") or "")
    return ""


def _output_succeeded(text: str) -> bool:
    """Whether a patch call's output shows the patch applied: exit code 0, or the summary
    ``apply_patch`` prints on success."""
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        body = None
    if isinstance(body, Mapping):
        meta = body.get("metadata")
        exit_code = meta.get("exit_code") if isinstance(meta, Mapping) else None
        if isinstance(exit_code, int):
            return exit_code == 0
        text = _output_text(body.get("output", ""))
    code = _EXIT.search(text)
    if code is not None:
        return int(code.group(1)) == 0
    return text.lstrip().startswith("Success. Updated the following files")


def _tool_call_text(payload: Mapping[str, Any], patch: str | None) -> str:
    name = str(payload.get("name") or payload.get("type"))
    if patch is not None:
        return f"[{name}]\n{patch}"
    if payload.get("type") == "custom_tool_call":
        return f"[{name}]\n{payload.get('input', '')}"
    args = payload.get("arguments", payload.get("action"))
    shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return f"[{name}] {shown}"


def _record(state: _State, role: Role, text: str, at: datetime, prov: Provenance) -> int:
    assert state.current is not None
    state.current.records.append(Record(role, text, at, prov))
    return len(state.current.records) - 1


def _prompt_id(payload: Mapping[str, Any], session: str, line: int, text: str) -> QueryId:
    """The message's id, once per rollout; else a stable id from the session, line and
    (redacted) text."""
    given = payload.get("id")
    if isinstance(given, str) and given.strip():
        return QueryId(given)
    seed = "\0".join((session, str(line), text))
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()
    return QueryId(f"prompt-{digest[:16]}")


def _response_item(
    state: _State,
    payload: Mapping[str, Any],
    at: datetime,
    source: SourceRef,
    session: str,
) -> None:
    kind = payload.get("type")
    prov = Provenance(source.path, source.line * 1000)
    if kind == "message":
        role = payload.get("role")
        if role not in ("user", "assistant"):
            return  # developer and system instructions
        text = _texts(payload.get("content"), "payload.content")
        if not text.strip():
            return
        if role == "user":
            if _is_context(payload, text):
                return
            text = state.redact(text)
            query_id = _prompt_id(payload, session, source.line, text)
            if query_id.value in state.seen_ids:
                raise ContentError(f"payload.id: {query_id.value!r} is already a prompt")
            state.seen_ids.add(query_id.value)
            state.current = _Query(query_id, source)
            state.queries.append(state.current)
            _record(state, Role.USER, text, at, prov)
        elif state.current is not None:
            text = state.redact(text)
            _record(state, Role.ASSISTANT, text, at, prov)
            state.current.final_reply, state.current.final_at = text, at
        return
    if state.current is None:
        return  # before the first prompt
    query = state.current
    if kind in _CALLS:
        call_id = payload.get("call_id") or payload.get("id")
        found = _call_patch(payload)
        text = state.redact(_tool_call_text(payload, found[0] if found else None))
        index = _record(state, Role.ASSISTANT, text if found else tool_excerpt(text), at, prov)
        if found is not None:
            patch, workdir = found
            base = state.cwd
            if workdir:  # relative to the turn's cwd, or absolute
                base = (PurePosixPath(base or "/") / workdir).as_posix()
            edits, noop = _raw_patch_edits(patch, base, state.repo_root)
            state.parsed.noop_edits += noop
            query.edits[index] = edits
            query.edit_times[index] = at
        if isinstance(call_id, str):
            state.calls[call_id] = _Call(query, index, raw_patch=found is not None)
    elif kind in _OUTPUTS:
        call = state.calls.pop(str(payload.get("call_id")), None)
        output = _output_text(payload.get("output"))
        unsettled = call is not None and call.raw_patch and not call.settled
        if call is not None and unsettled and not _output_succeeded(output):
            state.parsed.noop_edits += len(call.query.edits.pop(call.record, []))
        text = tool_excerpt(state.redact(output))
        if text.strip():
            _record(state, Role.TOOL_RESULT, text, at, prov)


def _change_event(
    state: _State, call_id: object, applied: bool, changes: object, at: datetime
) -> None:
    """A patch's outcome: its call's edits become what it changed (nothing, if it failed)."""
    call = state.calls.get(call_id) if isinstance(call_id, str) else None
    if call is None:
        # A patch from a code-mode script: the exec call still waiting for its output.
        waiting = [c for c in state.calls.values() if c.query is state.current]
        call = waiting[-1] if waiting else None
    if call is None:
        return
    query, index = call.query, call.record
    earlier = query.edits.pop(index, []) if not call.settled else []
    if not applied:
        state.parsed.noop_edits += len(earlier)
        call.settled = True
        return
    edits, noop = _change_edits(changes, state.cwd, state.repo_root)
    if not call.raw_patch:
        state.parsed.noop_edits += noop  # counted from the raw patch already otherwise
    query.edits.setdefault(index, []).extend(edits)
    query.edit_times.setdefault(index, at)
    call.settled = True


def _event(state: _State, payload: Mapping[str, Any], at: datetime) -> None:
    kind = payload.get("type")
    if kind == "item_completed":
        item = payload.get("item")
        if isinstance(item, Mapping) and item.get("type") == "FileChange":
            applied = item.get("status") == "completed"
            _change_event(state, item.get("id"), applied, item.get("changes", {}), at)
    elif kind == "patch_apply_end":
        status = payload.get("status")
        applied = payload.get("success") is True and status in (None, "completed")
        _change_event(state, payload.get("call_id"), applied, payload.get("changes", {}), at)


def parse_codex(
    path: Path,
    project: ProjectId,
    repo_root: Path,
    budget: int = DEFAULT_TOKEN_BUDGET,
    redact: Callable[[str], str] = str,
) -> Parsed:
    """Parse one Codex rollout into L0 chunk drafts and L1 reply drafts. ``redact`` rewrites
    record text (secrets out) before hashing; edits are located with their real text."""
    parsed = Parsed()
    state = _State(parsed, repo_root, redact)
    run_id: RunId | None = None
    for number, line in iter_json_lines(path, parsed.incomplete):
        source = SourceRef(str(path), number)
        if isinstance(line, BadRecord):
            parsed.bad.append(line)
            continue
        try:
            if not isinstance(line, Mapping):
                raise ContentError(f"expected a JSON object, got {type(line).__name__}")
            kind = line.get("type")
            if kind not in _LINE_TYPES:
                continue
            payload = line.get("payload")
            if not isinstance(payload, Mapping):
                raise ContentError("payload: expected an object")
            at = parse_timestamp("timestamp", line.get("timestamp"))
            cwd = payload.get("cwd")
            if kind == "session_meta":
                session = payload.get("id", payload.get("session_id"))
                if not isinstance(session, str) or not session.strip():
                    raise ContentError(f"payload.id: expected a session id, got {session!r}")
                run_id = run_id or RunId(session)
                state.cwd = cwd if isinstance(cwd, str) else state.cwd
            elif kind == "turn_context":
                state.cwd = cwd if isinstance(cwd, str) else state.cwd
            elif kind == "response_item":
                _response_item(state, payload, at, source, run_id.value if run_id else "")
            elif kind == "event_msg":
                _event(state, payload, at)
        except ContentError as exc:
            parsed.bad.append(BadRecord(source, str(exc)))
    if run_id is None:
        if state.queries:
            parsed.bad.append(BadRecord(state.queries[0].source, "session_meta: missing"))
        return parsed
    session_drafts(
        parsed,
        state.queries,
        project,
        run_id,
        budget,
        lambda q, i: [
            TextAtHead(e.file, e.text, q.edit_times[i], e.added) for e in q.edits.get(i, [])
        ],
    )
    return parsed
