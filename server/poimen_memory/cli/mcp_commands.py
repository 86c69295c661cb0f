"""``mem mcp``: serve the MCP tools over stdio (the default) or streamable HTTP."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from poimen_memory.cli.errors import UsageError
from poimen_memory.cli.operations import settings_of, work_trees
from poimen_memory.operations import build_services
from poimen_memory.settings import Settings, is_loopback
from poimen_memory.wiring import Store, settle_heap, store_target

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from poimen_memory.mcpserver import MemoryTools

__all__ = ["DEFAULT_PORT", "mcp_serve"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8751


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send whatever is written to file descriptor 1 (by this process or a child, such as
    the embedded Postgres starting) to stderr: on stdio, stdout carries protocol only."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _http_options(args: argparse.Namespace, settings: Settings) -> tuple[str, int, str | None]:
    """(host, port, token) for --http, checked as `mem http` checks them."""
    host = DEFAULT_HOST if args.host is None else args.host
    port = DEFAULT_PORT if args.port is None else args.port
    token = settings.http_token
    if not is_loopback(host) and not token:
        raise UsageError(
            f"--host: {host} is reachable from other machines; set --token or "
            "POIMEN_HTTP_TOKEN to require a bearer token"
        )
    if settings.http_token_projects:  # with or without a token: MCP never limits one
        where = settings.origin("http_token_projects") or "POIMEN_HTTP_TOKEN_PROJECTS"
        raise UsageError(
            f"{where}: limits the token to projects, which `mem mcp` does not do; "
            "unset it, or use a token of its own for MCP"
        )
    if not 0 < port < 65536:
        raise UsageError(f"--port: expected 1 to 65535, got {port}")
    return host, port, token


def mcp_serve(args: argparse.Namespace) -> int:
    """Serve the MCP tools: on stdin/stdout, or with --http on HOST:PORT at /mcp."""
    from poimen_memory.mcpserver import MemoryTools, serve_stdio

    if getattr(args, "mcp_command", None) is not None:
        raise UsageError(f"mcp {args.mcp_command}: not available here; see `mem mcp --help`")
    settings = settings_of(args, http_token=args.token)
    if not args.http:
        for flag, value in (("--host", args.host), ("--port", args.port), ("--token", args.token)):
            if value is not None:
                raise UsageError(f"{flag}: only with --http (stdio needs no address)")
    http = _http_options(args, settings) if args.http else None
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="mem mcp: %(levelname)s %(message)s"
    )
    with _stdout_to_stderr():
        dsn, _ = store_target(settings)
        store = Store(dsn, lazy=True, warm=True)  # down at start: a tool error, not an exit
    with store:
        with _stdout_to_stderr():
            trees = work_trees(args.repo)
            services = build_services(store, settings, serving=True)
            # No --repo: the work tree it was started in, and on stdio the client's roots.
            follow = not args.repo and http is None
            tools = MemoryTools.serving(services, trees, client_roots=follow)
        settle_heap()  # built: what start-up made is never collected again
        if http is None:
            serve_stdio(tools)
        else:
            _serve_http(tools, *http, settings=settings)
        services.service.checkouts.flush()
    return 0


def _serve_http(
    tools: MemoryTools, host: str, port: int, token: str | None, *, settings: Settings
) -> None:
    """Streamable HTTP behind the HTTP API's guard: Host, Origin, token, body cap; headers on
    time, connections and sessions capped, idle sessions closed (``settings``)."""
    import uvicorn

    from poimen_memory.http import Guard, served_hosts, server_config
    from poimen_memory.mcpserver import MAX_BODY, MCP_PATH, READ_TIMEOUT_S, http_app

    hosts = served_hosts(host, port)

    def guard(app: ASGIApp) -> ASGIApp:
        return Guard(
            app,
            token=token,
            hosts=hosts,
            origins=frozenset(),
            body_paths=frozenset({MCP_PATH}),
            max_body=MAX_BODY,
            read_timeout=READ_TIMEOUT_S,
        )

    app = http_app(
        tools,
        guard,
        max_sessions=settings.mcp_max_sessions,
        session_idle_timeout=settings.mcp_session_idle_timeout,
    )
    config = server_config(
        app,
        header_timeout=settings.http_header_timeout,
        max_connections=settings.http_max_connections,
        host=host,
        port=port,
    )
    uvicorn.Server(config).run()
