"""textDocument/codeLens and codeLens/resolve: one lens above each block of lines with
memories, and one at the top with the file's total; clicking one runs mem.showMemories."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from poimen_memory.domain import CommitInfo
from poimen_memory.lookup import DocumentMemories, DocumentRequest, LineMemory
from poimen_memory.lookup.results import COMMIT, NODE
from poimen_memory.lsp import commands
from poimen_memory.lsp.documents import Document, give_back_memory, open_document
from poimen_memory.lsp.protocol import JsonText

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = ["DocLenses", "build_lenses", "code_lens", "resolve_code_lens"]

_commit_of = itemgetter(COMMIT)
_BLOCK_LINES = 20  # a lens at least every 20 lines of a long run of remembered lines
_TITLE_LENGTH = 48


@dataclass
class DocLenses:
    """The lenses of one document version as sent: serialized once, sent again as they are
    while the version lasts (neither the memories nor the lenses as objects are kept: a
    server with lenses on many files held a few MB of them)."""

    version: int | None
    sent: JsonText | None


def _blocks(doc: DocumentMemories) -> tuple[list[tuple[int, int, tuple[LineMemory, ...]]], int]:
    """Runs of consecutive lines with memories, at most _BLOCK_LINES long: (first, last, the
    memories of those lines, each once); and how many distinct memories the file has."""
    out: list[tuple[int, int, tuple[LineMemory, ...]]] = []
    every: set[str] = set()
    current: dict[str, LineMemory] = {}
    first = last = 0
    merged: tuple[LineMemory, ...] | None = None  # the memories last merged into ``current``
    for line in sorted(doc.by_line):
        if current and (line != last + 1 or line - first >= _BLOCK_LINES):
            out.append((first, last, tuple(current.values())))
            every.update(current)
            current = {}
            merged = None
        if not current:
            first = line
        last = line
        memories = doc.by_line[line]
        if memories is merged:
            continue  # the lines of one stored block share one tuple: merged once
        merged = memories
        keep = current.setdefault
        for m in memories:
            keep(m[NODE], m)
    if current:
        out.append((first, last, tuple(current.values())))
        every.update(current)
    return out, len(every)


def _count(n: int) -> str:
    return f"{n} memor{'y' if n == 1 else 'ies'}"


def _lens_title(memories: Sequence[LineMemory], commits: Mapping[str, CommitInfo]) -> str:
    """``2 memories · Alice, Bob · Increase buffer``: newest first, first names; ``memories``
    each once (as ``_blocks`` gives them), their commits' details in ``commits``."""
    # Each commit once, in the memories' order. (A stable sort: commits of one date keep the
    # order of their first memories.)
    cited = [commits[sha] for sha in dict.fromkeys(map(_commit_of, memories))]
    newest_first = sorted(cited, key=lambda c: c.author_date, reverse=True)
    parts = [_count(len(memories))]
    authors: list[str] = []
    for commit in newest_first:
        name = commit.author_name.split(" ")[0] or commit.author_email
        if name not in authors:
            authors.append(name)
    if authors:
        parts.append(", ".join(authors[:2]) + (f" +{len(authors) - 2}" if len(authors) > 2 else ""))
    if newest_first:
        summary = newest_first[0].summary
        short = len(summary) <= _TITLE_LENGTH
        parts.append(summary if short else summary[: _TITLE_LENGTH - 1] + "…")
    return " · ".join(parts)


def _lens(line: int, title: str, argument: dict[str, object]) -> types.CodeLens:
    """A lens above ``line`` (0-based) that shows the memories ``argument`` names."""
    start = types.Position(line, 0)
    return types.CodeLens(
        range=types.Range(start, start),
        command=types.Command(title, commands.SHOW_MEMORIES, arguments=[argument]),
    )


def build_lenses(uri: str, doc: DocumentMemories, file_summary: bool) -> list[types.CodeLens]:
    """One lens above each block of lines with memories, and one at the top with the total."""
    lenses = []
    blocks, total = _blocks(doc)
    if file_summary and blocks:
        lenses.append(_lens(0, f"{_count(total)} in this file", {"uri": uri}))
    for first, last, memories in blocks:
        title = _lens_title(memories, doc.commits)
        lenses.append(_lens(first - 1, title, {"uri": uri, "lines": [first, last]}))
    return lenses


def _lens_list(ls: PoimenServer, doc: Document) -> DocLenses:
    """The lenses of ``doc`` (in a worker thread: one blame and one store query per file)."""
    config = ls.state.config
    memories = ls.service.document(DocumentRequest(file=str(doc.path), text=doc.text))
    summary = config.code_lens.file_summary
    lenses = None if memories is None else build_lenses(doc.uri, memories, summary)
    del memories
    give_back_memory()
    sent = None if lenses is None else ls.protocol.to_json(lenses, list[types.CodeLens])
    return DocLenses(doc.version, sent)


def _needs_blame(ls: PoimenServer, path: Path) -> bool:
    return ls.state.services is not None and ls.state.services.service.needs_blame(path)


async def code_lens(ls: PoimenServer, params: types.CodeLensParams) -> JsonText | None:
    """The document's lenses, computed and serialized once per version (progress shown while
    it blames)."""
    if not ls.state.config.code_lens.enabled:
        return None
    doc = open_document(ls, params.text_document.uri)
    if doc is None or doc.over_lines(ls.state.config.blame.max_file_lines):
        return None
    cached = ls.state.lenses.get(doc.uri)
    if cached is not None and doc.version is not None and cached.version == doc.version:
        return cached.sent
    # Whether a blame is ahead is asked off the event loop (it may read .git and run git),
    # and only of a client that shows progress.
    blaming = ls.takes_progress() and await ls.run_blocking(lambda: _needs_blame(ls, doc.path))
    found = await ls.settle(
        f"code lens {doc.path}",
        lambda: _lens_list(ls, doc),
        unreachable=None,
        progress=f"poimen-memory: blaming {doc.path.name}" if blaming else None,
    )
    if found is None:
        return None
    ls.state.lenses[doc.uri] = found
    return found.sent


def resolve_code_lens(ls: PoimenServer, lens: types.CodeLens) -> types.CodeLens:
    """Lenses are sent resolved; a client that drops the command and asks again gets it
    back from the lens's data (the same argument the command carried)."""
    if lens.command is None and isinstance(lens.data, dict):
        title = "memories"
        cached = ls.state.lenses.get(str(lens.data.get("uri")))
        sent = cached.sent if cached is not None else None
        for known in json.loads(sent.text) if sent is not None else []:
            command = known.get("command") or {}
            if command.get("arguments") == [lens.data]:
                title = command.get("title", title)
        lens.command = types.Command(title, commands.SHOW_MEMORIES, arguments=[lens.data])
    return lens
