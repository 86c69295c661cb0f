"""``mem doctor``: what ``mem`` would use here, and why: the config file, the store, the
work tree, the repository identity and the project (by the one project rule), each with
where it came from; and the agents' hooks and MCP entries found (each scope of Claude Code
and Codex, and the git post-commit hook), with whether each would run on this machine."""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from poimen_memory import hooks
from poimen_memory.cli.operations import settings_of
from poimen_memory.errors import ConfigError, SchemaMissing
from poimen_memory.lookup import LookupFailed, LookupInputError, decide_project, identity_of
from poimen_memory.settings import Settings
from poimen_memory.wiring import Store, describe_target, embedded_pgdata, git_hooks_dir

__all__ = ["Doctor", "Found", "Installed", "doctor"]


class Found(BaseModel):
    """A value ``mem`` uses here, where it came from, and (for files and the store) its
    state."""

    value: Annotated[str | None, Field(description="The value (None: none).")]
    source: Annotated[str, Field(description="Where it came from, or why there is none.")]
    state: Annotated[str | None, Field(description="Its state, where it has one.")] = None


class Installed(BaseModel):
    """A hook or MCP entry of ours found in an agent's configuration, and whether its
    program would run on this machine."""

    agent: Annotated[str, Field(description="claude-code, codex, or git.")]
    kind: Annotated[str, Field(description="hooks, mcp, or post-commit.")]
    scope: Annotated[str, Field(description="local, project or user (repository: git).")]
    path: Annotated[str, Field(description="The file it is in.")]
    command: Annotated[str, Field(description="What it runs.")]
    runs_here: Annotated[bool, Field(description="Its program is found and executable here.")]
    problem: Annotated[
        str | None, Field(description="Why it would not run here (None: it would).")
    ] = None


class Doctor(BaseModel):
    """What ``mem`` uses here."""

    config_file: Annotated[Found, Field(description="The config file (state: found, none).")]
    store: Annotated[
        Found,
        Field(description="The store (state: ok, unreachable, schema missing, not started)."),
    ]
    work_tree: Annotated[Found, Field(description="The git work tree.")]
    repo: Annotated[Found, Field(description="The repository's identity.")]
    project: Annotated[Found, Field(description="The project (the one project rule).")]
    installed: Annotated[
        list[Installed],
        Field(description="Our hooks and MCP entries in the agents' configuration files."),
    ] = []


def _store(settings: Settings) -> Found:
    if settings.dsn is None:
        where = (
            f"embedded Postgres in {embedded_pgdata(settings.data_dir, settings.embedded_root_dir)}"
        )
        return Found(value=where, source="default: no dsn set", state="not started")
    store = Store(settings.dsn, lazy=True, timeout=3.0)
    with contextlib.closing(store):
        problem = store.probe()
    state = "ok" if problem is None else "schema missing"
    if problem is not None and not isinstance(problem, SchemaMissing):
        state = "unreachable"
    source = settings.origin("dsn") or "settings"
    return Found(value=describe_target(settings.dsn), source=source, state=state)


def _entry(agent: str, kind: str, scope: str, path: Path, words: list[str]) -> Installed:
    problem = hooks.program_runs_here(words[0]) if words else "no command"
    command = shlex.join(words) if kind != "hooks" else words[-1]
    return Installed(
        agent=agent, kind=kind, scope=scope, path=str(path), command=command,
        runs_here=problem is None, problem=problem,
    )  # fmt: skip


def _unreadable(agent: str, kind: str, scope: str, path: Path, exc: Exception) -> Installed:
    return Installed(
        agent=agent, kind=kind, scope=scope, path=str(path), command="",
        runs_here=False, problem=str(exc),
    )  # fmt: skip


def _hook_entries(root: Path | None) -> list[Installed]:
    found = []
    for agent in hooks.AGENTS:
        for scope in agent.scopes:
            if scope != "user" and root is None:
                continue
            path = agent.settings_path(scope, root if scope != "user" else None)
            try:
                commands = hooks.installed_commands(path, agent.name)
            except ConfigError as exc:
                found.append(_unreadable(agent.name, "hooks", scope, path, exc))
                continue
            for command in dict.fromkeys(c for cs in commands.values() for c in cs):
                words = shlex.split(command)
                found.append(_entry(agent.name, "hooks", scope, path, [words[0], command]))
    return found


def _mcp_entries(root: Path | None) -> list[Installed]:
    found = []
    for scope in hooks.SCOPES:
        if scope != "user" and root is None:
            continue
        at = root if scope != "user" else None
        path = hooks.mcp_config_path(scope, at)
        try:
            table: Any = hooks.read_json(path).data
        except ConfigError as exc:
            found.append(_unreadable(hooks.AGENT, "mcp", scope, path, exc))
            continue
        for part in hooks.mcp_servers_key(scope, at):
            table = table.get(part) if isinstance(table, dict) else None
        entry = table.get(hooks.MCP_SERVER) if isinstance(table, dict) else None
        if isinstance(entry, dict):
            words = [str(entry.get("command", "")), *map(str, entry.get("args") or [])]
            found.append(_entry(hooks.AGENT, "mcp", scope, path, words))
    return found


def _git_entry(root: Path | None) -> list[Installed]:
    if root is None:
        return []
    with contextlib.suppress(ConfigError, OSError):
        hook = git_hooks_dir(root).path / hooks.GIT_HOOK
        if hooks.is_our_git_hook(hook):
            words = hooks.git_hook_command(hook.read_text(encoding="utf-8"))
            return [_entry("git", "post-commit", "repository", hook, words)]
    return []


def examine(args: argparse.Namespace) -> Doctor:
    """What ``mem`` would use, run here with these arguments."""
    settings = settings_of(args)
    base = Path(args.repo) if args.repo else Path.cwd()
    tree = Found(value=None, source=f"{base} is not in a git work tree")
    repo = Found(value=None, source="no work tree")
    identity = None
    with contextlib.suppress(LookupFailed, LookupInputError):
        identity, root = identity_of(base, settings.repo)
        tree = Found(value=str(root), source="--repo" if args.repo else "the cwd")
        if settings.repo is not None:
            source = settings.origin("repo") or "settings"
        elif identity.value.startswith("local/"):
            source = "local: no remote (derived from the root commit)"
        else:
            source = "the work tree's remote (origin, else the first)"
        repo = Found(value=identity.value, source=source)
    choice = decide_project(settings, identity)
    config = settings.config
    at = Path(tree.value) if tree.value else None
    installed = [*_hook_entries(at), *_mcp_entries(at), *_git_entry(at)]
    return Doctor(
        config_file=Found(
            value=str(config),
            source=settings.origin("config") or "default",
            state="found" if config.is_file() else "none: defaults apply",
        ),
        store=_store(settings),
        work_tree=tree,
        repo=repo,
        project=Found(
            value=None if choice.project is None else choice.project.value, source=choice.source
        ),
        installed=installed,
    )


def doctor(args: argparse.Namespace) -> int:
    """Print what ``mem`` uses here and where each came from."""
    found = examine(args)
    if args.json:
        print(json.dumps(found.model_dump(mode="json"), indent=2))
        return 0
    for name in Doctor.model_fields:
        item = getattr(found, name)
        if isinstance(item, Found):
            state = "" if item.state is None else f"; {item.state}"
            print(
                f"{name.replace('_', ' '):<12} {item.value or 'none'} (from {item.source}{state})"
            )
    if not found.installed:
        print(f"{'installed':<12} none (no hook or MCP entry of ours found)")
    for entry in found.installed:
        runs = "runs here" if entry.problem is None else f"would not run here: {entry.problem}"
        print(f"{entry.agent + ' ' + entry.kind:<12} {entry.scope}: {entry.path} ({runs})")
        if entry.command:
            print(f"{'':<12} {entry.command}")
    return 0
