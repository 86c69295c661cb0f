"""``mem hooks status``: where the hook is installed and what it runs, by scope, and its last
runs from the log (each with the project it ingested into, and where that came from)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from poimen_memory.errors import ConfigError
from poimen_memory.hooks.claude import AGENT
from poimen_memory.hooks.installers import agent_hooks, installed_commands

__all__ = ["render_status", "scope_status"]


def scope_status(path: Path | None, error: str | None = None, agent: str = AGENT) -> dict[str, Any]:
    """One scope's settings file ``path``: whether our hook is in it, for which events, and
    the commands it runs; ``error`` says why a scope has no file to look at."""
    status: dict[str, Any] = {
        "path": None if path is None else str(path),
        "installed": False,
        "events": [],
        "commands": [],
    }
    if path is None or error is not None:
        return {**status, "error": error or "no settings file"}
    try:
        found = installed_commands(path, agent)
    except ConfigError as exc:
        return {**status, "error": str(exc)}
    commands = [command for event in found.values() for command in event]
    return {
        **status,
        "installed": bool(found),
        "events": list(found),
        "commands": list(dict.fromkeys(commands)),
        "error": None,
    }


def render_status(
    statuses: Mapping[str, Mapping[str, Mapping[str, Any]]],
    runs: Sequence[Mapping[str, Any]],
    log: Path,
) -> str:
    """The status as ``mem hooks status`` prints it: each agent's scopes (``statuses``: by
    agent, then scope), then the log's last runs."""
    lines = []
    for agent, scopes in statuses.items():
        lines.extend(_agent_lines(agent, scopes))
    lines.append(f"log  {log}")
    if not runs:
        lines.append("  no runs yet")
    for run in runs:
        where = f"  ({run['transcript']})" if run.get("transcript") else ""
        when = str(run.get("time", "")).replace("+00:00", "Z")
        event = run.get("event", "")
        outcome = run.get("outcome", "?")
        lines.append(f"  {when:<20} {event:<10} {outcome:<7} {run.get('message', '')}{where}")
    return "\n".join(lines) + "\n"


def _agent_lines(agent: str, scopes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = [f"{agent} hook"]
    for scope, status in scopes.items():
        if status["error"]:
            lines.append(f"  {scope:<8} unknown: {status['error']}")
            continue
        events = status["events"]
        state = "not installed"
        if events:
            partial = len(events) < len(agent_hooks(agent).events)
            state = f"installed ({', '.join(events)}{' only' if partial else ''})"
        lines.append(f"  {scope:<8} {state}  {status['path']}")
        lines.extend(f"  {'':<8} runs: {command}" for command in status["commands"])
    return lines
