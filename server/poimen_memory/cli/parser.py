"""The argument parser of ``mem``: every command with its options and examples."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from poimen_memory.cli import commands as cmd
from poimen_memory.cli import hooks_commands as hk
from poimen_memory.cli.doctor import doctor as cmd_doctor
from poimen_memory.cli.errors import UsageError
from poimen_memory.cli.mcp_commands import DEFAULT_PORT, mcp_serve
from poimen_memory.cli.operations import add_operations
from poimen_memory.ingest import Format

__all__ = ["build_parser"]


# Options accepted before the command (`mem --dsn X db migrate`) and after it (`mem db migrate
# --dsn X`): the command's copy has no default, so it never hides the one given before.
_DSN_HELP = "Postgres connection string (default: $POIMEN_DSN, the config file, else embedded)"
_PROJECT_HELP = "project (default: $POIMEN_PROJECT or the config file)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line and exit 2, not argparse's usage
        raise UsageError(message)


def _command(
    commands: Any,
    name: str,
    help_text: str,
    func: Callable[[argparse.Namespace], int] | None,
    examples: Sequence[str],
    *,
    dsn: bool = True,
    json_output: bool = False,
    project: bool = False,
) -> argparse.ArgumentParser:
    """A subcommand with its examples in ``--help`` and the global options it takes."""
    epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples)
    p: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help_text,
        description=help_text[:1].upper() + help_text[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if dsn:
        p.add_argument("--dsn", default=argparse.SUPPRESS, help=_DSN_HELP)
    if json_output:
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    if project:
        p.add_argument("--project", default=argparse.SUPPRESS, help=_PROJECT_HELP)
    if func is not None:
        p.set_defaults(func=func)
    return p


_MCP_INSTALL_EXAMPLES = [
    "mem mcp install claude-code",
    "mem mcp install claude-code --scope project --dry-run",
    "mem mcp install claude-code --scope user --project app",
]
_HOOKS_INSTALL_EXAMPLES = [
    "mem hooks install claude-code",
    "mem hooks install claude-code --scope project --git-post-commit",
    "mem hooks install codex --project app --dry-run",
]
_CLAUDE_SCOPES = (
    "local (default): this machine, this project (.claude/settings.local.json; MCP: "
    "~/.claude.json under the project); project: committed, runs `mem` from PATH "
    "(.claude/settings.json, .mcp.json); user: this machine, every project (~/.claude/)"
)
_HOOK_SCOPES = (
    "claude-code: " + _CLAUDE_SCOPES + "; codex: user (default, ~/.codex/hooks.json) or "
    "project (.codex/hooks.json, committed)"
)
_AGENTS = ["claude-code", "codex"]


def _agent_change(
    p: argparse.ArgumentParser,
    agent_help: str,
    scope_help: str,
    *,
    agents: Sequence[str] = tuple(_AGENTS),
    repo_dest: str = "repo",
    repo_help: str = "the work tree (default: the current one)",
) -> None:
    """The arguments of a command that changes an agent's configuration: the agent, the
    scope, the work tree, and --dry-run."""
    p.add_argument("agent", choices=list(agents), help=agent_help)
    p.add_argument("--scope", choices=["local", "project", "user"], help=scope_help)
    p.add_argument("--repo", dest=repo_dest, metavar="DIR", help=repo_help)
    p.add_argument("--dry-run", action="store_true", help="show the change, write nothing")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mem``."""
    p: argparse.ArgumentParser
    parser = _Parser(
        prog="mem",
        description="poimen-memory: memories from coding-agent sessions, anchored to code.",
        epilog="examples:\n  mem demo\n  mem by-git src/app.py:42 --json\n"
        "  mem db migrate --dsn postgresql://me@db.example/mem\n\n"
        "exit status: 0 ok, 1 the store or repository is unavailable, 2 bad input",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="store_true", help="show the versions of mem, git and Postgres"
    )
    parser.add_argument("--dsn", help=_DSN_HELP)
    parser.add_argument("--json", action="store_true", help="print JSON (commands that can)")
    parser.add_argument("--project", help=_PROJECT_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    db = _command(
        commands, "db", "manage the store's schema", None,
        ["mem db migrate", "mem db status --json"], dsn=False,
    )  # fmt: skip
    db_commands = db.add_subparsers(dest="db_command", metavar="DB_COMMAND", parser_class=_Parser)
    _command(
        db_commands, "migrate", "apply pending schema migrations (idempotent)", cmd.db_migrate,
        ["mem db migrate", "mem db migrate --dsn postgresql://me@db.example/mem"],
        json_output=True,
    )  # fmt: skip
    p = _command(
        db_commands, "grant-readonly",
        "print (or --apply) the GRANTs for a read-only lookup role, and the projects it may "
        "see", cmd.db_grant_readonly,
        ["mem db grant-readonly mem_reader", "mem db grant-readonly mem_reader --apply",
         "mem db grant-readonly mem_alpha --project alpha --project beta --apply"],
    )  # fmt: skip
    p.add_argument("role", metavar="ROLE", help="an existing Postgres role")
    p.add_argument(
        "--project", dest="projects", action="append", metavar="P",
        help="the role sees (and, given write grants, writes) only these projects' rows "
        "(row-level security); replaces its earlier projects. Without: every project",
    )  # fmt: skip
    p.add_argument("--apply", action="store_true", help="run the statements instead of printing")

    p = _command(
        commands, "ingest", "ingest agent transcripts with git context", cmd.ingest,
        ["mem ingest ~/.claude/projects/-home-me-app --repo ~/app --project app",
         "mem ingest notes.jsonl --format jsonl --skip-bad --json"],
        json_output=True, project=True,
    )  # fmt: skip
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, or directories of them")
    p.add_argument("--repo", default=".", help="the git work tree the transcripts worked in")
    p.add_argument("--repo-id", help="repository identity to record instead of origin's URL")
    p.add_argument(
        "--format", choices=[f.value for f in Format], default="auto", help="input format"
    )
    p.add_argument("--skip-bad", action="store_true", help="write good records, list bad ones")
    p.add_argument("--budget", type=int, default=2048, help="tokens per L0 chunk (default 2048)")
    p.add_argument(
        "--batch-nodes", type=int, default=5000, help="nodes per transaction (default 5000)"
    )
    p.add_argument(
        "--no-redact", action="store_true", help="keep secrets in the text (default: redact)"
    )

    add_operations({(): commands, ("db",): db_commands}, _command)
    p = _command(
        commands, "doctor",
        "the store, project, repository and work tree in use, and where each came from",
        cmd_doctor,
        ["mem doctor", "mem doctor --json", "mem doctor --repo ~/app"],
        json_output=True, project=True,
    )  # fmt: skip
    p.add_argument("--repo", metavar="DIR", help="the work tree (default: the current one)")
    p.add_argument("--repo-id", metavar="ID", help="the repository's identity instead of origin's")

    p = _command(
        commands, "demo", "build a sample repository with memories; show a hover", cmd.demo,
        ["mem demo", "mem demo --dir /tmp/poimen-demo"],
    )  # fmt: skip
    p.add_argument("--dir", help="where to build it (default: <user data dir>/demo/kong-<commit>)")
    p = _command(
        commands, "lsp", "run the language server (stdio by default)", cmd.lsp,
        ["mem lsp", "mem lsp --tcp 127.0.0.1:2087"], dsn=False,
    )  # fmt: skip
    p.add_argument(
        "--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio (loopback only)"
    )
    p = _command(
        commands, "http", "serve the HTTP API", cmd.http,
        ["mem http --repo ~/app --project app",
         "mem http --host 0.0.0.0 --token \"$POIMEN_HTTP_TOKEN\" --repo ~/app"],
        project=True,
    )  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8750, help="port (default 8750)")
    p.add_argument("--repo", action="append", help="a work tree to serve by-git for (repeatable)")
    p.add_argument("--repo-id", help="repository identity instead of origin's URL")
    p.add_argument("--token", help="bearer token required on every route but /health")
    p.add_argument(
        "--token-project",
        action="append",
        metavar="PROJECT",
        help="the token may only ask about this project (repeatable; default: any)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="let web pages from this origin call the API, e.g. http://localhost:3000 "
        "(repeatable; default: none)",
    )
    # -- mcp commands --
    p = _command(
        commands, "mcp", "serve the memory tools to coding agents over MCP (stdio by default)",
        mcp_serve,
        ["mem mcp --repo ~/app --project app",
         "mem mcp --http --port 8751 --repo ~/app --project app",
         "mem mcp --http --host 0.0.0.0 --token \"$POIMEN_HTTP_TOKEN\" --repo ~/app"],
        project=True,
    )  # fmt: skip
    p.add_argument("--repo", action="append", help="a work tree the tools answer for (repeatable)")
    p.add_argument("--repo-id", help="repository identity instead of origin's URL")
    p.add_argument(
        "--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio"
    )
    p.add_argument("--host", help="with --http: address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help=f"with --http: port (default {DEFAULT_PORT})")
    p.add_argument(
        "--token",
        help="with --http: bearer token every request must carry (default: $POIMEN_HTTP_TOKEN; "
        "required off loopback)",
    )
    mcp_actions = p.add_subparsers(dest="mcp_command", metavar="ACTION", parser_class=_Parser)
    mcp_actions.required = False  # `mem mcp` alone serves
    # -- mcp install / uninstall --
    _agent_change(
        _command(mcp_actions, "install", "add the MCP server to Claude Code's configuration",
                 hk.mcp_install, _MCP_INSTALL_EXAMPLES, project=True),
        "the agent to configure", _CLAUDE_SCOPES, agents=["claude-code"],
        repo_dest="install_repo", repo_help="the project (default: the current work tree)",
    )  # fmt: skip
    _agent_change(
        _command(mcp_actions, "uninstall", "remove exactly the entry `mem mcp install` added",
                 hk.mcp_uninstall,
                 ["mem mcp uninstall claude-code", "mem mcp uninstall claude-code --scope user"],
                 dsn=False),
        "the agent to configure", _CLAUDE_SCOPES, agents=["claude-code"],
        repo_dest="install_repo", repo_help="the project (default: the current work tree)",
    )  # fmt: skip
    # -- hooks commands --
    p = _command(
        commands, "hooks", "capture agent sessions as they end, through the agent's hooks",
        hk.hooks_missing_command,
        ["mem hooks install claude-code", "mem hooks status"], dsn=False,
    )  # fmt: skip
    hook_actions = p.add_subparsers(dest="hooks_command", metavar="ACTION", parser_class=_Parser)
    install = "make the agent ingest each session as it stops or ends"
    p = _command(hook_actions, "install", install, hk.hooks_install, _HOOKS_INSTALL_EXAMPLES,
                 project=True)  # fmt: skip
    _agent_change(p, "the agent to hook into", _HOOK_SCOPES)
    p.add_argument(
        "--git-post-commit",
        action="store_true",
        help="also add a git post-commit hook to the work tree's repository that places "
        "pending anchors after each commit, in the background (a hook there is kept and "
        "runs after it)",
    )
    p = _command(
        hook_actions, "uninstall", "remove exactly the hook `mem hooks install` added",
        hk.hooks_uninstall,
        ["mem hooks uninstall claude-code", "mem hooks uninstall codex --scope project",
         "mem hooks uninstall claude-code --git-post-commit"],
        dsn=False,
    )  # fmt: skip
    _agent_change(p, "the agent to unhook", _HOOK_SCOPES)
    p.add_argument(
        "--git-post-commit",
        action="store_true",
        help="also remove the git post-commit hook, putting back the one it ran after",
    )
    p = _command(
        hook_actions, "run",
        "what the hook runs: ingest the transcript named by the JSON on stdin (exits 0, "
        "prints nothing; see `mem hooks status`)",
        hk.hooks_run,
        ["mem hooks run claude-code < payload.json",
         "mem hooks run codex --wait < payload.json"],
        project=True,
    )  # fmt: skip
    p.add_argument("agent", choices=_AGENTS, help="the agent whose hook this is")
    p.add_argument(
        "--wait", action="store_true", help="ingest here and now instead of in the background"
    )
    _command(
        hook_actions, "post-commit",
        "what the git post-commit hook runs: place the pending anchors of the work tree here "
        "(exits 0, prints nothing; see `mem hooks status`)",
        hk.hooks_post_commit,
        ["mem hooks post-commit", "mem hooks post-commit --project app"],
        project=True,
    )  # fmt: skip
    p = _command(
        hook_actions, "status", "where the hooks are installed, what they run, their last runs",
        hk.hooks_status,
        ["mem hooks status", "mem hooks status claude-code --scope user --json"],
        dsn=False, json_output=True,
    )  # fmt: skip
    p.add_argument("agent", nargs="?", choices=_AGENTS, help="the agent (default: all)")
    p.add_argument(
        "--scope", choices=["local", "project", "user"], help="one scope (default: each)"
    )
    p.add_argument("--repo", metavar="DIR", help="the work tree (default: the current one)")
    p.add_argument("--last", type=int, default=10, help="runs to show (default 10)")
    return parser
