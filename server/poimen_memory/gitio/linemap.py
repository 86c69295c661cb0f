"""Unsaved-buffer line mapping: which HEAD line each buffer line came from, in process.

The common prefix and suffix are matched first (edits are local, so this is most of a file),
then difflib matches the middle. A line typed in the buffer maps to None: it has no origin.
"""

from __future__ import annotations

from difflib import SequenceMatcher

__all__ = ["map_buffer_to_head"]


def map_buffer_to_head(head_text: str, buffer_text: str) -> list[int | None]:
    """For each buffer line (index 0-based), the 1-based HEAD line it is, or None."""
    head = head_text.splitlines()
    buf = buffer_text.splitlines()
    result: list[int | None] = [None] * len(buf)
    prefix = 0
    limit = min(len(head), len(buf))
    while prefix < limit and head[prefix] == buf[prefix]:
        result[prefix] = prefix + 1
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and head[len(head) - 1 - suffix] == buf[len(buf) - 1 - suffix]:
        result[len(buf) - 1 - suffix] = len(head) - suffix
        suffix += 1
    head_mid = head[prefix : len(head) - suffix]
    buf_mid = buf[prefix : len(buf) - suffix]
    if head_mid and buf_mid:
        matcher = SequenceMatcher(None, head_mid, buf_mid, autojunk=False)
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                result[prefix + block.b + k] = prefix + block.a + k + 1
    return result
