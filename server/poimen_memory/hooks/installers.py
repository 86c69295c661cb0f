"""What ``mem hooks install/uninstall`` and ``mem mcp install`` write: the hook command (and
how to recognise ours among other tools' hooks), merged into or removed from the ``hooks``
table of a settings file, and the ``mcpServers`` entry that runs ``mem mcp``. Each is planned
as a ``Change``; every other key, hook and server is kept as it was."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from poimen_memory.errors import ConfigError
from poimen_memory.hooks.claude import AGENT, EVENTS, HOOK_TIMEOUT_S, HOOK_WORDS, MCP_SERVER
from poimen_memory.hooks.jsonfile import (
    Change,
    JsonFile,
    container,
    drop,
    json_type,
    read_json,
    render,
    unchanged,
)
from poimen_memory.lookup import ProjectChoice

__all__ = [
    "hook_command",
    "installed_commands",
    "is_hook_command",
    "mcp_entry",
    "mem_invocation",
    "plan_hooks_install",
    "plan_hooks_uninstall",
    "plan_mcp_install",
    "project_note",
    "written_project",
]

# Where a project comes from that the command must carry: the installer's own command line,
# and its environment, which the agent's may not be. One from the config file, or derived from
# the repository, is left to the run, which decides it by the same rule.
_CARRIED = ("request", "--project", "POIMEN_PROJECT")


# -- the command the hook runs ----------------------------------------------------------------


def mem_invocation() -> list[str]:
    """How to run this ``mem`` from anywhere, without a virtual environment being active: the
    absolute path of the running ``mem`` script, else ``python -m poimen_memory.cli`` with this
    interpreter."""
    module = [sys.executable, "-m", "poimen_memory.cli"]
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and str(spec.name).startswith("poimen_memory.cli"):
        return module
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.stem == "mem" and script.is_file():
        return [str(script.absolute())]
    beside = Path(sys.executable).parent / "mem"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("mem")
    return [str(Path(found).absolute())] if found else module


def _options(project: str | None, dsn: str | None) -> list[str]:
    return [*(["--project", project] if project else []), *(["--dsn", dsn] if dsn else [])]


def hook_command(invocation: Sequence[str], project: str | None, dsn: str | None) -> str:
    """The shell command Claude Code runs on each event. ``mem hooks run`` exits 0 whatever
    happens; ``|| true`` covers what happens before it runs (a command line a later mem no
    longer parses exits 2, which on ``Stop`` would keep the agent from stopping)."""
    return shlex.join([*invocation, *HOOK_WORDS, *_options(project, dsn)]) + " || true"


def is_hook_command(command: object) -> bool:
    """Whether a hook command is ours: ``mem`` (any path to it) or ``python -m
    poimen_memory.cli``, then ``hooks run claude-code``; another tool whose command merely
    contains those words is not."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    n = len(HOOK_WORDS)
    for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) != HOOK_WORDS:
            continue
        program = words[:i]
        if len(program) == 1 and Path(program[0]).name == "mem":
            return True
        if len(program) == 3 and program[1:] == ["-m", "poimen_memory.cli"]:
            return True
    return False


def _our_hook(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}


def _hooks_table(file: JsonFile, data: dict[str, Any]) -> dict[str, Any] | None:
    table: dict[str, Any] | None = container(file, data, "hooks", dict, '"hooks"')
    if table is None:
        return None
    for event in EVENTS:
        groups = container(file, table, event, list, f'"hooks.{event}"')
        for index, group in enumerate(groups or []):
            if isinstance(group, dict):
                container(file, group, "hooks", list, f'"hooks.{event}[{index}].hooks"')
    return table


def _ours_in(groups: list[Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(group, hook) for each of our hooks among an event's matcher groups."""
    for group in groups:
        if isinstance(group, dict):
            for hook in group.get("hooks") or []:
                if isinstance(hook, dict) and is_hook_command(hook.get("command")):
                    yield group, hook


def plan_hooks_install(path: Path, command: str) -> Change:
    """Add our hook to ``Stop`` and ``SessionEnd`` in a settings file, or update the command of
    the one there; every other key and hook is kept."""
    file = read_json(path)
    data = json.loads(json.dumps(file.data))  # a copy to change
    table = _hooks_table(file, data)
    if table is None:
        table = data["hooks"] = {}
    added, updated = [], []
    for event in EVENTS:
        groups = table.get(event)
        if groups is None:
            groups = table[event] = []
        ours = list(_ours_in(groups))
        if not ours:
            groups.append({"hooks": [_our_hook(command)]})
            added.append(event)
            continue
        first = ours[0][1]
        if first.get("command") != command or first.get("type") != "command":
            first.update(type="command", command=command)
            first.setdefault("timeout", HOOK_TIMEOUT_S)
            updated.append(event)
        for group, hook in ours[1:]:  # the same hook twice would ingest twice
            drop(group["hooks"], hook)
            if not group["hooks"]:
                drop(groups, group)
            updated.append(event)
    if not added and not updated:
        return unchanged(file, f"the {AGENT} hook is already installed in {path}; nothing changed")
    verb = "installed" if not updated else "updated"
    events = ", ".join(dict.fromkeys([*added, *updated]))
    return Change(
        path,
        file.text,
        render(data, file.indent, file.text),
        f"{verb} the {AGENT} hook in {path} ({events}): {command}",
    )


def plan_hooks_uninstall(path: Path) -> Change:
    """Remove our hooks from a settings file, and the lists and tables that removing them left
    empty; nothing else."""
    file = read_json(path)
    data = json.loads(json.dumps(file.data))
    table = _hooks_table(file, data) or {}
    removed = []
    for event in EVENTS:
        groups = table.get(event)
        ours = list(_ours_in(groups or []))
        if not groups or not ours:
            continue
        for group, hook in ours:
            drop(group["hooks"], hook)
            if not group["hooks"]:
                drop(groups, group)
        removed.append(event)
        if not groups:
            del table[event]
    if not removed:
        return unchanged(file, f"no {AGENT} hook in {path}; nothing changed")
    if not table:
        del data["hooks"]
    return Change(
        path,
        file.text,
        render(data, file.indent, file.text),
        f"removed the {AGENT} hook from {path} ({', '.join(removed)})",
    )


def installed_commands(path: Path) -> dict[str, list[str]]:
    """Our hook commands in a settings file, by event (ConfigError if it is unreadable)."""
    file = read_json(path)
    table = _hooks_table(file, file.data) or {}
    return {
        event: [str(hook["command"]) for _, hook in _ours_in(table.get(event) or [])]
        for event in EVENTS
        if any(True for _ in _ours_in(table.get(event) or []))
    }


def written_project(choice: ProjectChoice) -> str | None:
    """The project to write into an installed command, given the installer's choice (from
    ``lookup.decide_project``): the one named on its command line or by ``POIMEN_PROJECT``;
    None leaves the choice to each run (config file, else the repository's identity)."""
    if choice.project is None or choice.source not in _CARRIED:
        return None
    return choice.project.value


def project_note(choice: ProjectChoice) -> str:
    """A sentence saying which project the installed command files memories under, and why."""
    if choice.project is None:
        return (
            "memories go to each session's project: POIMEN_PROJECT or the config file when it "
            "runs, else the one derived from its repository"
        )
    if written_project(choice) is not None:
        return f"memories go to project {choice.project} (from {choice.source}; in the command)"
    return (
        f"memories go to project {choice.project} (from {choice.source}; decided again at each "
        "run, as every surface does)"
    )


# -- the MCP server entry ---------------------------------------------------------------------


def mcp_entry(
    invocation: Sequence[str], repo: Path | None, project: str | None, dsn: str | None
) -> dict[str, Any]:
    """The ``mcpServers`` entry that runs ``mem mcp`` over stdio."""
    args = [*invocation[1:], "mcp", *(["--repo", str(repo)] if repo else [])]
    return {"type": "stdio", "command": invocation[0], "args": [*args, *_options(project, dsn)]}


def plan_mcp_install(path: Path, entry: Mapping[str, Any], name: str = MCP_SERVER) -> Change:
    """Add (or bring up to date) our entry under ``mcpServers``; other servers, and keys of our
    entry that we do not set (``env``), are kept."""
    file = read_json(path)
    data = json.loads(json.dumps(file.data))
    servers = container(file, data, "mcpServers", dict, '"mcpServers"')
    if servers is None:
        servers = data["mcpServers"] = {}
    current = servers.get(name)
    if current is not None and not isinstance(current, dict):
        raise ConfigError(
            f'{path}: "mcpServers.{name}" is {json_type(current)}, expected an object; not changed'
        )
    if current is not None and all(current.get(k) == v for k, v in entry.items()):
        return unchanged(file, f"the MCP server {name} is already in {path}; nothing changed")
    servers[name] = {**(current or {}), **entry}
    words = shlex.join([entry["command"], *entry["args"]])
    verb = "added" if current is None else "updated"
    return Change(
        path,
        file.text,
        render(data, file.indent, file.text),
        f"{verb} the MCP server {name} in {path}: {words}",
    )
