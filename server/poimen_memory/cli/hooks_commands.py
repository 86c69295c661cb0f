"""``mem hooks ...`` and ``mem mcp install/uninstall``: capture Claude Code and Codex sessions
as they end, register the MCP server with Claude Code, and (opt-in) place pending anchors
after each git commit. The work is in ``poimen_memory.hooks``.

Scopes are the agent's own: Claude Code's ``local`` (the default), ``project`` and ``user``;
Codex's ``user`` (the default) and ``project``. The project an installed command files
memories under is decided by the one rule, ``lookup.decide_project``; the installer writes it
into the command only when the rule took it from this command line or ``POIMEN_PROJECT`` (see
``hooks.written_project``)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from poimen_memory import hooks
from poimen_memory.cli.errors import UsageError
from poimen_memory.cli.operations import run_operation
from poimen_memory.domain import RepoId
from poimen_memory.hooks.state import write_log
from poimen_memory.lookup import LookupFailed, ProjectChoice, decide_project, identity_of
from poimen_memory.operations import OPERATIONS
from poimen_memory.settings import load_settings, redact_dsn
from poimen_memory.wiring import git_exclude_locally, git_hooks_dir, git_ignores

__all__ = [
    "hooks_install",
    "hooks_missing_command",
    "hooks_post_commit",
    "hooks_run",
    "hooks_status",
    "hooks_uninstall",
    "mcp_install",
    "mcp_uninstall",
]


def _option(args: argparse.Namespace, name: str) -> Any:
    return getattr(args, name, None)


def _project_root(repo: str | None) -> Path:
    """The work tree root of ``repo`` (default: the current directory)."""
    try:
        return identity_of(repo or ".")[1]
    except LookupFailed as exc:
        hint = "" if repo else " (give --repo DIR, or --scope user)"
        raise UsageError(f"--repo: {exc}{hint}") from None


def _agent(args: argparse.Namespace) -> hooks.AgentHooks:
    return hooks.agent_hooks(args.agent)


def _scope(args: argparse.Namespace, agent: hooks.AgentHooks) -> str:
    """The scope asked for, else the agent's default; one the agent does not have is refused."""
    scope = _option(args, "scope") or agent.scopes[0]
    if scope not in agent.scopes:
        raise UsageError(
            f"--scope {scope}: {agent.name} has no {scope} scope (its scopes: "
            f"{', '.join(agent.scopes)})"
        )
    return str(scope)


def _identity(root: Path | None) -> RepoId | None:
    """The repository identity of the work tree at ``root`` (None: none, or git cannot say)."""
    if root is None:
        return None
    try:
        return identity_of(root)[0]
    except LookupFailed:
        return None


def _choose_project(args: argparse.Namespace, root: Path | None) -> ProjectChoice:
    """The project the installed command's runs get by the one rule, as far as it is known
    here: ``--project``, ``POIMEN_PROJECT``, the config file, else the repository at ``root``
    (none for the user scope without ``--repo``). A bad setting is a ConfigError now."""
    settings = load_settings({"project": _option(args, "project"), "dsn": _option(args, "dsn")})
    return decide_project(settings, repo=_identity(root))


def _warn_secret(dsn: str | None, path: Path) -> None:
    if dsn and redact_dsn(dsn, dsn) != dsn:
        print(f"mem: warning: the --dsn password is written into {path}", file=sys.stderr)


def _carry_out(
    changes: list[hooks.Change | hooks.GitHookChange], dry_run: bool, notes: list[str]
) -> int:
    for change in changes:
        if dry_run:
            if isinstance(change, hooks.Change):
                print(change.diff(), end="")
            print(f"{change.message} (dry run: nothing written)")
        else:
            change.apply()
            print(change.message)
    for note in notes:
        print(note)
    return 0


def hooks_missing_command(args: argparse.Namespace) -> int:
    """``mem hooks`` alone."""
    raise UsageError("missing command; see `mem hooks --help`")


def _local_note(path: Path) -> list[str]:
    """A local settings file git would commit (it holds this machine's path): git is told to
    ignore it in this clone, as Claude Code does when it creates one; else say so."""
    if git_ignores(path) is not False:
        return []
    excluded = git_exclude_locally(path)
    if excluded is not None:
        return [f"git ignores {path.name} in this clone now (added to {excluded})"]
    return [
        f"note: git does not ignore {path}; it holds this machine's path to mem: add "
        f"{path.name} to .gitignore"
    ]


def _codex_notes(scope: str, root: Path | None) -> list[str]:
    configs = [hooks.codex_home() / "config.toml"]
    if root is not None:
        configs.append(root / ".codex" / "config.toml")
    notes = [f"note: {off}" for c in configs if (off := hooks.hooks_turned_off(c))]
    if scope == "project":
        notes.append("note: Codex reads .codex/ only in a project it trusts")
    notes.append("Codex runs a new or changed hook once you trust it: open /hooks in Codex")
    return notes


def _git_hook_install(args: argparse.Namespace, root: Path, options: list[str]) -> Any:
    hooks_dir = git_hooks_dir(root)
    log = hooks.log_path()
    script = hooks.post_commit_script(hooks.mem_invocation(), log, options)
    return hooks.plan_git_hook_install(hooks_dir, script)


def hooks_install(args: argparse.Namespace) -> int:
    """Add the hook that ingests each session to the agent's settings (and, with
    --git-post-commit, the git hook that places pending anchors after each commit)."""
    agent = _agent(args)
    scope = _scope(args, agent)
    wants_git = bool(_option(args, "git_post_commit"))
    root = _project_root(_option(args, "repo")) if scope != "user" or wants_git else None
    path = agent.settings_path(scope, root if scope != "user" else None)
    choice = _choose_project(args, root)
    dsn = _option(args, "dsn")  # only a DSN given here: one from the environment stays there
    project = hooks.written_project(choice)
    command = hooks.hook_command(hooks.invocation_for(scope, str(path)), project, dsn, agent.name)
    changes: list[hooks.Change | hooks.GitHookChange] = [
        hooks.plan_hooks_install(path, command, agent.name)
    ]
    if wants_git:
        assert root is not None
        if dsn and redact_dsn(dsn, dsn) != dsn:
            raise UsageError(
                "--dsn: its password would be written into the git hook, which anyone on this "
                "machine can read, and shown in the process list at each commit; give the "
                "store by POIMEN_DSN, the config file's dsn or a ~/.pgpass entry instead"
            )
        options = [*(["--project", project] if project else []), *(["--dsn", dsn] if dsn else [])]
        changes.append(_git_hook_install(args, root, options))
    _warn_secret(dsn, path)
    code = _carry_out(changes, args.dry_run, [hooks.project_note(choice)])
    notes = _local_note(path) if scope == "local" and not args.dry_run else []
    if agent.name == hooks.CODEX:
        notes += _codex_notes(scope, root)
    for note in notes:
        print(note)
    return code


def hooks_uninstall(args: argparse.Namespace) -> int:
    """Remove exactly the hook ``mem hooks install`` added (and, with --git-post-commit, the
    git hook, putting back the one it ran after)."""
    agent = _agent(args)
    scope = _scope(args, agent)
    wants_git = bool(_option(args, "git_post_commit"))
    root = _project_root(_option(args, "repo")) if scope != "user" or wants_git else None
    path = agent.settings_path(scope, root if scope != "user" else None)
    changes: list[hooks.Change | hooks.GitHookChange] = [
        hooks.plan_hooks_uninstall(path, agent.name)
    ]
    if wants_git:
        assert root is not None
        changes.append(hooks.plan_git_hook_uninstall(git_hooks_dir(root)))
    return _carry_out(changes, args.dry_run, [])


def hooks_run(args: argparse.Namespace) -> int:
    """What the installed hook runs: read the agent's payload on stdin, ingest the session's
    transcript (detached, unless --wait). Always exits 0 and prints nothing; see the log."""
    raw = b""
    with contextlib.suppress(Exception):  # unreadable: logged as no payload
        if not sys.stdin.isatty():
            raw = sys.stdin.buffer.read(hooks.PAYLOAD_MAX_BYTES + 1)
    with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()):
        hooks.run_hook(
            raw,
            project=_option(args, "project"),
            dsn=_option(args, "dsn"),
            wait=args.wait,
            agent=args.agent,
        )
    return 0


def hooks_post_commit(args: argparse.Namespace) -> int:
    """What the git post-commit hook runs (in the background): place the pending anchors of
    the work tree here that a commit now holds. Always exits 0 and prints nothing; one line
    in the hook log says what it did."""
    entry: dict[str, Any] = {"event": hooks.GIT_HOOK, "cwd": str(Path.cwd())}
    dsn = _option(args, "dsn")
    try:
        op = next(op for op in OPERATIONS if op.name == "resolve_pending")
        request = argparse.Namespace(
            dsn=dsn, project=_option(args, "project"), repo=[str(Path.cwd())], repo_id=None,
            git_repo=None, json=True,
        )  # fmt: skip
        with contextlib.redirect_stdout(io.StringIO()) as out:
            run_operation(op, request)
        answer = json.loads(out.getvalue())
        placed = sum(repo["anchors"] for repo in answer["repos"])
        skipped = [repo["skipped"] for repo in answer["repos"] if repo.get("skipped")]
        message = f"{placed} pending anchor(s) placed, {answer['expired']} expired"
        entry.update(outcome="ok", anchors=placed, message=message)
        if skipped:
            entry["skipped"] = skipped
    except BaseException as exc:  # the commit must never see it; the log does
        text = " ".join(str(exc).split()) or type(exc).__name__
        entry.update(outcome="error", message=redact_dsn(f"{type(exc).__name__}: {text}", dsn))
    write_log(entry)
    return 0


def _agent_status(
    args: argparse.Namespace, agent: hooks.AgentHooks, scopes: list[str]
) -> dict[str, Any]:
    statuses: dict[str, Any] = {}
    for scope in scopes:
        try:
            root = _project_root(_option(args, "repo")) if scope != "user" else None
        except UsageError as exc:
            statuses[scope] = hooks.scope_status(None, str(exc), agent.name)
            continue
        statuses[scope] = hooks.scope_status(agent.settings_path(scope, root), None, agent.name)
    return statuses


def hooks_status(args: argparse.Namespace) -> int:
    """Where the hooks are installed, what they run, and their last runs."""
    if args.last < 0:
        raise UsageError(f"--last: expected 0 or more, got {args.last}")
    agents = [_agent(args)] if _option(args, "agent") else list(hooks.AGENTS)
    statuses = {}
    for agent in agents:
        scopes = [_scope(args, agent)] if _option(args, "scope") else list(agent.scopes)
        statuses[agent.name] = _agent_status(args, agent, scopes)
    runs = hooks.read_log(args.last)
    if args.json:
        report = {"agents": statuses, "log": str(hooks.log_path())}
        print(json.dumps({**report, "runs": runs}, indent=2))
        return 0
    print(hooks.render_status(statuses, runs, hooks.log_path()), end="")
    return 0


# -- mcp install / uninstall ------------------------------------------------------------------


def _mcp_place(args: argparse.Namespace) -> tuple[str, Path | None, Path, tuple[str, ...]]:
    """(scope, project root, file, where mcpServers sits in it) for ``mem mcp install``."""
    asked = _option(args, "scope") or "local"
    scope = next(s for s in hooks.SCOPES if s == asked)  # argparse's choices are these
    repo = _option(args, "install_repo")
    root = _project_root(repo) if scope != "user" or repo else None
    at = root if scope != "user" else None
    return scope, root, hooks.mcp_config_path(scope, at), hooks.mcp_servers_key(scope, at)


def _direct_note(path: Path) -> str:
    return (
        f"note: `claude` is not on PATH, so {path} was written directly; a Claude Code running "
        "now may write over it when it exits: check with `mem doctor` then"
    )


def mcp_install(args: argparse.Namespace) -> int:
    """Add the ``mem mcp`` server to Claude Code's MCP configuration: through ``claude mcp
    add-json`` when ``claude`` is on PATH, else in the file itself."""
    scope, root, path, key = _mcp_place(args)
    dsn = _option(args, "dsn")
    choice = _choose_project(args, root)
    invocation = hooks.invocation_for(scope, str(path))
    entry = hooks.mcp_entry(invocation, hooks.written_project(choice), dsn)
    change = hooks.plan_mcp_install(path, entry, key)
    _warn_secret(dsn, path)
    notes = [hooks.project_note(choice)]
    claude_cli = shutil.which("claude")
    if claude_cli is None or not change.changed:
        if change.changed and path.name == ".claude.json" and not args.dry_run:
            notes.append(_direct_note(path))
        return _carry_out([change], args.dry_run, notes)
    merged = _entry_after(change, key)
    steps = [hooks.claude_mcp_add(scope, merged)]
    if change.message.startswith("updated"):  # add-json refuses a name already there
        steps.insert(0, hooks.claude_mcp_remove(scope))
    cwd = root or Path.cwd()
    if args.dry_run:
        print(change.diff(), end="")
        for step in steps:
            print(f"would run: {shlex.join(['claude', *step])} (in {cwd})")
        print(f"{change.message} (dry run: nothing written)")
    else:
        for step in steps:
            hooks.run_claude(claude_cli, step, cwd)
        print(f"{change.message} (through claude mcp add-json)")
    for note in notes:
        print(note)
    return 0


def _entry_after(change: hooks.Change, key: tuple[str, ...]) -> dict[str, Any]:
    """Our entry as the planned file holds it (ours merged over the one there)."""
    assert change.after is not None
    table: Any = json.loads(change.after)
    for part in key:
        table = table[part]
    return dict(table[hooks.MCP_SERVER])


def mcp_uninstall(args: argparse.Namespace) -> int:
    """Remove exactly the ``mem mcp`` entry ``mem mcp install`` added from a scope."""
    scope, root, path, key = _mcp_place(args)
    change = hooks.plan_mcp_uninstall(path, key)
    claude_cli = shutil.which("claude")
    if claude_cli is None or not change.changed:
        notes = [_direct_note(path)] if change.changed and path.name == ".claude.json" else []
        return _carry_out([change], args.dry_run, [] if args.dry_run else notes)
    step = hooks.claude_mcp_remove(scope)
    cwd = root or Path.cwd()
    if args.dry_run:
        print(change.diff(), end="")
        print(f"would run: {shlex.join(['claude', *step])} (in {cwd})")
        print(f"{change.message} (dry run: nothing written)")
        return 0
    hooks.run_claude(claude_cli, step, cwd)
    print(f"{change.message} (through claude mcp remove)")
    return 0
