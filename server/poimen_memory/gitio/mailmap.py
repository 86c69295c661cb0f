"""The .mailmap as git reads it: canonical names and emails from ``git check-mailmap``.

No link is followed and ``mailmap.file`` / ``mailmap.blob`` are pinned by the blame
configuration the caller gives, so the answer is the one blame gives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from poimen_memory.gitio.runner import GitRunner

__all__ = ["MAILMAP_BATCH", "is_plain_email", "mailmapped"]

MAILMAP_BATCH = 256
"""Contacts per check-mailmap process: well inside any command-line limit."""

_CONTACT = re.compile(r"(.*?)\s*<([^>]*)>")
_PLAIN_EMAIL = re.compile(r"[^\s<>@]+@[^\s<>@]+")


def is_plain_email(value: str) -> bool:
    """Whether ``value`` is a plain email address (no name, no angle brackets)."""
    return _PLAIN_EMAIL.fullmatch(value) is not None


def _contact_ok(name: str, email: str) -> bool:
    return not any(c in name + email for c in "<>\n\x00")


def mailmapped(
    runner: GitRunner,
    root: Path,
    config: Callable[[], Sequence[str]],
    contacts: Sequence[tuple[str, str]],
) -> dict[tuple[str, str], tuple[str, str]]:
    """The canonical ``(name, email)`` of each ``(name, email)`` (a name may be empty), as
    ``git check-mailmap`` run with the settings ``config()`` gives answers; contacts git
    cannot take as they are, or that it did not answer, are absent."""
    wanted = [c for c in dict.fromkeys(contacts) if _contact_ok(*c)]
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for start in range(0, len(wanted), MAILMAP_BATCH):
        batch = wanted[start : start + MAILMAP_BATCH]
        args = [f"{n} <{e}>" if n else f"<{e}>" for n, e in batch]
        done = runner.run(root, ["check-mailmap", "--", *args], ok_codes=(0, 128), config=config())
        answers = done.stdout.decode("utf-8", "replace").splitlines()
        for contact, answer in zip(batch, answers, strict=False):
            match = _CONTACT.fullmatch(answer.strip())
            if done.returncode == 0 and match:
                out[contact] = (match.group(1), match.group(2))
    return out
