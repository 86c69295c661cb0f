"""Open documents whose edits cost O(change) on the event loop.

pygls applies an incremental change by splitting and joining the whole text again: on a
million-line file that is over 100 ms per keystroke, and a burst of edits holds up every
request behind it. A ``Buffer`` queues each change instead (keeping a count of its line
breaks up to date) and applies the queue in one pass when a hover or a lens reads the text,
in a worker thread. The queue is also applied in the background once it grows long, so a
document nobody reads does not keep every keystroke.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import PositionCodec, TextDocument

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = [
    "COMPACT_AT",
    "Buffer",
    "apply_changes",
    "did_change",
    "did_close",
    "did_open",
    "split_lines",
]

COMPACT_AT = 1_000
"""Queued changes after which the queue is applied in the background."""

Change = types.TextDocumentContentChangeEvent

# str.splitlines also breaks at these; LSP (and git) do not.
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


def split_lines(text: str) -> list[str]:
    """``text``'s lines, each with its break (LSP's breaks: ``\\n``, ``\\r\\n``, ``\\r``)."""
    if _OTHER_BREAKS.search(text) is None:
        return text.splitlines(keepends=True)  # the same breaks here, and much faster
    return _LINE.findall(text)


def count_breaks(text: str) -> int:
    """How many line breaks ``text`` has."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def _units(char: str, encoding: str) -> int:
    """How many code units of the position encoding ``char`` takes."""
    if encoding == types.PositionEncodingKind.Utf8:
        return len(char.encode("utf-8", "surrogatepass"))
    return 2 if ord(char) > 0xFFFF else 1


def _column(content: str, units: int, encoding: str) -> int:
    """The code point index of a column given in the client's units (clamped to the line)."""
    if units <= 0:
        return 0
    if encoding == types.PositionEncodingKind.Utf32 or content.isascii():
        return min(units, len(content))
    seen = 0
    for index, char in enumerate(content):
        if seen >= units:
            return index
        seen += _units(char, encoding)
    return len(content)


def _locate(lines: Sequence[str], position: types.Position, encoding: str) -> tuple[int, int]:
    """(line index, code point column) of a position; past the last line: the end."""
    line = max(position.line, 0)
    if line >= len(lines):
        if lines and not lines[-1].endswith(("\n", "\r")):
            return len(lines) - 1, len(lines[-1])  # the end of an unterminated last line
        return len(lines), 0
    content = lines[line].rstrip("\r\n")
    return line, _column(content, position.character, encoding)


def _apply(lines: list[str], change: Change, encoding: str) -> list[str]:
    """``lines`` with one change made (in place where the change is partial)."""
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return split_lines(change.text)
    start, end = change.range.start, change.range.end
    if (end.line, end.character) < (start.line, start.character):
        start, end = end, start
    first, first_col = _locate(lines, start, encoding)
    last, last_col = _locate(lines, end, encoding)
    before = lines[first][:first_col] if first < len(lines) else ""
    after = lines[last][last_col:] if last < len(lines) else ""
    stop = min(last + 1, len(lines))
    piece = before + change.text + after
    # A "\r" and a "\n" that meet across the edit's ends become one break.
    if first > 0 and piece.startswith("\n") and lines[first - 1].endswith("\r"):
        first -= 1
        piece = lines[first] + piece
    if piece.endswith("\r") and stop < len(lines) and lines[stop].startswith("\n"):
        piece += lines[stop]
        stop += 1
    lines[first:stop] = split_lines(piece)
    return lines


def apply_changes(text: str, changes: Sequence[Change], encoding: str | None = None) -> str:
    """``text`` with ``changes`` made in order (positions in ``encoding``'s units, UTF-16 by
    default, as LSP says; a position past a line's end is its end, past the last line the
    document's end)."""
    kind = encoding or types.PositionEncodingKind.Utf16
    lines = split_lines(text)
    for change in changes:
        lines = _apply(lines, change, kind)
    return "".join(lines)


class Buffer(TextDocument):
    """An open document: its text as opened, the changes since, applied when read."""

    def __init__(
        self,
        uri: str,
        source: str,
        version: int | None = None,
        language_id: str | None = None,
        position_codec: PositionCodec | None = None,
    ) -> None:
        super().__init__(uri, source, version, language_id, position_codec=position_codec)
        self._queued: list[Change] = []
        self._generation = 0  # a whole-document change starts a new one
        self._queue_lock = threading.Lock()  # held for list operations only (the event loop)
        self._apply_lock = threading.Lock()  # one reader applies the queue at a time
        self.line_breaks = count_breaks(source)
        """Line breaks in the text with every queued change made (estimated per change:
        a file over the line limit is refused without building its text)."""
        self.compacting = False

    @classmethod
    def adopt(cls, doc: TextDocument) -> Buffer:
        """A Buffer holding what pygls opened (the same text object: no copy)."""
        return cls(doc.uri, doc.source, doc.version, doc.language_id, doc.position_codec)

    @property
    def backlog(self) -> int:
        """How many changes are queued."""
        return len(self._queued)

    def apply_change(self, change: Change) -> None:
        """Queue ``change`` (on the event loop: O(size of the change))."""
        with self._queue_lock:
            if not isinstance(change, types.TextDocumentContentChangePartial):
                self._source = change.text
                self._queued = []
                self._generation += 1
                self.line_breaks = count_breaks(change.text)
                return
            self._queued.append(change)
            known = self.line_breaks
            removed = min(change.range.end.line, known) - min(change.range.start.line, known)
            self.line_breaks = max(0, known + count_breaks(change.text) - abs(removed))

    @property
    def source(self) -> str:
        """The text with every queued change made (call it in a worker: it may take a while
        on a large document with many changes)."""
        with self._apply_lock:
            with self._queue_lock:
                base, todo = self._source or "", list(self._queued)
                generation, estimated = self._generation, self.line_breaks
            if not todo:
                return base
            encoding = str(self.position_codec.encoding or types.PositionEncodingKind.Utf16)
            text = apply_changes(base, todo, encoding)
            with self._queue_lock:
                if self._generation == generation:
                    self._source = text
                    del self._queued[: len(todo)]
                    # The exact count, plus what the changes queued meanwhile added.
                    self.line_breaks += count_breaks(text) - estimated
            return text

    def compact(self) -> None:
        """Apply the queue now (in a worker), so it does not grow without end."""
        try:
            _ = self.source
        finally:
            self.compacting = False


def _buffer(ls: PoimenServer, uri: str) -> Buffer | None:
    # pygls keys its documents by the unquoted URI.
    doc = ls.workspace.text_documents.get(unquote(uri))
    return doc if isinstance(doc, Buffer) else None


def did_open(ls: PoimenServer, params: types.DidOpenTextDocumentParams) -> None:
    """Put a Buffer in place of the document pygls just opened."""
    key = unquote(params.text_document.uri)
    opened = ls.workspace.text_documents.get(key)
    if opened is not None and not isinstance(opened, Buffer):
        ls.workspace.text_documents[key] = Buffer.adopt(opened)
    ls.state.lenses.pop(params.text_document.uri, None)


def did_change(ls: PoimenServer, params: types.DidChangeTextDocumentParams) -> None:
    """pygls has queued the changes; apply a long queue in the background."""
    buffer = _buffer(ls, params.text_document.uri)
    if buffer is not None and buffer.backlog >= COMPACT_AT and not buffer.compacting:
        buffer.compacting = True
        ls.workers.submit(buffer.compact)


def did_close(ls: PoimenServer, params: types.DidCloseTextDocumentParams) -> None:
    """Forget the document's lenses."""
    ls.state.lenses.pop(params.text_document.uri, None)
