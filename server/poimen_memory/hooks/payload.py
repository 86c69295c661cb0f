"""The payload Claude Code writes on the hook's stdin: which event, which session, where its
transcript is; read strictly, as the hook has nobody to ask."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PAYLOAD_MAX_BYTES", "HookInputError", "HookPayload", "parse_payload"]

PAYLOAD_MAX_BYTES = 1_000_000


class HookInputError(ValueError):
    """The payload on stdin is not one a Claude Code hook sends."""


@dataclass(frozen=True, slots=True)
class HookPayload:
    """What the hook is told: which event, which session, where its transcript is."""

    transcript: Path
    cwd: Path
    event: str = "?"
    session: str = ""
    reason: str = ""
    # SubagentStop: the subagent's own transcript (transcript_path is the parent session's).
    agent_transcript: Path | None = None

    def to_json(self) -> dict[str, str]:
        """The payload as the worker reads it back."""
        out = {
            "transcript_path": str(self.transcript),
            "cwd": str(self.cwd),
            "hook_event_name": self.event,
            "session_id": self.session,
            "reason": self.reason,
        }
        if self.agent_transcript is not None:
            out["agent_transcript_path"] = str(self.agent_transcript)
        return out

    def transcripts(self) -> list[Path]:
        """What to ingest: a finished subagent's transcript; else the session's, with its
        subagents' (``<session>/subagents/agent-*.jsonl``, their work is part of it)."""
        if self.agent_transcript is not None:
            return [self.agent_transcript]
        subagents = self.transcript.with_suffix("") / "subagents"
        found = sorted(subagents.glob("agent-*.jsonl")) if subagents.is_dir() else []
        return [self.transcript, *(p for p in found if p.is_file() and not p.is_symlink())]


def _text(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    return value if isinstance(value, str) else ""


def _expanded(field: str, value: str) -> Path:
    """``value`` as a path, ``~`` expanded; HookInputError naming ``field`` for an unknown
    user's ``~name``."""
    try:
        return Path(value).expanduser()
    except RuntimeError:
        raise HookInputError(f"{field}: no such user's home in {value!r}") from None


def parse_payload(raw: bytes | str, agent_name: str = "Claude Code") -> HookPayload:
    """The hook's payload (``agent_name``'s: Claude Code and Codex send the same fields);
    HookInputError saying what is wrong with it."""
    if not raw.strip():
        raise HookInputError(f"no payload on stdin ({agent_name} writes one for each event)")
    if len(raw) > PAYLOAD_MAX_BYTES:
        raise HookInputError(f"payload over {PAYLOAD_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        body = json.loads(text)
    except UnicodeDecodeError:
        raise HookInputError("payload is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise HookInputError(f"payload is not JSON: {exc.msg} at char {exc.pos}") from None
    if not isinstance(body, dict):
        raise HookInputError(f"payload is a JSON {type(body).__name__}, expected an object")
    agent = _text(body, "agent_transcript_path")
    agent_path = _expanded("agent_transcript_path", agent) if agent else None
    if agent_path is not None and not agent_path.is_file():
        raise HookInputError(f"agent_transcript_path: no such file {agent_path}")
    # A subagent's event may name its own transcript only (Codex's SubagentStop may).
    transcript = _text(body, "transcript_path")
    if not transcript and agent_path is None:
        raise HookInputError("payload has no transcript_path")
    path = _expanded("transcript_path", transcript) if transcript else agent_path
    assert path is not None
    if not path.is_file():
        raise HookInputError(f"transcript_path: no such file {path}")
    cwd = _text(body, "cwd") or os.getcwd()
    return HookPayload(
        transcript=path.absolute(),
        cwd=_expanded("cwd", cwd).absolute(),
        event=_text(body, "hook_event_name") or "?",
        session=_text(body, "session_id"),
        reason=_text(body, "reason"),
        agent_transcript=None if agent_path is None else agent_path.absolute(),
    )
