"""Secrets out of transcript text before it is hashed and stored.

Agent transcripts carry whatever passed through a terminal: API keys, tokens, private keys,
passwords in connection strings. Each secret is replaced by ``[REDACTED:<kind>]`` before the
content hash is taken, so the stored identity never depends on a secret either. What a secret
looks like is in ``secret_rules``; this module runs every detector over the text and over its
unescaped forms (JSON ``\\uXXXX``/``\\n``/``\\"`` escapes, lines continued with a backslash), so a
key written as ``\\u0041KIA…`` or a PEM block inside a JSON string is found too, and replaces
the union of what they found. Every step is linear in the length of the text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from poimen_memory.ingest.secret_rules import ANY_CANDIDATE, DETECTORS, Detector, Span

__all__ = ["Finding", "Redactor", "find_secrets", "redact"]

_MARKER = "[REDACTED:"
# Fixed-length alternatives after one backslash (a continuation takes the next line's indent).
_ESCAPE = re.compile(r"\\(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|[nrt\"'/\\]|\r?\n[ \t]*)")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "'": "'", "/": "/", "\\": "\\"}
_UNESCAPE_LEVELS = 2  # text escaped twice (a JSON string inside a JSON string) is still read


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret found in a text: its kind and where it is."""

    kind: str
    start: int
    end: int


@dataclass(slots=True)
class _View:
    """A text with one more level of escapes decoded; the way back to the characters they came
    from is worked out only when something is found in it."""

    text: str
    parent: _View | None = None
    # Per decoded escape: where it starts in this view; (start, length, decoded length) in
    # the parent (a continuation decodes to nothing).
    _starts: list[int] = field(default_factory=list)
    _escapes: list[tuple[int, int, int]] = field(default_factory=list)

    def _index(self) -> None:
        assert self.parent is not None
        shift = 0
        for match in _ESCAPE.finditer(self.parent.text):
            start, end = match.span()
            decoded = 0 if self.parent.text[start + 1] in "\r\n" else 1
            self._starts.append(start - shift)
            self._escapes.append((start, end - start, decoded))
            shift += end - start - decoded

    def _parent_char(self, pos: int) -> tuple[int, int]:
        """The parent's characters that view character ``pos`` came from: (start, length)."""
        i = bisect.bisect_right(self._starts, pos) - 1
        if i < 0:
            return pos, 1
        view_start, (start, length, decoded) = self._starts[i], self._escapes[i]
        if pos < view_start + decoded:
            return start, length
        return start + length + pos - view_start - decoded, 1

    def origin(self, span: Span) -> Span:
        """``span`` of this view as a span of the original text."""
        if self.parent is None:
            return span
        if not self._starts:
            self._index()
        start, _ = self._parent_char(span[0])
        last, length = self._parent_char(span[1] - 1)
        return self.parent.origin((start, last + length))


def _decoded(match: re.Match[str]) -> str:
    escape = match.group()
    kind = escape[1]
    if kind in "ux":
        code = int(escape[2:], 16)
        return "\ufffd" if 0xD800 <= code <= 0xDFFF else chr(code)
    return _SIMPLE_ESCAPES.get(kind, "")  # a continuation joins the lines


def _views(text: str) -> Iterator[_View]:
    view = _View(text)
    yield view
    for _ in range(_UNESCAPE_LEVELS):
        if "\\" not in view.text:
            return
        decoded = _ESCAPE.sub(_decoded, view.text)
        if decoded == view.text:
            return
        view = _View(decoded, view)
        yield view


def _secret_spans(text: str, detectors: Sequence[Detector]) -> list[tuple[int, int, int]]:
    """(start, end, detector rank) of every secret, overlapping finds merged into one with
    the lowest rank among them."""
    found: list[tuple[int, int, int]] = []
    any_of = ANY_CANDIDATE if detectors is DETECTORS else None
    for view in _views(text):
        # Latin-1 keeps one byte a character; characters beyond it are never part of a token.
        data = view.text.encode("latin-1", "replace")
        if any_of is not None and any_of.search(data) is None:
            continue  # no detector has a candidate here
        for rank, detector in enumerate(detectors):
            for span in detector.spans(view.text, data):
                start, end = view.origin(span) if view.parent else span
                if not text.startswith(_MARKER, start):  # redacting twice changes nothing
                    found.append((start, end, rank))
    found.sort()
    merged: list[tuple[int, int, int]] = []
    for start, end, rank in found:
        if merged and start < merged[-1][1]:
            first, last, best = merged[-1]
            merged[-1] = (first, max(end, last), min(rank, best))
        else:
            merged.append((start, end, rank))
    return merged


def find_secrets(text: str, detectors: Sequence[Detector] = DETECTORS) -> list[Finding]:
    """The secrets in ``text``, in order; overlapping finds are merged into one, reported as
    the kind of the earliest detector among them."""
    return [Finding(detectors[r].kind, s, e) for s, e, r in _secret_spans(text, detectors)]


@dataclass
class Redactor:
    """Replaces secrets in text; counts what it replaced, by kind."""

    enabled: bool = True
    detectors: Sequence[Detector] = DETECTORS
    counts: dict[str, int] = field(default_factory=dict)

    def __call__(self, text: str) -> str:
        if not self.enabled or not text:
            return text
        spans = _secret_spans(text, self.detectors)
        if not spans:
            return text
        pieces: list[str] = []
        last = 0
        for start, end, rank in spans:
            kind = self.detectors[rank].kind
            pieces += [text[last:start], f"{_MARKER}{kind}]"]
            last = end
            self.counts[kind] = self.counts.get(kind, 0) + 1
        pieces.append(text[last:])
        return "".join(pieces)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced."""
    return Redactor()(text)
