"""What Claude Code is to the hook: the events it runs hooks on, the words that make a hook
command ours, and where it keeps its settings and its MCP servers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

__all__ = [
    "AGENT",
    "EVENTS",
    "HOOK_TIMEOUT_S",
    "HOOK_WORDS",
    "MCP_SERVER",
    "Scope",
    "claude_config_dir",
    "mcp_config_path",
    "settings_path",
]

AGENT = "claude-code"
# Claude Code's events after which the transcript holds a finished turn, or the whole session.
EVENTS = ("Stop", "SessionEnd")
MCP_SERVER = "poimen-memory"
# Seconds Claude Code gives the hook; it returns in about one, the ingest runs detached.
HOOK_TIMEOUT_S = 30
# The words that make a hook command ours, wherever mem is installed.
HOOK_WORDS = ("hooks", "run", AGENT)

Scope = Literal["project", "user"]


def claude_config_dir() -> Path:
    """Claude Code's user directory: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def settings_path(scope: Scope, project_root: Path | None) -> Path:
    """The settings file hooks go in: ``.claude/settings.json`` in the project, or the user's."""
    if scope == "user":
        return claude_config_dir() / "settings.json"
    assert project_root is not None
    return project_root / ".claude" / "settings.json"


def mcp_config_path(scope: Scope, project_root: Path | None) -> Path:
    """Where Claude Code reads MCP servers: ``.mcp.json`` at the project root, or the user's
    ``~/.claude.json`` (in ``$CLAUDE_CONFIG_DIR`` when that is set)."""
    if scope == "user":
        configured = os.environ.get("CLAUDE_CONFIG_DIR")
        home = Path(configured).expanduser() if configured else Path.home()
        return home / ".claude.json"
    assert project_root is not None
    return project_root / ".mcp.json"
