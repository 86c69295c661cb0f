"""What ``mem hooks install/uninstall`` and ``mem mcp install/uninstall`` write: the hook
command (and how to recognise ours among other tools' hooks), merged into or removed from the
``hooks`` table of an agent's settings file, and the ``mcpServers`` entry that runs ``mem
mcp``. Each is planned as a ``Change``; every other key, hook and server is kept as it was.

A file a team commits (the project scope) never holds one machine's path: its command is
``mem``, found on each machine's PATH. The local and user scopes are this machine's, and run
this very ``mem`` by its absolute path."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poimen_memory.errors import ConfigError
from poimen_memory.hooks import claude, codex
from poimen_memory.hooks.claude import AGENT, HOOK_TIMEOUT_S, MCP_SERVER
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
    "AGENTS",
    "AgentHooks",
    "agent_hooks",
    "claude_mcp_add",
    "claude_mcp_remove",
    "hook_command",
    "installed_commands",
    "invocation_for",
    "is_hook_command",
    "mcp_entry",
    "mem_invocation",
    "plan_hooks_install",
    "plan_hooks_uninstall",
    "plan_mcp_install",
    "plan_mcp_uninstall",
    "program_runs_here",
    "project_note",
    "run_claude",
    "written_project",
]

# Where a project comes from that the command must carry: the installer's own command line,
# and its environment, which the agent's may not be. One from the config file, or derived from
# the repository, is left to the run, which decides it by the same rule.
_CARRIED = ("request", "--project", "POIMEN_PROJECT")
# `mem hooks run` itself exits 0 whatever happens. What can fail is the shell finding mem (127
# on a machine without it: a teammate's, for a committed file) or parsing its command line (2,
# from a mem older or newer than the command). Exit 2 would block the agent (on Stop: keep it
# from stopping), and `|| true` would hide the failure. So: a one-line note on stderr and exit
# 1, which Claude Code shows as a hook error notice and Codex as a failed hook, and neither
# ever blocks on (code.claude.com/docs/en/hooks, "Exit code output"). `!` inverts echo's 0 in
# sh, bash, zsh and fish alike (Codex runs hooks in $SHELL -lc).
_FALLBACK = (
    "|| ! echo 'poimen-memory: the session was not captured: mem failed or is not on PATH "
    "(see mem doctor)' >&2"
)
_CLAUDE_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class AgentHooks:
    """An agent whose hooks ``mem hooks install`` writes: its events, the words that make a
    command ours, its scopes (the first is the default) and where each keeps its hooks."""

    name: str
    events: tuple[str, ...]
    words: tuple[str, ...]
    scopes: tuple[str, ...]

    def settings_path(self, scope: str, root: Path | None) -> Path:
        """The file the hooks of ``scope`` go in."""
        if self.name == codex.CODEX:
            return codex.codex_hooks_path("user" if scope == "user" else "project", root)
        claude_scope: claude.Scope = "user" if scope == "user" else "project"
        if scope == "local":
            claude_scope = "local"
        return claude.settings_path(claude_scope, root)


AGENTS: tuple[AgentHooks, ...] = (
    AgentHooks(AGENT, claude.EVENTS, claude.HOOK_WORDS, claude.SCOPES),
    AgentHooks(codex.CODEX, codex.CODEX_EVENTS, codex.CODEX_HOOK_WORDS, ("user", "project")),
)


def agent_hooks(name: str) -> AgentHooks:
    """The agent called ``name`` (``claude-code``, ``codex``)."""
    return next(agent for agent in AGENTS if agent.name == name)


def _is_users(path: Path) -> bool:
    """Whether ``path`` is one of the user's own files (``~/.claude/settings.json``,
    ``~/.claude.json``, Codex's user hooks), which may be links the user made (to a dotfiles
    repository) and are written where they point. Every other file is a work tree's, which a
    repository may commit as a link (or inside a linked directory) to a file outside it: never
    read or written through a link."""
    mine = (
        claude.settings_path("user", None),
        claude.claude_json_path(),
        codex.codex_hooks_path("user", None),
    )
    return any(os.path.abspath(path) == os.path.abspath(user) for user in mine)


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


def invocation_for(scope: str, what: str) -> list[str]:
    """How the installed command runs mem: ``mem`` from PATH in a file the team commits (the
    project scope), which mem must then be on here too; this mem's absolute path otherwise.
    ``what`` names the file, for the refusal."""
    if scope != "project":
        return mem_invocation()
    if shutil.which("mem") is None:
        raise ConfigError(
            f"--scope project: `mem` is not on PATH, and {what} is committed: it must run `mem` "
            "from each machine's PATH, never this machine's path to it. Put mem on PATH "
            "(pipx install poimen-memory, or add your virtual environment's bin directory to "
            "PATH), or use --scope local or user, which are this machine's and may hold its path"
        )
    return ["mem"]


def _options(project: str | None, dsn: str | None) -> list[str]:
    return [*(["--project", project] if project else []), *(["--dsn", dsn] if dsn else [])]


def hook_command(
    invocation: Sequence[str], project: str | None, dsn: str | None, agent: str = AGENT
) -> str:
    """The shell command the agent runs on each event: ``mem hooks run AGENT``, and, when that
    fails to run at all, a one-line note on stderr and exit 1 (shown, never blocking)."""
    words = agent_hooks(agent).words
    return shlex.join([*invocation, *words, *_options(project, dsn)]) + " " + _FALLBACK


def is_hook_command(command: object, agent: str = AGENT) -> bool:
    """Whether a hook command is ours: ``mem`` (any path to it) or ``python -m
    poimen_memory.cli``, then ``hooks run AGENT``; another tool whose command merely contains
    those words is not."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    ours = agent_hooks(agent).words
    n = len(ours)
    for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) != ours:
            continue
        program = words[:i]
        if len(program) == 1 and Path(program[0]).name == "mem":
            return True
        if len(program) == 3 and program[1:] == ["-m", "poimen_memory.cli"]:
            return True
    return False


def program_runs_here(program: str) -> str | None:
    """Why ``program`` (a command's first word) would not run on this machine; None if it
    would: an absolute path that is an executable file, or a name found on PATH."""
    if "/" in program:
        path = Path(program).expanduser()
        if not path.is_file():
            return f"{program} does not exist"
        if not os.access(path, os.X_OK):
            return f"{program} is not executable"
        return None
    return None if shutil.which(program) else f"{program} is not on PATH"


def _our_hook(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}


def _hooks_table(file: JsonFile, data: dict[str, Any], events: Sequence[str]) -> Any:
    table: dict[str, Any] | None = container(file, data, "hooks", dict, '"hooks"')
    if table is None:
        return None
    for event in events:
        groups = container(file, table, event, list, f'"hooks.{event}"')
        for index, group in enumerate(groups or []):
            if isinstance(group, dict):
                container(file, group, "hooks", list, f'"hooks.{event}[{index}].hooks"')
    return table


def _ours_in(groups: list[Any], agent: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(group, hook) for each of our hooks among an event's matcher groups."""
    for group in groups:
        if isinstance(group, dict):
            for hook in group.get("hooks") or []:
                if isinstance(hook, dict) and is_hook_command(hook.get("command"), agent):
                    yield group, hook


def plan_hooks_install(path: Path, command: str, agent: str = AGENT) -> Change:
    """Add our hook to each of the agent's events in a settings file, or update the command of
    the one there; every other key and hook is kept."""
    events = agent_hooks(agent).events
    file = read_json(path, _is_users(path))
    data = json.loads(json.dumps(file.data))  # a copy to change
    table = _hooks_table(file, data, events)
    if table is None:
        table = data["hooks"] = {}
    added, updated = [], []
    for event in events:
        groups = table.get(event)
        if groups is None:
            groups = table[event] = []
        ours = list(_ours_in(groups, agent))
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
        return unchanged(file, f"the {agent} hook is already installed in {path}; nothing changed")
    verb = "installed" if not updated else "updated"
    listed = ", ".join(dict.fromkeys([*added, *updated]))
    return Change(
        path,
        file.text,
        render(data, file.indent, file.text),
        f"{verb} the {agent} hook in {path} ({listed}): {command}",
        file.follow_links,
    )


def plan_hooks_uninstall(path: Path, agent: str = AGENT) -> Change:
    """Remove our hooks from a settings file, and the lists and tables that removing them left
    empty; nothing else."""
    events = agent_hooks(agent).events
    file = read_json(path, _is_users(path))
    data = json.loads(json.dumps(file.data))
    table = _hooks_table(file, data, events) or {}
    removed = []
    for event in events:
        groups = table.get(event)
        ours = list(_ours_in(groups or [], agent))
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
        return unchanged(file, f"no {agent} hook in {path}; nothing changed")
    if not table:
        del data["hooks"]
    return Change(
        path,
        file.text,
        render(data, file.indent, file.text),
        f"removed the {agent} hook from {path} ({', '.join(removed)})",
        file.follow_links,
    )


def installed_commands(path: Path, agent: str = AGENT) -> dict[str, list[str]]:
    """Our hook commands in a settings file, by event (ConfigError if it is unreadable)."""
    events = agent_hooks(agent).events
    file = read_json(path, _is_users(path))
    table = _hooks_table(file, file.data, events) or {}
    found = {
        event: [str(hook["command"]) for _, hook in _ours_in(table.get(event) or [], agent)]
        for event in events
    }
    return {event: commands for event, commands in found.items() if commands}


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


def mcp_entry(invocation: Sequence[str], project: str | None, dsn: str | None) -> dict[str, Any]:
    """The ``mcpServers`` entry that runs ``mem mcp`` over stdio. It names no work tree: the
    server answers for the one the agent runs it in, so the entry holds for every checkout."""
    args = [*invocation[1:], "mcp", *_options(project, dsn)]
    return {"type": "stdio", "command": invocation[0], "args": args}


def _servers(
    file: JsonFile, data: dict[str, Any], key: Sequence[str], create: bool
) -> dict[str, Any] | None:
    """The ``mcpServers`` table at ``key`` in ``data`` (made when ``create``); ConfigError
    naming the part that is not an object."""
    table = data
    for depth, part in enumerate(key):
        where = ".".join(f'"{k}"' if "." in k or "/" in k else k for k in key[: depth + 1])
        value = container(file, table, part, dict, where)
        if value is None:
            if not create:
                return None
            value = table[part] = {}
        table = value
    return table


def plan_mcp_install(
    path: Path,
    entry: Mapping[str, Any],
    key: Sequence[str] = ("mcpServers",),
    name: str = MCP_SERVER,
) -> Change:
    """Add (or bring up to date) our entry in the ``mcpServers`` table at ``key``; other
    servers, other keys, and keys of our entry that we do not set (``env``), are kept."""
    file = read_json(path, _is_users(path))
    data = json.loads(json.dumps(file.data))
    servers = _servers(file, data, key, create=True)
    assert servers is not None
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
        file.follow_links,
    )


def plan_mcp_uninstall(
    path: Path, key: Sequence[str] = ("mcpServers",), name: str = MCP_SERVER
) -> Change:
    """Remove our entry from the ``mcpServers`` table at ``key`` (and the table, if that left
    it empty); nothing else."""
    file = read_json(path, _is_users(path))
    data = json.loads(json.dumps(file.data))
    servers = _servers(file, data, key, create=False)
    if servers is None or name not in servers:
        return unchanged(file, f"no MCP server {name} in {path}; nothing changed")
    del servers[name]
    if not servers:
        parent = data
        for part in key[:-1]:
            parent = parent[part]
        del parent[key[-1]]
    return Change(
        path,
        file.text,
        render(data, file.indent, file.text),
        f"removed the MCP server {name} from {path}",
        file.follow_links,
    )


# -- through the claude CLI -------------------------------------------------------------------


def claude_mcp_add(scope: str, entry: Mapping[str, Any], name: str = MCP_SERVER) -> list[str]:
    """``claude mcp add-json``'s arguments adding our entry to a scope."""
    body = json.dumps(dict(entry), ensure_ascii=False, separators=(",", ":"))
    return ["mcp", "add-json", "--scope", scope, name, body]


def claude_mcp_remove(scope: str, name: str = MCP_SERVER) -> list[str]:
    """``claude mcp remove``'s arguments removing our entry from a scope."""
    return ["mcp", "remove", "--scope", scope, name]


def run_claude(claude_cli: str, args: Sequence[str], cwd: Path) -> None:
    """Run ``claude ARGS`` in ``cwd`` (no shell): Claude Code then writes its own files,
    ``~/.claude.json`` included, which a running Claude Code would overwrite if we wrote it
    behind its back. ConfigError with its first line of output when it fails."""
    try:
        done = subprocess.run(
            [claude_cli, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_CLAUDE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"claude {' '.join(args[:2])}: could not run: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or "no message").splitlines()[0]
        raise ConfigError(
            f"claude {' '.join(args[:2])}: exited {done.returncode}: {said}; not changed"
        )
