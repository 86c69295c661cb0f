"""The generic JSONL format: one object a line, ``"type": "node"`` or ``"type": "edge"``.

    {"type": "node", "id": "m1", "level": "L1", "query_id": "q1", "text": "...",
     "run_id": "r1", "t": 1, "created_at": "2026-08-15T10:30:00Z", "parents": ["s1"]}
    {"type": "node", "id": "e1", "level": "L0", "query_id": "q1", "text": "...",
     "parents": ["m1"],
     "anchors": [{"file": "src/a.rs", "line": 42},
                 {"file": "src/a.rs", "lines": [40, 45], "commit": "<sha or prefix>"},
                 {"file": "src/b.rs"}]}
    {"type": "edge", "child": "e1", "parent": "m1"}

``id`` is local to the file; ``parents``, ``child`` and ``parent`` take local ids or sha256
values of stored nodes. An anchor without ``commit`` names lines at HEAD, which blame maps to
their origin commit and line; with ``commit`` the lines are as they are in that commit. An
anchor without ``line``/``lines`` covers the whole file. Optional fields: ``id`` (default: the
line number), ``run_id`` (default: derived from the file name), ``t`` (default 0) and
``created_at`` (default: the ingest time).
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from poimen_memory.domain import (
    ContentError,
    Level,
    MemoryNode,
    ProjectId,
    QueryId,
    RunId,
    check_repo_path,
    parse_timestamp,
)
from poimen_memory.ingest.model import (
    AnchorRequest,
    BadRecord,
    Draft,
    LinesAtCommit,
    LinesAtHead,
    Parsed,
    SourceRef,
    WholeFile,
)

__all__ = [
    "MAX_LINE_BYTES",
    "JsonDocument",
    "default_run_id",
    "iter_json_lines",
    "parse_jsonl",
    "read_json_document",
]

# The longest line (and the largest whole JSON file) read: a node's text at its limit (1 MiB)
# even escaped 6 bytes a character, and Claude Code entries carrying a pasted image, fit; a
# longer line is refused, and never held in memory beyond this much of it.
MAX_LINE_BYTES: Final = 16 << 20
_PIECE = 1 << 20  # lines are read in pieces of this size, so a long one is not read whole

_NODE_KEYS = frozenset(
    {"type", "id", "level", "query_id", "text", "run_id", "t", "created_at", "parents", "anchors"}
)
_ANCHOR_KEYS = frozenset({"file", "line", "lines", "commit"})


def default_run_id(path: Path) -> RunId:
    """A run id for input that names none: stable for the same file name and content."""
    digest = hashlib.sha256(path.name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return RunId(f"import-{digest}")


def _json(raw: bytes, source: SourceRef) -> object | BadRecord:
    """One JSON value from ``raw`` (UTF-8), or why it is not one."""
    try:
        value: object = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return BadRecord(source, "not UTF-8 text")
    except json.JSONDecodeError as exc:
        return BadRecord(source, f"not valid JSON: {exc.msg} at column {exc.colno}")
    except RecursionError:
        return BadRecord(source, "too deeply nested")
    return value


def _next_line(handle: IO[bytes]) -> tuple[bytes, bool]:
    """The next line (b"" at the end of the file) and whether it was over MAX_LINE_BYTES, in
    which case it was read past, not kept."""
    pieces: list[bytes] = []
    size = 0
    while piece := handle.readline(_PIECE):
        pieces.append(piece)
        size += len(piece)
        if piece.endswith(b"\n"):
            size -= 1
            break
        if size > MAX_LINE_BYTES:
            pieces.clear()
            while (piece := handle.readline(_PIECE)) and not piece.endswith(b"\n"):
                pass
            return b"", True
    if size > MAX_LINE_BYTES:
        return b"", True
    return b"".join(pieces), False


def iter_json_lines(
    path: Path, incomplete: list[SourceRef] | None = None
) -> Iterable[tuple[int, object | BadRecord]]:
    """(line number, parsed JSON or a BadRecord) for each non-blank line of ``path``. A UTF-8
    byte order mark is skipped; a line over MAX_LINE_BYTES is reported, never read whole.

    A last line with no newline that is not JSON is a record still being written (a session
    appending to its transcript while it is read): it is skipped, not reported bad, and its
    place is added to ``incomplete``. Any other line that is not JSON is a BadRecord."""
    with path.open("rb") as handle:
        number = 0
        while True:
            raw, too_long = _next_line(handle)
            if not (raw or too_long):
                return
            number += 1
            source = SourceRef(str(path), number)
            if too_long:
                yield number, BadRecord(source, f"line too long (over {MAX_LINE_BYTES} bytes)")
                continue
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            if not raw or raw.isspace():
                continue
            found = _json(raw, source)
            if isinstance(found, BadRecord) and not raw.endswith(b"\n"):
                if incomplete is not None:
                    incomplete.append(source)
                return
            yield number, found


@dataclass(frozen=True, slots=True)
class JsonDocument:
    """A whole file parsed as one JSON value."""

    value: object


def read_json_document(path: Path) -> JsonDocument | None:
    """The file as one JSON document (a UTF-8 byte order mark skipped), or None when it is not
    one: over MAX_LINE_BYTES, not UTF-8, not JSON, or nested too deeply to parse."""
    with path.open("rb") as handle:
        if path.stat().st_size > MAX_LINE_BYTES:
            return None
        raw = handle.read(MAX_LINE_BYTES + 1)  # the file may have grown since
    if len(raw) > MAX_LINE_BYTES:
        return None
    found = _json(raw.removeprefix(codecs.BOM_UTF8), SourceRef(str(path), 1))
    return None if isinstance(found, BadRecord) else JsonDocument(found)


def parse_jsonl(
    path: Path,
    project: ProjectId,
    now: datetime | None = None,
    redact: Callable[[str], str] = str,
) -> Parsed:
    """Parse a generic JSONL file into drafts and edges; bad lines are collected, not raised.
    ``redact`` rewrites node text (secrets out) before it is hashed."""
    parsed = Parsed()
    run_id = default_run_id(path)
    created_default = now or datetime.now(UTC)
    seen_ids: dict[str, SourceRef] = {}
    for number, obj in iter_json_lines(path, parsed.incomplete):
        source = SourceRef(str(path), number)
        if isinstance(obj, BadRecord):
            parsed.bad.append(obj)
            continue
        try:
            if not isinstance(obj, Mapping):
                raise ContentError(f"expected a JSON object, got {type(obj).__name__}")
            kind = obj.get("type")
            if kind == "node":
                draft = _node(obj, project, run_id, created_default, source, redact)
                if draft.local_id in seen_ids:
                    first = seen_ids[draft.local_id].line
                    raise ContentError(f"id: {draft.local_id!r} already used at line {first}")
                seen_ids[draft.local_id] = source
                parsed.drafts.append(draft)
            elif kind == "edge":
                child, parent = _ref(obj, "child"), _ref(obj, "parent")
                parsed.edges.append((child, parent, source))
            else:
                raise ContentError(f"type: expected 'node' or 'edge', got {kind!r}")
        except ContentError as exc:
            parsed.bad.append(BadRecord(source, str(exc)))
    return parsed


def _ref(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ContentError(f"{key}: expected a node id or sha256, got {value!r}")
    return value


def _node(
    obj: Mapping[str, Any],
    project: ProjectId,
    run_id: RunId,
    created_default: datetime,
    source: SourceRef,
    redact: Callable[[str], str],
) -> Draft:
    unknown = sorted(set(obj) - _NODE_KEYS)
    if unknown:
        raise ContentError(f"{unknown[0]}: unknown field of a node")
    if "level" not in obj:
        raise ContentError("level: missing")
    if "text" not in obj:
        raise ContentError("text: missing")
    level = Level.parse(obj["level"])
    query = obj.get("query_id")
    local_id = obj.get("id", f"line-{source.line}")
    if not isinstance(local_id, str) or not local_id.strip():
        raise ContentError(f"id: expected a non-empty string, got {local_id!r}")
    node = MemoryNode(
        level=level,
        project=project,
        query_id=None if query is None else QueryId(query),
        run_id=RunId(obj["run_id"]) if "run_id" in obj else run_id,
        t=obj.get("t", 0),
        text=redact(obj["text"]) if isinstance(obj["text"], str) else obj["text"],
        created_at=(
            parse_timestamp("created_at", obj["created_at"])
            if "created_at" in obj
            else created_default
        ),
    )
    parents = obj.get("parents", [])
    if not isinstance(parents, list) or not all(isinstance(p, str) and p for p in parents):
        raise ContentError(f"parents: expected a list of node ids, got {parents!r}")
    anchors_raw = obj.get("anchors", [])
    if not isinstance(anchors_raw, list):
        raise ContentError(f"anchors: expected a list, got {anchors_raw!r}")
    if anchors_raw and level is not Level.L0:
        raise ContentError(f"anchors: only L0 evidence is anchored to code, not {level.value}")
    anchors = [_anchor(a, i) for i, a in enumerate(anchors_raw)]
    return Draft(local_id, node, source, list(parents), anchors)


def _anchor(obj: object, index: int) -> AnchorRequest:
    where = f"anchors[{index}]"
    if not isinstance(obj, Mapping):
        raise ContentError(f"{where}: expected an object, got {obj!r}")
    unknown = sorted(set(obj) - _ANCHOR_KEYS)
    if unknown:
        raise ContentError(f"{where}.{unknown[0]}: unknown field of an anchor")
    file = check_repo_path(f"{where}.file", obj.get("file"))
    commit = obj.get("commit")
    if commit is not None and (not isinstance(commit, str) or not commit):
        raise ContentError(f"{where}.commit: expected a commit id, got {commit!r}")
    if "line" in obj and "lines" in obj:
        raise ContentError(f"{where}: give either line or lines, not both")
    if "line" in obj:
        start = end = _line(f"{where}.line", obj["line"])
    elif "lines" in obj:
        pair = obj["lines"]
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ContentError(f"{where}.lines: expected [start, end], got {pair!r}")
        start, end = _line(f"{where}.lines[0]", pair[0]), _line(f"{where}.lines[1]", pair[1])
        if end < start:
            raise ContentError(f"{where}.lines: end {end} is before start {start}")
    else:
        return WholeFile(file, commit)
    if commit is None:
        return LinesAtHead(file, start, end)
    return LinesAtCommit(file, start, end, commit)


def _line(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31 - 1:
        raise ContentError(f"{name}: expected a line number >= 1, got {value!r}")
    return value
