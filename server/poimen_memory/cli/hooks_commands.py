"""``mem hooks ...`` and ``mem mcp install``: capture Claude Code sessions as they end, and
register the MCP server with Claude Code. The work is in ``poimen_memory.hooks``.

The project an installed command files memories under is decided by the one rule,
``lookup.decide_project``; the installer writes it into the command only when the rule took
it from this command line or ``POIMEN_PROJECT`` (see ``hooks.written_project``)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

from poimen_memory import hooks
from poimen_memory.cli.errors import UsageError
from poimen_memory.domain import RepoId
from poimen_memory.lookup import LookupFailed, ProjectChoice, decide_project, identity_of
from poimen_memory.settings import load_settings, redact_dsn

__all__ = [
    "hooks_install",
    "hooks_missing_command",
    "hooks_run",
    "hooks_status",
    "hooks_uninstall",
    "mcp_install",
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


def _scope(args: argparse.Namespace) -> hooks.Scope:
    return "user" if _option(args, "scope") == "user" else "project"


def _settings_file(args: argparse.Namespace, scope: hooks.Scope) -> Path:
    root = _project_root(_option(args, "repo")) if scope == "project" else None
    return hooks.settings_path(scope, root)


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


def _carry_out(change: hooks.Change, dry_run: bool, note: str | None = None) -> int:
    if dry_run:
        print(change.diff(), end="")
        print(f"{change.message} (dry run: nothing written)")
    else:
        change.apply()
        print(change.message)
    if note:
        print(note)
    return 0


def hooks_missing_command(args: argparse.Namespace) -> int:
    """``mem hooks`` alone."""
    raise UsageError("missing command; see `mem hooks --help`")


def hooks_install(args: argparse.Namespace) -> int:
    """Add the hook that ingests each Claude Code session to its settings."""
    scope = _scope(args)
    root = _project_root(_option(args, "repo")) if scope == "project" else None
    path = hooks.settings_path(scope, root)
    choice = _choose_project(args, root)
    dsn = _option(args, "dsn")  # only a DSN given here: one from the environment stays there
    command = hooks.hook_command(hooks.mem_invocation(), hooks.written_project(choice), dsn)
    change = hooks.plan_hooks_install(path, command)
    _warn_secret(dsn, path)
    return _carry_out(change, args.dry_run, hooks.project_note(choice))


def hooks_uninstall(args: argparse.Namespace) -> int:
    """Remove exactly the hook ``mem hooks install`` added."""
    change = hooks.plan_hooks_uninstall(_settings_file(args, _scope(args)))
    return _carry_out(change, args.dry_run)


def hooks_run(args: argparse.Namespace) -> int:
    """What the installed hook runs: read Claude Code's payload on stdin, ingest the session's
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


def _scope_status(args: argparse.Namespace, scope: hooks.Scope) -> dict[str, Any]:
    try:
        path = _settings_file(args, scope)
    except UsageError as exc:
        return hooks.scope_status(None, str(exc))
    return hooks.scope_status(path)


def hooks_status(args: argparse.Namespace) -> int:
    """Where the hook is installed, what it runs, and its last runs."""
    scopes: list[hooks.Scope] = [_scope(args)] if _option(args, "scope") else ["project", "user"]
    if args.last < 0:
        raise UsageError(f"--last: expected 0 or more, got {args.last}")
    statuses = {scope: _scope_status(args, scope) for scope in scopes}
    runs = hooks.read_log(args.last)
    if args.json:
        report = {"agent": hooks.AGENT, "scopes": statuses, "log": str(hooks.log_path())}
        print(json.dumps({**report, "runs": runs}, indent=2))
        return 0
    print(hooks.render_status(statuses, runs, hooks.log_path()), end="")
    return 0


def mcp_install(args: argparse.Namespace) -> int:
    """Add the ``mem mcp`` server to Claude Code's MCP configuration."""
    scope = _scope(args)
    repo = _option(args, "install_repo")
    root = _project_root(repo) if scope == "project" or repo else None
    path = hooks.mcp_config_path(scope, root)
    dsn = _option(args, "dsn")
    choice = _choose_project(args, root)
    entry = hooks.mcp_entry(hooks.mem_invocation(), root, hooks.written_project(choice), dsn)
    change = hooks.plan_mcp_install(path, entry)
    _warn_secret(dsn, path)
    return _carry_out(change, args.dry_run, hooks.project_note(choice))
