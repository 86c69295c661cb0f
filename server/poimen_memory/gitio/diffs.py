"""Lines and hunks of a ``-U0`` diff: the hunk header, and the whitespace-blind line hash.

Both readers of git's patches use these (gitio.patches for what commits changed,
gitio.blamelog for the history an incremental blame walks).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

__all__ = [
    "HUNK_HEADER",
    "MIN_HASHED",
    "encode_text",
    "hash_squeezed",
    "hunk_numbers",
    "line_hash",
    "squeeze",
]

MIN_HASHED = 3
"""Non-whitespace characters a line needs to be hashed: ``}``, ``)``, ``*/`` never match."""

HUNK_HEADER = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
"""A ``-U0`` hunk header: old start, old count, new start, new count (a count may be left
out: it is then 1)."""


def hunk_numbers(groups: Sequence[bytes | None]) -> tuple[int, int, int, int]:
    """(old start, old count, new start, new count) from a hunk header's four groups."""
    old_start, old_count, new_start, new_count = (int(g) if g is not None else 1 for g in groups)
    return old_start, old_count, new_start, new_count


def squeeze(text: str) -> str:
    """``text`` with all whitespace (what ``str.split`` splits on) removed."""
    return "".join(text.split())


def encode_text(text: str) -> bytes:
    """``text`` as UTF-8, undecodable bytes restored (surrogateescape)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no decoding made: kept as it is
        return text.encode("utf-8", "surrogatepass")


def hash_squeezed(squeezed: bytes) -> int:
    """The signed 64-bit hash of a squeezed line (first 8 bytes of its sha256)."""
    return int.from_bytes(hashlib.sha256(squeezed).digest()[:8], "big", signed=True)


def line_hash(text: str | bytes) -> int | None:
    """A line's text with all whitespace removed, hashed: signed 64-bit int (first 8 bytes of
    sha256, big-endian, two's complement) so it fits a Postgres bigint. None when fewer than 3
    non-whitespace characters remain (`}`, `)`, blank lines: never matched on text).

    Bytes are decoded as UTF-8 (undecodable bytes kept through surrogateescape) and text is
    encoded the same way, so a line hashes alike whichever form it comes in. Whitespace is
    what ``str.split`` splits on."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    squeezed = squeeze(text)
    if len(squeezed) < MIN_HASHED:
        return None
    return hash_squeezed(encode_text(squeezed))
