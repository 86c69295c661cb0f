"""Token counting for the chunker's budget."""

from __future__ import annotations

import math
from collections.abc import Callable

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text; pass your model's tokenizer to the chunker to be exact."""


def approx_tokens(text: str) -> int:
    """About one token per four UTF-8 bytes, the usual rule of thumb for BPE tokenizers."""
    return math.ceil(len(text.encode("utf-8")) / 4)
