"""Secrets out of transcript text before it is hashed and stored.

Agent transcripts carry whatever passed through a terminal: API keys, tokens, private keys,
passwords in connection strings. Each match is replaced by ``[REDACTED:<kind>]``, before the
content hash is taken, so the stored identity never depends on a secret either. Patterns favour
precision (known token shapes, ``key = value`` assignments) over catching every string.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

__all__ = ["Redactor", "redact"]

_PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    # (kind, pattern, group to replace: 0 = the whole match)
    ("private-key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ), 0),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), 0),
    ("github-token", re.compile(
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"
    ), 0),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), 0),
    ("openai-key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}"), 0),
    ("stripe-key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}\b"), 0),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), 0),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{16,})"), 1),
    ("url-password", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@\[\]]+:([^\s@/\[\]]+)@"), 1),
    ("assigned-secret", re.compile(
        r"(?i)\b[A-Za-z0-9_]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key)"
        r"[A-Za-z0-9_]*\s*[:=]\s*[\"']?([^\s\"',;\[\]]{8,})"
    ), 1),
]  # fmt: skip


@dataclass
class Redactor:
    """Replaces secrets in text; counts what it replaced, by kind."""

    enabled: bool = True
    counts: dict[str, int] = field(default_factory=dict)

    def __call__(self, text: str) -> str:
        if not self.enabled or not text:
            return text
        for kind, pattern, group in _PATTERNS:
            text = pattern.sub(functools.partial(self._replace, kind=kind, group=group), text)
        return text

    def _replace(self, match: re.Match[str], *, kind: str, group: int) -> str:
        if match.group(group).startswith("[REDACTED"):
            return match.group(0)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        whole, start = match.group(0), match.start(group) - match.start(0)
        end = start + len(match.group(group))
        return f"{whole[:start]}[REDACTED:{kind}]{whole[end:]}"


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced."""
    return Redactor()(text)
