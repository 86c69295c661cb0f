"""What Claude Code is to the hook: the events it runs hooks on, the words that make a hook
command ours, and where each scope keeps its settings and its MCP servers.

Scopes as Claude Code defines them (code.claude.com/docs/en/settings, "Configuration scopes";
/docs/en/mcp, "MCP installation scopes"):

- ``local`` (``claude mcp add``'s default): you, in this project only. Hooks in
  ``<project>/.claude/settings.local.json`` (gitignored); MCP servers in ``~/.claude.json``
  under ``projects["<project path>"].mcpServers``;
- ``project``: everyone on the project, committed. ``.claude/settings.json`` and ``.mcp.json``;
- ``user``: you, in every project. ``~/.claude/settings.json`` and ``~/.claude.json``'s
  top-level ``mcpServers``.

``$CLAUDE_CONFIG_DIR`` moves ``~/.claude`` and ``~/.claude.json`` alike."""

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
    "SCOPES",
    "Scope",
    "claude_config_dir",
    "claude_json_path",
    "mcp_config_path",
    "mcp_servers_key",
    "settings_path",
]

AGENT = "claude-code"
# Claude Code's events after which a transcript holds a finished turn (Stop), a subagent's
# finished work (SubagentStop: its own transcript), or the whole session (SessionEnd).
EVENTS = ("Stop", "SubagentStop", "SessionEnd")
MCP_SERVER = "poimen-memory"
# Seconds Claude Code gives the hook; it returns in about one, the ingest runs detached.
HOOK_TIMEOUT_S = 30
# The words that make a hook command ours, wherever mem is installed.
HOOK_WORDS = ("hooks", "run", AGENT)

Scope = Literal["local", "project", "user"]
SCOPES: tuple[Scope, ...] = ("local", "project", "user")


def claude_config_dir() -> Path:
    """Claude Code's user directory: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def claude_json_path() -> Path:
    """Claude Code's own state file, which holds the local and user MCP servers:
    ``~/.claude.json`` (in ``$CLAUDE_CONFIG_DIR`` when that is set)."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(configured).expanduser() if configured else Path.home()) / ".claude.json"


def settings_path(scope: Scope, project_root: Path | None) -> Path:
    """The settings file a scope's hooks go in."""
    if scope == "user":
        return claude_config_dir() / "settings.json"
    assert project_root is not None
    name = "settings.local.json" if scope == "local" else "settings.json"
    return project_root / ".claude" / name


def mcp_config_path(scope: Scope, project_root: Path | None) -> Path:
    """The file a scope's MCP servers are in: ``.mcp.json`` at the project root, or
    ``~/.claude.json``."""
    if scope == "project":
        assert project_root is not None
        return project_root / ".mcp.json"
    return claude_json_path()


def mcp_servers_key(scope: Scope, project_root: Path | None) -> tuple[str, ...]:
    """Where the ``mcpServers`` table sits in that file."""
    if scope == "local":
        assert project_root is not None
        return ("projects", str(project_root), "mcpServers")
    return ("mcpServers",)
