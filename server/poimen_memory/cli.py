"""The ``mem`` command. A thin adapter: parse arguments, call one service, print the result.

Exit status: 0 success, 1 the store or repository is unavailable, 2 bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import psycopg

from poimen_memory import __version__
from poimen_memory.domain import ContentError, ProjectId
from poimen_memory.gitio import GitError, GitRunner
from poimen_memory.ingest import (
    Format,
    IngestError,
    IngestOptions,
    IngestRejected,
    IngestSummary,
    ingest,
)
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupFailed,
    LookupResult,
    LookupService,
    QueryRequest,
    build_service,
)
from poimen_memory.render import render_text
from poimen_memory.store import (
    ConfigError,
    DsnSource,
    ResolvedDsn,
    Store,
    StoreUnavailable,
    connect,
    embedded_dsn,
    migrate,
    resolve_dsn,
)
from poimen_memory.store.connection import (
    config_path,
    describe_target,
    read_config,
    server_version,
)
from poimen_memory.store.migrations import MigrationError

__all__ = ["main"]

EXIT_UNAVAILABLE = 1
EXIT_BAD_INPUT = 2


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


def _store_dsn(args: argparse.Namespace) -> ResolvedDsn:
    resolved = resolve_dsn(args.dsn)
    if resolved is None:
        return ResolvedDsn(embedded_dsn(), DsnSource.EMBEDDED)
    return resolved


def cmd_db_migrate(args: argparse.Namespace) -> int:
    """Apply pending schema migrations."""
    target = _store_dsn(args)
    with connect(target.dsn) as conn:
        applied = migrate(conn)
    if args.json:
        print(json.dumps({"applied": [f"{m.version:04d}_{m.name}" for m in applied]}))
    elif applied:
        for m in applied:
            print(f"applied {m.version:04d}_{m.name}")
    else:
        print("schema is up to date")
    return 0


def cmd_db_grant_readonly(args: argparse.Namespace) -> int:
    """Print (or apply) the GRANTs for a read-only role."""
    from poimen_memory.store.access import grant_readonly, readonly_grants

    target = _store_dsn(args)
    with connect(target.dsn) as conn:
        statements = (
            grant_readonly(conn, args.role) if args.apply else readonly_grants(conn, args.role)
        )
    for statement in statements:
        print(f"{statement};")
    if args.apply:
        print(f"-- applied for role {args.role}", file=sys.stderr)
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    """Schema version and row counts."""
    target = _store_dsn(args)
    with Store(target.dsn, max_size=1) as store:
        status = store.status()
    store_desc = f"{describe_target(target.dsn)} (from {target.source.value})"
    if args.json:
        print(
            json.dumps(
                {
                    "store": store_desc,
                    "schema_version": status.schema_version,
                    "latest_version": status.latest_version,
                    "nodes": status.nodes_by_level,
                    "edges": status.edges,
                    "anchors": status.anchors,
                    "commits": status.commits,
                    "projects": status.projects,
                },
                indent=2,
            )
        )
        return 0
    print(f"store           {store_desc}")
    if status.schema_version == 0:
        print("schema version  none: run `mem db migrate`")
        return 0
    behind = "" if status.schema_version == status.latest_version else "  (run `mem db migrate`)"
    print(f"schema version  {status.schema_version} of {status.latest_version}{behind}")
    levels = " · ".join(f"{lvl} {n}" for lvl, n in status.nodes_by_level.items())
    print(f"nodes           {levels}")
    print(f"edges           {status.edges}")
    print(f"anchors         {status.anchors}")
    print(f"commits         {status.commits}")
    print(f"projects        {status.projects}")
    return 0


def _project(args: argparse.Namespace) -> ProjectId:
    """--project, else $POIMEN_PROJECT, else ``project`` in the config file."""
    value = args.project or os.environ.get("POIMEN_PROJECT")
    if not value:
        value = read_config(config_path()).get("project")
    if not value:
        raise UsageError("--project: required (or set POIMEN_PROJECT, or project in the config)")
    if not isinstance(value, str):
        raise UsageError(f"project: expected a string, got {value!r}")
    return ProjectId(value)


def _print_summary(summary: IngestSummary, project: ProjectId) -> None:
    levels = " · ".join(f"{k} {v}" for k, v in summary.nodes_by_level.items())
    total = sum(summary.nodes_by_level.values())
    w = summary.written
    print(f"ingested {summary.files} file(s) into project {project} (repo {summary.repo})")
    print(f"  nodes    {levels}  ({w.nodes} new of {total})")
    print(f"  edges    {summary.edges}  ({w.edges} new)")
    print(f"  anchors  {summary.anchors}  ({w.anchors} new, {w.commits} new commits)")
    if summary.unanchored_edits:
        print(
            f"  edits that could not be located at HEAD (left unanchored): "
            f"{summary.unanchored_edits}"
        )
    print(f"  skipped  {len(summary.skipped)}")
    if summary.redacted:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(summary.redacted.items()))
        print(f"  secrets redacted: {kinds}")


def cmd_ingest(args: argparse.Namespace) -> int:
    """Ingest transcripts into the store."""
    project = _project(args)
    if args.budget < 1:
        raise UsageError(f"--budget: expected a positive number of tokens, got {args.budget}")
    if args.batch_nodes < 1:
        raise UsageError(f"--batch-nodes: expected a positive number, got {args.batch_nodes}")
    options = IngestOptions(
        project=project,
        repo_dir=Path(args.repo),
        repo_override=args.repo_id,
        format=Format(args.format),
        skip_bad=args.skip_bad,
        budget=args.budget,
        batch_nodes=args.batch_nodes,
        redact=not args.no_redact,
    )
    target = _store_dsn(args)
    with Store(target.dsn, max_size=1) as store, _progress(args) as on_progress:
        try:
            summary = ingest([Path(p) for p in args.paths], store, options, on_progress)
        except IngestRejected as rejected:
            print(
                f"mem: error: {len(rejected.bad)} bad record(s); nothing was written "
                "(--skip-bad writes the good ones)",
                file=sys.stderr,
            )
            for record in rejected.bad:
                print(f"  {record}", file=sys.stderr)
            return EXIT_BAD_INPUT
    for record in summary.skipped:
        print(f"mem: skipped {record}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        _print_summary(summary, project)
    return 0


@contextlib.contextmanager
def _progress(args: argparse.Namespace) -> Iterator[Callable[[str, int, int], None] | None]:
    """A rich progress bar on stderr when it is a terminal; nothing otherwise."""
    if args.json or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("ingest", total=None)

        def update(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total or None)

        yield update


def _service(args: argparse.Namespace, store: Store, repo_dirs: list[str]) -> LookupService:
    default = _project(args) if getattr(args, "project", None) or _has_default_project() else None
    return build_service(store, repo_dirs, default, getattr(args, "repo_id", None))


def _has_default_project() -> bool:
    return bool(os.environ.get("POIMEN_PROJECT") or read_config(config_path()).get("project"))


def _print_result(args: argparse.Namespace, result: LookupResult) -> int:
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_text(result))
    return 0


def _parse_location(spec: str) -> tuple[str, dict[str, object]]:
    """``FILE``, ``FILE:LINE`` or ``FILE:START-END`` (the last colon separates the lines)."""
    path, sep, lines = spec.rpartition(":")
    if not sep or not path or not re.fullmatch(r"\d+(-\d+)?", lines):
        return spec, {}
    if "-" in lines:
        start, end = lines.split("-")
        return path, {"lines": [int(start), int(end)]}
    return path, {"line": int(lines)}


def cmd_by_git(args: argparse.Namespace) -> int:
    """Memories at FILE:LINE (current lines mapped through blame)."""
    path, lines = _parse_location(args.location)
    target = _store_dsn(args)
    with Store(target.dsn, max_size=1) as store:
        service = _service(args, store, [args.repo] if args.repo else [])
        identity, _, relpath = service.checkouts.locate(
            Path(args.repo, path) if args.repo else Path(path).absolute()
        )
        body: dict[str, object] = {"file": relpath, "repo": identity.value, **lines}
        if args.project:
            body["project"] = args.project
        if args.commit:
            body["commit_sha"] = args.commit
        if args.at:
            body["at"] = args.at
        return _print_result(
            args, service.by_git(ByGitRequest.from_json(body, service.default_project))
        )


def cmd_by_commit(args: argparse.Namespace) -> int:
    """Memories whose evidence is anchored in a commit."""
    target = _store_dsn(args)
    with Store(target.dsn, max_size=1) as store:
        service = _service(args, store, [args.repo] if args.repo else [])
        body: dict[str, object] = {"commit_sha": args.sha}
        _scope(args, body, service)
        return _print_result(
            args, service.by_commit(ByCommitRequest.from_json(body, service.default_project))
        )


def cmd_by_author(args: argparse.Namespace) -> int:
    """Evidence from an author's commits."""
    target = _store_dsn(args)
    with Store(target.dsn, max_size=1) as store:
        service = _service(args, store, [args.repo] if args.repo else [])
        body: dict[str, object] = {"author": args.author}
        _scope(args, body, service)
        return _print_result(
            args, service.by_author(ByAuthorRequest.from_json(body, service.default_project))
        )


def cmd_query(args: argparse.Namespace) -> int:
    """Full-text search over memories."""
    target = _store_dsn(args)
    with Store(target.dsn, max_size=1) as store:
        service = _service(args, store, [])
        body: dict[str, object] = {"query": args.text, "limit": args.limit}
        if args.project:
            body["project"] = args.project
        if args.git_repo:
            body["git_repo"] = args.git_repo
        return _print_result(
            args, service.query(QueryRequest.from_json(body, service.default_project))
        )


def _scope(args: argparse.Namespace, body: dict[str, object], service: LookupService) -> None:
    if args.project:
        body["project"] = args.project
    if args.repo_id:
        body["repo"] = args.repo_id
    elif args.repo:
        body["repo"] = service.checkouts.identities()[0].value


def cmd_http(args: argparse.Namespace) -> int:
    """Serve the HTTP API."""
    import uvicorn

    from poimen_memory.http import create_app, is_loopback

    token = args.token or os.environ.get("POIMEN_HTTP_TOKEN") or None
    if not is_loopback(args.host) and not token:
        raise UsageError(
            f"--host: {args.host} is reachable from other machines; set --token or "
            "POIMEN_HTTP_TOKEN to require a bearer token"
        )
    if not 0 < args.port < 65536:
        raise UsageError(f"--port: expected 1 to 65535, got {args.port}")
    target = _store_dsn(args)
    with Store(target.dsn) as store:
        service = _service(args, store, args.repo or [])
        uvicorn.run(create_app(service, token), host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Build a sample repository with memories and show a hover."""
    from poimen_memory.demo import run_demo
    from poimen_memory.store.connection import data_dir

    target = _store_dsn(args)
    root = Path(args.dir) if args.dir else data_dir() / "demo" / "kong"
    result = run_demo(target.dsn, root.absolute())
    cite = "src/kong/buffer.rs:42"
    print(f"Sample repository: {result.repo}")
    where = f"{describe_target(target.dsn)} (from {target.source.value})"
    print(f"Memories stored:   project demo, {where}")
    print()
    print(f"Hovering {cite} in an editor shows:")
    print()
    for line in result.hover.splitlines():
        print(f"    {line}")
    print()
    print("Try it yourself:")
    print(f"    mem by-git {cite} --repo {result.repo} --project demo")
    print(f"    mem query buffer --project demo --git-repo {result.repo_id}")
    print()
    print("Hook up an editor (see the README's 'Editor setup'): run `mem lsp` as a language")
    print("server for any file type, with initializationOptions")
    print('    {"poimenMemory": {"project": "demo"}}')
    print(f"and open {result.repo / 'src/kong/buffer.rs'} at line 42.")
    return 0


def cmd_lsp(args: argparse.Namespace) -> int:
    """Run the language server on stdio (or TCP)."""
    from poimen_memory.lsp.server import create_server

    server = create_server()
    if args.tcp:
        host, sep, port = args.tcp.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--tcp: expected HOST:PORT, got {args.tcp!r}")
        server.start_tcp(host, int(port))
    else:
        server.start_io()
    return 0


# Options accepted before the command (`mem --dsn X db migrate`) and after it (`mem db migrate
# --dsn X`): the command's copy has no default, so it never hides the one given before.
_DSN_HELP = "Postgres connection string (default: $POIMEN_DSN, the config file, else embedded)"
_PROJECT_HELP = "project (default: $POIMEN_PROJECT or the config file)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
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
        db_commands, "migrate", "apply pending schema migrations (idempotent)", cmd_db_migrate,
        ["mem db migrate", "mem db migrate --dsn postgresql://me@db.example/mem"],
        json_output=True,
    )  # fmt: skip
    _command(
        db_commands, "status", "schema version and row counts", cmd_db_status,
        ["mem db status", "mem db status --json --dsn postgresql://me@db.example/mem"],
        json_output=True,
    )  # fmt: skip
    p = _command(
        db_commands, "grant-readonly",
        "print (or --apply) the GRANTs for a read-only lookup role", cmd_db_grant_readonly,
        ["mem db grant-readonly mem_reader", "mem db grant-readonly mem_reader --apply"],
    )  # fmt: skip
    p.add_argument("role", metavar="ROLE", help="an existing Postgres role")
    p.add_argument("--apply", action="store_true", help="run the GRANTs instead of printing")

    p = _command(
        commands, "ingest", "ingest agent transcripts with git context", cmd_ingest,
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

    p = _command(
        commands, "by-git", "memories at FILE:LINE, through blame", cmd_by_git,
        ["mem by-git src/app.py:42", "mem by-git src/app.py:40-60 --json --project app",
         "mem by-git src/app.py:42 --commit 1a2b3c4d --repo ~/app"],
        json_output=True, project=True,
    )  # fmt: skip
    p.add_argument("location", metavar="FILE[:LINE[-END]]", help="a file, a line or a range")
    p.add_argument("--repo", help="work tree the path is relative to (default: the current dir)")
    p.add_argument("--repo-id", help="repository identity instead of origin's URL")
    p.add_argument("--commit", help="look the lines up literally in this commit (no blame)")
    p.add_argument("--at", help="blame as of this commit instead of HEAD")
    p = _command(
        commands, "by-commit", "memories anchored in a commit", cmd_by_commit,
        ["mem by-commit 1a2b3c4d --repo ~/app", "mem by-commit 1a2b3c4d --json"],
        json_output=True, project=True,
    )  # fmt: skip
    p.add_argument("sha", metavar="SHA", help="a full commit id or a unique prefix")
    p.add_argument("--repo", help="a work tree of the repository (its identity scopes the lookup)")
    p.add_argument("--repo-id", help="repository identity to scope the lookup to")
    p = _command(
        commands, "by-author", "evidence from an author's commits", cmd_by_author,
        ["mem by-author ada@example.com --repo ~/app", "mem by-author 'Ada Lovelace' --json"],
        json_output=True, project=True,
    )  # fmt: skip
    p.add_argument("author", metavar="EMAIL", help="author email or name (.mailmap applied)")
    p.add_argument("--repo", help="a work tree of the repository (for .mailmap and scope)")
    p.add_argument("--repo-id", help="repository identity to scope the lookup to")
    p = _command(
        commands, "query", "full-text search over memories", cmd_query,
        ['mem query "retry budget"', "mem query buffer --git-repo github.com/org/app --json"],
        json_output=True, project=True,
    )  # fmt: skip
    p.add_argument("text", metavar="TEXT", help="words to search for (web-search syntax)")
    p.add_argument("--git-repo", help="cite each result by its evidence in this repository")
    p.add_argument("--limit", type=int, default=20, help="results (1-100, default 20)")

    p = _command(
        commands, "demo", "build a sample repository with memories; show a hover", cmd_demo,
        ["mem demo", "mem demo --dir /tmp/poimen-demo"],
    )  # fmt: skip
    p.add_argument("--dir", help="where to build it (default: <user data dir>/demo/kong)")
    p = _command(
        commands, "lsp", "run the language server (stdio by default)", cmd_lsp,
        ["mem lsp", "mem lsp --tcp 127.0.0.1:2087"], dsn=False,
    )  # fmt: skip
    p.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    p = _command(
        commands, "http", "serve the HTTP API", cmd_http,
        ["mem http --repo ~/app --project app",
         "mem http --host 0.0.0.0 --token \"$POIMEN_HTTP_TOKEN\" --repo ~/app"],
        project=True,
    )  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8750, help="port (default 8750)")
    p.add_argument("--repo", action="append", help="a work tree to serve by-git for (repeatable)")
    p.add_argument("--repo-id", help="repository identity instead of origin's URL")
    p.add_argument("--token", help="bearer token required on every request")
    return parser


def cmd_version(args: argparse.Namespace) -> int:
    """Versions of mem, git and the Postgres in use, for bug reports (exit 0 even when one of
    them is missing: that is worth reporting too)."""
    try:
        git = GitRunner().version()
    except GitError as exc:
        git = f"git: {exc}"
    try:
        target = _store_dsn(args)
        where = f"{describe_target(target.dsn)}, from {target.source.value}"
        postgres = f"{server_version(target.dsn)} ({where})"
    except (StoreUnavailable, ConfigError) as exc:
        postgres = f"Postgres: {exc}"
    lines = {"mem": f"mem {__version__}", "python": f"Python {sys.version.split()[0]}"}
    lines.update(git=git, postgres=postgres)
    if args.json:
        print(json.dumps(lines, indent=2))
    else:
        print("\n".join(lines.values()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mem``; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.version:
            return cmd_version(args)
        func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
        if func is None:
            sub = {"db": "db "}.get(getattr(args, "command", "") or "", "")
            raise UsageError(f"missing command; see `mem {sub}--help`")
        return func(args)
    except UsageError as exc:
        print(f"mem: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ContentError, ConfigError, IngestError) as exc:
        print(f"mem: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except psycopg.errors.InsufficientPrivilege as exc:
        print(f"mem: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except psycopg.errors.UndefinedObject as exc:
        print(f"mem: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (StoreUnavailable, MigrationError, LookupFailed) as exc:
        print(f"mem: error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
