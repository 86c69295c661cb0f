"""What each ``mem`` command does: resolve the settings, build a request, call the service,
print. Validation lives in the request models, the settings and the ingest options."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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
from poimen_memory.domain import CommitSha, ProjectId
from poimen_memory.errors import ConfigError, StoreUnavailable
from poimen_memory.gitio import Blame, BlameLine, GitError, GitRunner
from poimen_memory.gitio.blame import differences
from poimen_memory.ingest import Format, IngestOptions, IngestRejected, IngestSummary
from poimen_memory.ingest import ingest as run_ingest
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupFailed,
    LookupInputError,
    LookupRequest,
    LookupResult,
    LookupService,
    QueryRequest,
    RememberRequest,
    build_service,
    is_path,
    new_checkouts,
    project_for,
)
from poimen_memory.recording import Recorder
from poimen_memory.render import render_text
from poimen_memory.settings import Settings, is_loopback, load_settings
from poimen_memory.store import Store, connect, embedded_dsn, migrate
from poimen_memory.store.connection import describe_target, server_version

EXIT_BAD_INPUT = 2


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings({"dsn": args.dsn, "project": args.project})


def _target(settings: Settings, *, migrate_embedded: bool = True) -> tuple[str, str]:
    """(DSN, where it came from): the configured store, else the embedded one (its schema
    migrated on first use, unless ``migrate_embedded`` is false: the ``db`` commands)."""
    if settings.dsn is None:
        return embedded_dsn(settings.data_dir, migrate_schema=migrate_embedded), "embedded"
    return settings.dsn, settings.origin("dsn") or "settings"


def _default_project(settings: Settings) -> ProjectId | None:
    return None if settings.project is None else ProjectId(settings.project)


def _where(dsn: str, source: str) -> str:
    return f"{describe_target(dsn)} (from {source})"


def db_migrate(args: argparse.Namespace) -> int:
    """Apply pending schema migrations."""
    dsn, _ = _target(_settings(args), migrate_embedded=False)
    with connect(dsn) as conn:
        applied = [f"{m.version:04d}_{m.name}" for m in migrate(conn)]
    if args.json:
        print(json.dumps({"applied": applied}))
    else:
        print("\n".join(f"applied {name}" for name in applied) or "schema is up to date")
    return 0


def db_grant_readonly(args: argparse.Namespace) -> int:
    """Print (or apply) the GRANTs for a read-only role."""
    from poimen_memory.store.access import grant_readonly, readonly_grants

    dsn, _ = _target(_settings(args), migrate_embedded=False)
    with connect(dsn) as conn:
        grants = grant_readonly if args.apply else readonly_grants
        statements = grants(conn, args.role)
    for statement in statements:
        print(f"{statement};")
    if args.apply:
        print(f"-- applied for role {args.role}", file=sys.stderr)
    return 0


def db_status(args: argparse.Namespace) -> int:
    """Schema version and row counts."""
    dsn, source = _target(_settings(args), migrate_embedded=False)
    with Store(dsn, max_size=1) as store:
        status = store.status()
    if args.json:
        body = {k: v for k, v in dataclasses.asdict(status).items() if k != "nodes_by_level"}
        body = {"store": _where(dsn, source), **body}
        body = {**dict(list(body.items())[:3]), "nodes": status.nodes_by_level, **body}
        print(json.dumps(body, indent=2))
        return 0
    print(f"store           {_where(dsn, source)}")
    if status.schema_version == 0:
        print("schema version  none: run `mem db migrate`")
        return 0
    behind = "" if status.schema_version == status.latest_version else "  (run `mem db migrate`)"
    print(f"schema version  {status.schema_version} of {status.latest_version}{behind}")
    print(f"nodes           {' · '.join(f'{k} {n}' for k, n in status.nodes_by_level.items())}")
    for name in ("edges", "anchors", "commits", "projects"):
        print(f"{name:<16}{getattr(status, name)}")
    print(f"{'blame cache':<16}{status.blame_files} files · {status.blame_runs} runs")
    print(f"{'pending':<16}{status.pending} remembered line ranges waiting for a commit")
    return 0


def _project(settings: Settings) -> ProjectId:
    if settings.project is None:
        raise UsageError("--project: required (or set POIMEN_PROJECT, or project in the config)")
    return ProjectId(settings.project)


def ingest(args: argparse.Namespace) -> int:
    """Ingest transcripts into the store."""
    settings = _settings(args)
    project = _project(settings)
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
    dsn, _ = _target(settings)
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


def serving(
    store: Store,
    settings: Settings,
    repos: list[str] | list[Path],
    repo_id: str | None,
    *,
    shared_blames: bool = True,
) -> tuple[LookupService, Recorder]:
    """The lookup service over ``store`` and the work trees ``repos``, and the Recorder
    attached to it (so its lookups anchor lines remembered before they were committed)."""
    service = build_service(
        store,
        repos,
        _default_project(settings),
        repo_id,
        shared_blames=settings.shared_blame_cache and shared_blames,
    )
    return service, Recorder(service, settings.pending_days)


# -- lookups ----------------------------------------------------------------------------------

_BodyOf = Callable[[argparse.Namespace, LookupService], dict[str, Any]]


def _lookup(args: argparse.Namespace, model: type[LookupRequest], body_of: _BodyOf) -> int:
    """Open the store and the checkouts, build ``model`` from the arguments, answer it."""
    settings = _settings(args)
    default = _default_project(settings)
    dsn, _ = _target(settings)
    repo = getattr(args, "repo", None)
    repo_id = getattr(args, "repo_id", None)
    if repo_id is not None and is_path(repo_id):  # a work tree's path: its identity
        repo, repo_id = repo or repo_id, None
        args.repo, args.repo_id = repo, None
    git_repo = getattr(args, "git_repo", None)
    dirs = [d for d in (repo, git_repo if git_repo and is_path(git_repo) else None) if d]
    with Store(dsn, max_size=1) as store:
        service, _ = serving(store, settings, dirs, repo_id)
        request = model.parse(body_of(args, service), default)
        if getattr(args, "all", False):
            assert isinstance(request, ByCommitRequest | ByAuthorRequest)
            result = service.every_page(request)
        else:
            result = _ANSWER[model](service, request)
        service.checkouts.flush()
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_text(result))
    return 0


_ANSWER: dict[type[LookupRequest], Callable[[LookupService, Any], LookupResult]] = {
    ByGitRequest: LookupService.by_git,
    ByCommitRequest: LookupService.by_commit,
    ByAuthorRequest: LookupService.by_author,
    QueryRequest: LookupService.query,
}


def _scope(args: argparse.Namespace, service: LookupService) -> dict[str, Any]:
    """The repository a lookup is scoped to: --repo-id, else the identity of --repo."""
    if args.repo_id:  # checked by the request model
        return {"repo": args.repo_id}
    if args.repo:
        return {"repo": service.checkouts.identities()[0].value}
    return {}


def _place(location: str, repo: str | None, service: LookupService) -> dict[str, Any]:
    """``FILE``, ``FILE:LINE`` or ``FILE:START-END`` (the last colon separates the lines) as
    the file in its repository (relative to ``repo``, else the current directory) and the
    lines."""
    path, sep, lines = location.rpartition(":")
    start, dash, end = lines.partition("-")
    numbers = sep and path and start.isdigit() and (not dash or end.isdigit())
    if not numbers:
        path, start = location, ""
    base = Path(repo) if repo else Path.cwd()
    identity, _, relpath = service.checkouts.locate(base / path)
    body: dict[str, Any] = {"file": relpath, "repo": identity.value}
    if start:
        body.update({"lines": [int(start), int(end)]} if dash else {"line": int(start)})
    return body


def _location(args: argparse.Namespace, service: LookupService) -> dict[str, Any]:
    """The by-git request of ``FILE[:LINE[-END]]`` and its options."""
    body = _place(args.location, args.repo, service)
    history = {} if args.history is None else {"history": args.history}
    return body | {"commit_sha": args.commit, "at": args.at} | history


def by_git(args: argparse.Namespace) -> int:
    """Memories at FILE:LINE (current lines mapped through blame)."""
    return _lookup(args, ByGitRequest, _location)


def _page(args: argparse.Namespace) -> dict[str, Any]:
    """--limit and --cursor of a paged lookup (--all follows the cursors from there)."""
    return {k: v for k, v in (("limit", args.limit), ("cursor", args.cursor)) if v is not None}


def by_commit(args: argparse.Namespace) -> int:
    """Memories whose evidence is anchored in a commit."""
    return _lookup(
        args, ByCommitRequest, lambda a, s: {"commit_sha": a.sha, **_scope(a, s), **_page(a)}
    )


def by_author(args: argparse.Namespace) -> int:
    """Evidence from an author's commits."""
    return _lookup(
        args, ByAuthorRequest, lambda a, s: {"author": a.author, **_scope(a, s), **_page(a)}
    )


def query(args: argparse.Namespace) -> int:
    """Full-text search over memories."""
    return _lookup(
        args,
        QueryRequest,
        lambda a, _: {"query": a.text, "limit": a.limit, "git_repo": a.git_repo},
    )


def remember(args: argparse.Namespace) -> int:
    """Record a memory on lines of a file as the work tree has them now."""
    settings = _settings(args)
    default = _default_project(settings)
    dsn, _ = _target(settings)
    with Store(dsn, max_size=1) as store:
        service, recorder = serving(store, settings, [args.repo] if args.repo else [], args.repo_id)
        body = _place(args.location, args.repo, service)
        if "line" not in body and "lines" not in body:
            raise LookupInputError(
                "line", f"required: FILE:LINE or FILE:START-END, got {args.location!r}"
            )
        body |= {"text": args.text, "brief": args.brief, "query_id": args.query_id}
        request = RememberRequest.parse(body, default)
        out = recorder.remember(request)
        service.checkouts.flush()
    if args.json:
        print(out.model_dump_json(indent=2))
        return 0
    where = f"{out.file}:{out.lines[0]}" + (
        f"-{out.lines[1]}" if out.lines[1] != out.lines[0] else ""
    )
    done = "remembered" if out.created else "already remembered"
    print(f"{done} {out.node[:12]} on {where} (project {out.project})")
    for a in out.anchored:
        print(f"  anchored  {a.file}:{a.line_start}-{a.line_end} (commit {a.commit[:7]})")
    for p in out.pending:
        print(
            f"  pending   {p.file}:{p.line_start}-{p.line_end} until a commit holds these lines "
            f"(expires {p.expires_at})"
        )
    if out.redacted:
        print(
            f"  secrets redacted: {', '.join(f'{k} {n}' for k, n in sorted(out.redacted.items()))}"
        )
    return 0


def db_resolve_pending(args: argparse.Namespace) -> int:
    """Anchor remembered lines that have been committed since; drop expired ones."""
    settings = _settings(args)
    default = _default_project(settings)
    dsn, _ = _target(settings)
    repos = args.repo or []
    if not repos:
        try:
            new_checkouts().add(Path.cwd())
            repos = [str(Path.cwd())]
        except (LookupFailed, LookupInputError):
            pass  # not in a work tree: repositories without a checkout are listed as skipped
    with Store(dsn, max_size=1) as store:
        _, recorder = serving(store, settings, repos, args.repo_id, shared_blames=False)
        expired, done = recorder.resolve_pending(default)
    if args.json:
        print(
            json.dumps(
                {
                    "expired": expired,
                    "repos": [
                        {
                            "project": r.project.value,
                            "repo": r.repo.value,
                            "anchors": r.anchors,
                            "files": r.files,
                            "skipped": r.skipped,
                        }
                        for r in done
                    ],
                },
                indent=2,
            )
        )
        return 0
    for r in done:
        what = (
            f"skipped: {r.skipped}"
            if r.skipped and not r.anchors
            else (
                f"{r.anchors} anchor(s) added in {', '.join(r.files)}"
                if r.anchors
                else "still waiting"
            )
        )
        print(f"{r.repo} (project {r.project}): {what}")
    print(f"{expired} expired pending anchor(s) deleted" if expired else "nothing expired")
    return 0


def blame(args: argparse.Namespace) -> int:
    """A file's blame as the server computes it: the local cache, the shared one, the
    nearest cached ancestor plus the commits since, or git; ``--verify`` compares it with
    ``git blame --porcelain`` line by line (exit 1 when a line differs)."""
    settings = _settings(args)
    base = Path(args.repo) if args.repo else Path.cwd()
    checkouts = new_checkouts()
    with contextlib.ExitStack() as stack:
        if settings.dsn is not None and settings.shared_blame_cache:
            # A team store is configured: its shared blames are used and fed, as by servers.
            store = stack.enter_context(Store(settings.dsn, max_size=1))
            default = _default_project(settings)
            checkouts.share_through(store, lambda repo: default or project_for(repo))
        _, blamer, rel = checkouts.locate(base / args.file)
        try:
            rev = blamer.repo.head() if args.at is None else blamer.repo.resolve_rev(args.at)
            found, source = blamer.blame_known(rel, rev)
            text = blamer.repo.blob(rev, rel)
            differ = differences(found, blamer.repo.blame(rel, rev)) if args.verify else None
        except GitError as exc:
            raise LookupFailed(str(exc)) from None
        checkouts.flush()
    if args.json:
        print(json.dumps(_blame_json(rel, rev, source, found, differ), indent=2))
    else:
        _print_blame(rel, rev, source, found, text, differ)
    return 1 if differ else 0


def _origin_json(entry: BlameLine | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {
        "commit": entry.commit.value,
        "orig_path": entry.orig_path,
        "orig_line": entry.orig_line,
    }


_Differences = list[tuple[int, BlameLine | None, BlameLine | None]] | None


def _blame_json(
    rel: str, rev: CommitSha, source: str, found: Blame, differ: _Differences
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "file": rel,
        "commit": rev.value,
        "source": source,
        "lines": [{"line": ln.line, **(_origin_json(ln) or {})} for ln in found.lines],
    }
    if differ is not None:
        body["verified"] = not differ
        body["differences"] = [
            {"line": n, "mem": _origin_json(mine), "git": _origin_json(git)}
            for n, mine, git in differ
        ]
    return body


_SOURCES = {
    "cache": "the local cache",
    "shared": "the shared cache",
    "incremental": "a cached ancestor and the commits since",
    "git": "git blame",
}


def _print_blame(
    rel: str, rev: CommitSha, source: str, found: Blame, text: bytes, differ: _Differences
) -> None:
    def short(entry: BlameLine | None) -> str:
        if entry is None:
            return "nothing"
        return f"{entry.commit.short(8)} {entry.orig_path}:{entry.orig_line}"

    texts = text.decode("utf-8", "replace").split("\n")
    width = max((len(f"{ln.orig_path}:{ln.orig_line}") for ln in found.lines), default=0)
    digits = len(str(len(found.lines)))
    out = []
    for ln in found.lines:
        where = f"{ln.orig_path}:{ln.orig_line}"
        content = texts[ln.line - 1].rstrip("\r") if ln.line <= len(texts) else ""
        out.append(f"{ln.commit.short(8)} {where:<{width}} {ln.line:>{digits}}) {content}")
    sys.stdout.write("".join(f"{line}\n" for line in out))
    for n, mine, git in differ or ():
        print(f"line {n} differs: mem {short(mine)}, git {short(git)}", file=sys.stderr)
    verdict = ""
    if differ is not None:
        verdict = (
            f"; {len(differ)} lines differ from git blame"
            if differ
            else "; identical to git blame --porcelain"
        )
    summary = f"{rel} at {rev.short()}: {len(found.lines)} lines from {_SOURCES[source]}"
    print(summary + verdict, file=sys.stderr)


# -- servers and the demo ---------------------------------------------------------------------


def http(args: argparse.Namespace) -> int:
    """Serve the HTTP API."""
    import uvicorn

    from poimen_memory.http import create_app, served_hosts

    settings = load_settings(
        {
            "dsn": args.dsn,
            "project": args.project,
            "http_token": args.token,
            "http_token_projects": args.token_project,
            "http_allow_origins": args.allow_origin,
        }
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
    dsn, source = _target(settings)
    # A store that is down (or not migrated) at start is no reason not to serve: requests
    # answer 503 until it is back, and /health says which.
    with Store(dsn, lazy=True) as store:
        service, _ = serving(store, settings, args.repo or [], args.repo_id)
        app = create_app(
            service,
            token,
            token_projects=settings.http_token_projects,
            hosts=served_hosts(args.host, args.port),
            allow_origins=settings.http_allow_origins,
        )
        listening = _listen(args.host, args.port)
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"mem http: serving http://{host}:{args.port}", file=sys.stderr)
        print(f"mem http: memory store {_where(dsn, source)}", file=sys.stderr)
        problem = store.probe()
        if problem is not None:
            reason = str(problem).rstrip(".")
            print(f"mem http: {reason}; answering 503 until it is fixed", file=sys.stderr)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
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

    settings = _settings(args)
    # The default place is named after the demo's commit: a demo built by another version
    # (or none) is left where it is, never refused or replaced.
    default = settings.data_dir / "demo" / f"kong-{DEMO_HEAD[:7]}"
    root = (Path(args.dir) if args.dir else default).absolute()
    try:
        demo_state(root)  # before anything starts: a directory that is refused
        dsn, source = _target(settings)
        result = run_demo(dsn, root)
    except DemoRefused as refused:
        raise UsageError(f"--dir: {refused}") from None
    cite = "src/kong/buffer.rs:42"
    print(f"Sample repository: {result.repo}")
    print(f"Memories stored:   project demo, {_where(dsn, source)}")
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
    try:
        git = GitRunner().version()
    except GitError as exc:
        git = f"git: {exc}"
    try:
        dsn, source = _target(_settings(args), migrate_embedded=False)
        postgres = f"{server_version(dsn)} ({describe_target(dsn)}, from {source})"
    except (StoreUnavailable, ConfigError) as exc:
        postgres = f"Postgres: {exc}"
    lines = {"mem": f"mem {__version__}", "python": f"Python {sys.version.split()[0]}"}
    lines.update(git=git, postgres=postgres)
    print(json.dumps(lines, indent=2) if args.json else "\n".join(lines.values()))
    return 0
