"""The ``mem`` commands that are not operations of the table (those are
``cli.operations``): the store's schema, ingest, the servers, the demo, the version."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from poimen_memory import __version__
from poimen_memory.cli.errors import Terminated, UsageError
from poimen_memory.cli.operations import settings_of, work_trees
from poimen_memory.domain import ProjectId
from poimen_memory.errors import ConfigError, StoreUnavailable
from poimen_memory.ingest import Format, IngestOptions, IngestRejected, IngestSummary
from poimen_memory.ingest import ingest as run_ingest
from poimen_memory.lookup import LookupFailed, LookupInputError, decide_project, identity_of
from poimen_memory.operations import build_services, store_label
from poimen_memory.settings import Settings, is_loopback
from poimen_memory.wiring import (
    Store,
    describe_target,
    git_version,
    grants_for,
    migrate_store,
    postgres_version,
    settle_heap,
    store_target,
)

EXIT_BAD_INPUT = 2


def db_migrate(args: argparse.Namespace) -> int:
    """Apply pending schema migrations."""
    dsn, _ = store_target(settings_of(args), migrate_embedded=False)
    applied = migrate_store(dsn)
    if args.json:
        print(json.dumps({"applied": applied}))
    else:
        print("\n".join(f"applied {name}" for name in applied) or "schema is up to date")
    return 0


def db_grant_readonly(args: argparse.Namespace) -> int:
    """Print (or apply) the GRANTs for a read-only role, and the projects it may see."""
    if args.project is not None:  # `mem --project P db grant-readonly ROLE`: not a limit
        raise UsageError("--project: name the role's projects after ROLE")
    dsn, _ = store_target(settings_of(args), migrate_embedded=False)
    statements = grants_for(dsn, args.role, apply=args.apply, projects=args.projects or ())
    for statement in statements:
        print(f"{statement};")
    if args.apply:
        print(f"-- applied for role {args.role}", file=sys.stderr)
    return 0


def _project(settings: Settings, repo_dir: str) -> ProjectId:
    """The project transcripts of ``repo_dir`` go to: the one project rule."""
    identity = None
    with contextlib.suppress(LookupFailed, LookupInputError):
        identity = identity_of(repo_dir, settings.repo)[0]
    choice = decide_project(settings, identity)
    if choice.project is None:
        raise UsageError(
            f"--project: required: {repo_dir} is not in a git work tree to derive it from "
            "(or set POIMEN_PROJECT, or project in the config file)"
        )
    return choice.project


def ingest(args: argparse.Namespace) -> int:
    """Ingest transcripts into the store."""
    settings = settings_of(args)
    project = _project(settings, args.repo)
    options = IngestOptions(
        project=project,
        repo_dir=Path(args.repo),
        repo_override=args.repo_id,
        format=Format(args.format),
        skip_bad=args.skip_bad,
        budget=args.budget,
        batch_nodes=args.batch_nodes,
        redact=not args.no_redact,
        cache_path=settings.blame_cache_path,
        pending_days=settings.pending_days,
    )
    dsn, _ = store_target(settings)
    with Store(dsn, max_size=1) as store, _progress(args) as on_progress:
        try:
            summary = run_ingest([Path(p) for p in args.paths], store, options, on_progress)
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
    for line in summary.incomplete_last_lines:
        print(
            f"mem: note: {line}: incomplete last line skipped (no newline at the end: "
            "still being written?)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        _print_summary(summary, project)
    return 0


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
            "  edits and trace ranges not placed with certainty (left unanchored): "
            f"{summary.unanchored_edits}"
        )
    if summary.noop_edits:
        print(f"  edits that changed nothing (no lines to anchor): {summary.noop_edits}")
    if summary.pending_edits:
        print(
            "  edits not committed yet (placed once a commit holds their lines): "
            f"{summary.pending_edits}"
        )
    print(f"  skipped  {len(summary.skipped)}")
    if summary.redacted:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(summary.redacted.items()))
        print(f"  secrets redacted: {kinds}")


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


# -- servers and the demo ---------------------------------------------------------------------


def http(args: argparse.Namespace) -> int:
    """Serve the HTTP API."""
    import uvicorn

    from poimen_memory.http import create_app, served_hosts, server_config

    settings = settings_of(
        args,
        http_token=args.token,
        http_token_projects=args.token_project,
        http_allow_origins=args.allow_origin,
    )
    token = settings.http_token
    if not is_loopback(args.host) and not token:
        raise UsageError(
            f"--host: {args.host} is reachable from other machines; set --token or "
            "POIMEN_HTTP_TOKEN to require a bearer token"
        )
    if settings.http_token_projects and token is None:
        where = settings.origin("http_token_projects") or "--token-project"
        raise UsageError(f"{where}: limits a token, but no --token or POIMEN_HTTP_TOKEN is set")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port: expected 1 to 65535, got {args.port}")
    dsn, source = store_target(settings)
    # A store that is down (or not migrated) at start is no reason not to serve: requests
    # answer 503 until it is back, and /health says which.
    with Store(dsn, lazy=True, warm=True) as store:
        services = build_services(store, settings, work_trees(args.repo), serving=True)
        app = create_app(
            services,
            token,
            token_projects=settings.http_token_projects,
            hosts=served_hosts(args.host, args.port),
            allow_origins=settings.http_allow_origins,
        )
        listening = _listen(args.host, args.port)
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"mem http: serving http://{host}:{args.port}", file=sys.stderr)
        print(f"mem http: memory store {store_label(dsn, source)}", file=sys.stderr)
        problem = store.probe()
        if problem is not None:
            reason = str(problem).rstrip(".")
            print(f"mem http: {reason}; answering 503 until it is fixed", file=sys.stderr)
        limits = server_config(
            app,
            header_timeout=settings.http_header_timeout,
            max_connections=settings.http_max_connections,
        )
        server = uvicorn.Server(limits)
        settle_heap()  # built: what start-up made is never collected again
        with _hang_up_stops(server):  # uvicorn itself stops gracefully on SIGINT and SIGTERM
            server.run(sockets=[listening])
    return 0


@contextlib.contextmanager
def _hang_up_stops(server: Any) -> Iterator[None]:
    """SIGHUP stops ``server`` as SIGTERM does (a second one at once), then raises
    Terminated for it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hang_up(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        server.should_exit = True
        server.force_exit = len(received) > 1

    previous = signal.signal(signal.SIGHUP, hang_up)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)
    if received:
        raise Terminated(signal.SIGHUP)


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port``; UsageError naming ``--port`` (in use) or
    ``--host`` (not an address of this machine) if it cannot be."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        option = "--port" if exc.errno == errno.EADDRINUSE else "--host"
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"{option}: cannot listen on {host}:{port}: {reason}") from None
    return sock


def demo(args: argparse.Namespace) -> int:
    """Build a sample repository with memories and show a hover."""
    from poimen_memory.demo import DEMO_HEAD, DemoRefused, demo_state, run_demo

    settings = settings_of(args)
    # The default place is named after the demo's commit: a demo built by another version
    # (or none) is left where it is, never refused or replaced.
    default = settings.data_dir / "demo" / f"kong-{DEMO_HEAD[:7]}"
    root = (Path(args.dir) if args.dir else default).absolute()
    try:
        demo_state(root)  # before anything starts: a directory that is refused
        dsn, source = store_target(settings)
        result = run_demo(dsn, root)
    except DemoRefused as refused:
        raise UsageError(f"--dir: {refused}") from None
    cite = "src/kong/buffer.rs:42"
    print(f"Sample repository: {result.repo}")
    print(f"Memories stored:   project demo, {store_label(dsn, source)}")
    print(f"\nHovering {cite} in an editor shows:\n")
    for line in result.hover.splitlines():
        print(f"    {line}")
    print("\nTry it yourself:")
    print(f"    mem by-git {cite} --repo {result.repo} --project demo")
    print(f"    mem query buffer --project demo --git-repo {result.repo_id}")
    print()
    print("Hook up an editor (see the README's 'Editor setup'): run `mem lsp` as a language")
    print("server for any file type, with initializationOptions")
    print('    {"poimenMemory": {"project": "demo"}}')
    print(f"and open {result.repo / 'src/kong/buffer.rs'} at line 42.")
    return 0


def lsp(args: argparse.Namespace) -> int:
    """Run the language server on stdio (or TCP, on loopback only)."""
    from poimen_memory.lsp.server import create_server

    if args.tcp:
        host, sep, port = args.tcp.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--tcp: expected HOST:PORT, got {args.tcp!r}")
        if not is_loopback(host):  # LSP has no authentication: anyone who connects is served
            raise UsageError(
                f"--tcp: {host} is reachable from other machines and the language server "
                "has no authentication; bind 127.0.0.1, [::1] or localhost"
            )
        create_server().start_tcp(host.strip("[]"), int(port))
    else:
        create_server().start_io()
    return 0


def version(args: argparse.Namespace) -> int:
    """Versions of mem, git and the Postgres in use, for bug reports (exit 0 even when one of
    them is missing: that is worth reporting too)."""
    git = git_version()
    try:
        dsn, source = store_target(settings_of(args), migrate_embedded=False)
        postgres = f"{postgres_version(dsn)} ({describe_target(dsn)}, from {source})"
    except (StoreUnavailable, ConfigError) as exc:
        postgres = f"Postgres: {exc}"
    lines = {"mem": f"mem {__version__}", "python": f"Python {sys.version.split()[0]}"}
    lines.update(git=git, postgres=postgres)
    print(json.dumps(lines, indent=2) if args.json else "\n".join(lines.values()))
    return 0
