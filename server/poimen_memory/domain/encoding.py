"""The canonical, versioned byte encoding that content hashes are taken over.

Identity is a sha256 over a canonical byte encoding of the *semantic* content only:

* ``MemoryNode``: ``(level, project, query_id, text)``
* ``Chunk``: the ordered record texts with their provenance (source id, offset)

Timestamps, run ids, turn indexes, anchors and parents never enter the hash, so re-running
the same input yields the same identities and ingest stays idempotent.

Canonical encoding (version 1), all integers unsigned big-endian::

    encoding  := TAG field*
    field     := string | optional
    string    := u64(len(utf8)) utf8
    optional  := 0x00                      # absent (None)
               | 0x01 string               # present
    TAG       := b"poimen-memory/node/v1\\x00" | b"poimen-memory/chunk/v1\\x00"

    node      := TAG string(level) string(project) optional(query_id) string(text)
    chunk     := TAG u64(n_records) (string(text) string(source) u64(offset))*

Length prefixes make the encoding injective (no two field tuples share bytes). Changing it
orphans every stored node; ``tests/test_identity.py::test_a4_...`` pins it with literals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

NODE_TAG: Final = b"poimen-memory/node/v1\x00"
CHUNK_TAG: Final = b"poimen-memory/chunk/v1\x00"


def _enc_str(value: str) -> bytes:
    data = value.encode("utf-8")
    return len(data).to_bytes(8, "big") + data


def _enc_opt(value: str | None) -> bytes:
    return b"\x00" if value is None else b"\x01" + _enc_str(value)


def _enc_u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


def node_encoding(level: str, project: str, query_id: str | None, text: str) -> bytes:
    """The canonical bytes of a memory node's identity."""
    return b"".join(
        (NODE_TAG, _enc_str(level), _enc_str(project), _enc_opt(query_id), _enc_str(text))
    )


def chunk_encoding(records: Sequence[tuple[str, str, int]]) -> bytes:
    """The canonical bytes of a chunk's identity from its records' (text, source, offset)."""
    parts = [CHUNK_TAG, _enc_u64(len(records))]
    for text, source, offset in records:
        parts.append(_enc_str(text))
        parts.append(_enc_str(source))
        parts.append(_enc_u64(offset))
    return b"".join(parts)
