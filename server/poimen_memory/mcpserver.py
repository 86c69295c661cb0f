"""The MCP server (Model Context Protocol): every operation of the table
(``poimen_memory.operations``) as a tool for coding agents (``why``, ``by_git``,
``by_commit``, ``by_author``, ``query``, ``remember``, ``blame``, ``status``,
``resolve_pending``), on the official ``mcp`` SDK's low-level server, over stdio or
streamable HTTP.

Each tool's ``inputSchema`` is its request model's JSON Schema in the shape every client
reads (``tool_input_schema``: an optional parameter is its plain type, no ``null`` branch;
no ``$ref``; no other argument allowed) and its arguments validate through that model, so a
bad value gets the same words as on HTTP, LSP and the CLI; the answer is the response model
as structured content (with its ``outputSchema``) plus a text rendering for the model, at
most ``ANSWER_TEXT_LIMIT`` characters. Bad input and failed lookups come back as tool errors naming
the field; nothing else (no traceback) reaches the client, and the server keeps serving.

The work trees served are those given, else the one the server was started in, and (on
stdio, when no work tree was given and the client offers the ``roots`` capability) those of
the client's roots, asked after the handshake and again when the client says they changed.

Over HTTP the app is served inside the guard the command gives it, the HTTP API's
(``poimen_memory.http.Guard``: Host, Origin, bearer token, body cap): the rules of ``mem http``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp

from poimen_memory import __version__
from poimen_memory.errors import ErrorKind
from poimen_memory.lookup import LookupInputError
from poimen_memory.operations import OPERATIONS, Operation, Services, classify
from poimen_memory.operations.texts import CITE
from poimen_memory.render import TEXT_LIMIT as MEMORY_TEXT_LIMIT

__all__ = [
    "ANSWER_TEXT_LIMIT",
    "INSTRUCTIONS",
    "MAX_BODY",
    "MAX_SESSIONS",
    "MCP_PATH",
    "READ_TIMEOUT_S",
    "SESSION_IDLE_TIMEOUT_S",
    "TOOL_NAMES",
    "MemoryTools",
    "bounded",
    "create_server",
    "http_app",
    "serve_stdio",
    "tool_input_schema",
]

MCP_PATH = "/mcp"
# A remembered text and brief may be 1 MiB each, and JSON escapes them: the body cap over
# HTTP is larger than the lookups' (it is the SDK's own default), and so is the time to send.
MAX_BODY = 4 * 1024 * 1024
READ_TIMEOUT_S = 30.0
MAX_SESSIONS = 64  # the settings' mcp_max_sessions
SESSION_IDLE_TIMEOUT_S = 300.0  # the settings' mcp_session_idle_timeout
# A tool's text stops here (about 10,000 tokens, under what clients such as Claude Code take
# from one tool call; each memory's text is already cut at render's TEXT_LIMIT); the
# structured content always carries the whole answer.
ANSWER_TEXT_LIMIT = 40_000
# How long the client has to answer roots/list before the server goes on without its roots.
ROOTS_TIMEOUT_S = 10.0
TOOL_NAMES = tuple(op.mcp_tool for op in OPERATIONS)

log = logging.getLogger(__name__)

INSTRUCTIONS = f"""\
poimen-memory keeps what coding-agent sessions learned, anchored to the lines of code it was \
about through git blame: why a line is the way it is, which constraint or bug shaped it, what \
was tried before. Call `why` with a file and line before changing code whose reason is not \
obvious; `query` to search by words; `by_commit` and `by_author` to review a change or a \
person's work. After learning something about specific lines that a later session should \
know, call `remember` with the evidence and the lines. `file` is relative to the repository \
root (or absolute inside a served work tree). An answer's text gives each memory's text (up \
to {MEMORY_TEXT_LIMIT:,} characters each) with its citation ready to paste, and the memories \
above it; the whole text is at most {ANSWER_TEXT_LIMIT:,} characters, and says where it was \
cut. The structured content always has every memory whole. {CITE}"""

_TOOLS: dict[str, Operation[Any, Any, Any]] = {op.mcp_tool: op for op in OPERATIONS}


def tool_input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The request model's JSON Schema in the shape any MCP client reads: each optional
    parameter its plain type with its default, if it has one (no ``anyOf`` with ``null``:
    leaving it out is what ``null`` meant, and ``null`` is still accepted), no ``$ref``,
    the required ones listed, no other argument (``additionalProperties: false``). Clients
    that type an argument from a property's ``type`` (the MCP Inspector's CLI turns
    ``line=42`` into 42 only so) need this; the request model validates as everywhere."""
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    out: dict[str, Any] = {
        "type": "object",
        "title": schema.get("title", model.__name__),
        "properties": {
            name: _plain(_inline(prop, defs)) for name, prop in schema["properties"].items()
        },
        "required": list(schema.get("required", [])),
        "additionalProperties": False,
    }
    if "description" in schema:
        out["description"] = schema["description"]
    return out


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    """``node`` with every ``#/$defs/X`` reference replaced by the definition itself."""
    if isinstance(node, list):
        return [_inline(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**defs[ref.removeprefix("#/$defs/")], **rest}, defs)
    return {k: _inline(v, defs) for k, v in node.items()}


# A union of these types is declared as the one named (history: a depth, or true for the
# default one; true is still accepted).
_ONE_TYPE = {frozenset({"boolean", "integer"}): "integer"}


def _plain(prop: dict[str, Any]) -> dict[str, Any]:
    """One property with a single ``type``: the non-null branch of an optional one, the
    declared member of a union, a pair's items as one schema."""
    for key in ("anyOf", "oneOf"):
        branches = prop.get(key)
        if not isinstance(branches, list):
            continue
        kept = [b for b in branches if b != {"type": "null"}]
        types_ = frozenset(b.get("type") for b in kept)
        if len(kept) > 1 and types_ in _ONE_TYPE:
            kept = [b for b in kept if b.get("type") == _ONE_TYPE[types_]]
        if len(kept) == 1:
            prop = {**{k: v for k, v in prop.items() if k != key}, **kept[0]}
    if prop.get("default", 0) is None:  # leaving it out is what null meant
        prop = {k: v for k, v in prop.items() if k != "default"}
    items = prop.get("prefixItems")
    if isinstance(items, list) and items and all(i == items[0] for i in items):
        prop = {**{k: v for k, v in prop.items() if k != "prefixItems"}, "items": items[0]}
    return prop


# Each tool's input and output schemas, made once (the SDK asks for them on every call).
_SCHEMAS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    op.mcp_tool: (tool_input_schema(op.request), op.response.model_json_schema())
    for op in OPERATIONS
}


def _failed_text(kind: ErrorKind, failure_message: str, public: str) -> str:
    """The text of a tool error, by kind: the caller's own words for its mistakes."""
    if kind is ErrorKind.UNAVAILABLE:
        return f"memory store unreachable: {failure_message}"
    if kind is ErrorKind.INTERNAL:
        return public
    return failure_message


class MemoryTools:
    """The tools over a process's services: validation, the call, the answer, the errors.
    The work trees served (``roots``) are those given at start and, when it follows them,
    those of the client's roots: an absolute ``file`` must be in one, and a relative ``file``
    with no ``repo`` is the one of them that has it."""

    def __init__(
        self, services: Services, trees: Mapping[Path, str], *, client_roots: bool = False
    ) -> None:
        self.services = services
        self.service = services.service
        self.client_roots = client_roots
        self._given = dict(trees)
        # The client's roots' work trees (root -> identity); replaced whole, never mutated,
        # so a call in a worker thread reads one consistent set.
        self._from_client: dict[Path, str] = {}

    @classmethod
    def serving(
        cls, services: Services, repo_dirs: Iterable[str | Path], *, client_roots: bool = False
    ) -> MemoryTools:
        """The tools over ``services``, serving the work trees containing ``repo_dirs``
        (registered with it now) and, with ``client_roots``, those of the client's roots."""
        trees: dict[Path, str] = {}
        for d in repo_dirs:
            identity, blamer = services.service.checkouts.add(d)
            trees.setdefault(blamer.repo.root, identity.value)
        return cls(services, trees, client_roots=client_roots)

    @property
    def trees(self) -> dict[Path, str]:
        """The work trees served (root -> repository identity)."""
        return {**self._given, **self._from_client}

    @property
    def roots(self) -> tuple[Path, ...]:
        """The roots of the work trees served."""
        return tuple(self.trees)

    def follow(self, uris: Iterable[str]) -> None:
        """Serve the work trees of the client's roots ``uris`` (``file://`` URIs) from now on,
        instead of those of its previous roots (blocking: git finds each work tree)."""
        found: dict[Path, str] = {}
        for uri in uris:
            parsed = urlparse(uri)
            if parsed.scheme != "file":
                log.warning("root %s is not a file: URI; not served", uri)
                continue
            try:
                identity, blamer = self.service.checkouts.add(unquote(parsed.path))
            except Exception as exc:  # a root outside any work tree is served by no tool
                log.warning("root %s is not served: %s", uri, classify(exc, logger=log).message)
                continue
            found.setdefault(blamer.repo.root, identity.value)
        self._from_client = found

    def listing(self) -> list[types.Tool]:
        """The tools, as ``tools/list`` answers them: one per operation of the table."""
        return [
            types.Tool(
                name=op.mcp_tool,
                title=op.title,
                description=op.description,
                input_schema=_SCHEMAS[op.mcp_tool][0],
                output_schema=_SCHEMAS[op.mcp_tool][1],
                annotations=types.ToolAnnotations(
                    title=op.title,
                    read_only_hint=not op.writes,
                    destructive_hint=False,
                    idempotent_hint=True,
                    open_world_hint=False,
                ),
            )
            for op in OPERATIONS
        ]

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """Tool ``name``'s input schema (None: no such tool), for the SDK's header checks."""
        schemas = _SCHEMAS.get(name)
        return None if schemas is None else schemas[0]

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        """Run tool ``name`` (blocking: git and the store); errors come back as tool errors."""
        op = _TOOLS.get(name)
        if op is None:
            raise MCPError(
                types.INVALID_PARAMS, f"unknown tool {name!r}; the tools are {', '.join(_TOOLS)}"
            )
        try:
            given = {} if arguments is None else arguments
            _only_its_arguments(op, given)
            if "file" in op.request.model_fields:
                given = self._locate(given)
            req = op.request.parse(given)
            out = op.run(self.services, req)
            answer = op.answer(out)
        except Exception as exc:
            failure = classify(exc, logger=log)
            return _failed(_failed_text(failure.kind, failure.message, failure.public))
        return _answer(bounded(op.text(req, out)), answer.model_dump(mode="json"))

    def _locate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """``file`` and ``repo`` as the work tree served has them: an absolute ``file`` inside
        a served work tree as the path in it, with its ``repo`` (links resolved first, as the
        work tree resolves them); a relative one with no ``repo``, with the ``repo`` of the
        served work tree that has it."""
        given = arguments.get("file")
        if not isinstance(given, str):
            return arguments
        trees = self.trees
        if not os.path.isabs(given):
            if arguments.get("repo") is not None or not trees:
                return arguments
            having = [i for root, i in trees.items() if os.path.lexists(root / given)]
            if len(set(having)) > 1:
                raise LookupInputError(
                    "repo",
                    f"required: {given!r} is in several work trees served "
                    f"({', '.join(sorted(set(having)))}); name one",
                )
            if having or len(trees) == 1:
                return {**arguments, "repo": (having or list(trees.values()))[0]}
            return arguments
        path = Path(os.path.realpath(given))
        if not any(path.is_relative_to(root) for root in trees):
            served = ", ".join(str(r) for r in trees) or "none; start it with --repo DIR"
            raise LookupInputError(
                "file", f"{given!r} is not in a work tree this server serves (served: {served})"
            )
        identity, _, rel = self.service.checkouts.locate(path)
        return {**arguments, "file": rel, "repo": identity.value}


def bounded(text: str, limit: int = ANSWER_TEXT_LIMIT) -> str:
    """``text`` whole when it is at most ``limit`` characters; else cut at the last blank line
    (a memory's end) or line end before it, with a line saying so and what to do."""
    if len(text) <= limit:
        return text
    note = (
        f"\n[cut: this text is limited to {limit:,} characters; {{rest:,}} more are not shown. "
        "The structured content has the whole answer; or ask for fewer lines, a smaller "
        "`limit`, or the next page by `cursor`.]\n"
    )
    room = limit - len(note.format(rest=len(text))) - 1
    end = text.rfind("\n\n", 0, room)  # after a whole memory
    if end < room // 2:
        end = text.rfind("\n", 0, room)  # after a whole line
    if end < room // 2:
        end = room
    return text[:end].rstrip("\n") + "\n" + note.format(rest=len(text) - end)


def _only_its_arguments(op: Operation[Any, Any, Any], arguments: Mapping[str, Any]) -> None:
    """A tool takes the arguments its schema lists: another is a mistake worth naming (a
    model that sends it believes it does something)."""
    for name in arguments:
        if name not in op.request.model_fields:
            takes = ", ".join(op.request.model_fields)
            raise LookupInputError(name, f"not an argument of {op.mcp_tool} (it takes {takes})")


def _answer(text: str, structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured
    )


def _failed(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


class _ClientRoots:
    """The client's roots on one connection: asked with ``roots/list`` once it is
    initialized and again after ``notifications/roots/list_changed``; a tool call waits for
    an answer under way, so that it sees the roots the client has. Only when the tools
    follow the client's roots and the client offers the ``roots`` capability (handshake-era
    connections: 2026-07-28 removed the request)."""

    def __init__(self, tools: MemoryTools) -> None:
        self.tools = tools
        self.stale = True
        self.lock = asyncio.Lock()

    async def current(self, ctx: ServerRequestContext[Any]) -> None:
        """Ask the client for its roots if they may have changed since last asked."""
        offered = ctx.session.client_capabilities
        if not self.tools.client_roots or offered is None or offered.roots is None:
            return
        async with self.lock:  # held while asking: a call waits for the answer under way
            if not self.stale:
                return
            self.stale = False  # a change announced from now on is asked again
            try:
                async with asyncio.timeout(ROOTS_TIMEOUT_S):
                    listed = await ctx.session.send_request(
                        types.ListRootsRequest(), types.ListRootsResult
                    )
            except Exception as exc:  # the client's failure: serve what we have
                log.warning("roots/list failed: %s", exc or type(exc).__name__)
                return
            await run_in_threadpool(self.tools.follow, [str(r.uri) for r in listed.roots])

    async def on_initialized(
        self, ctx: ServerRequestContext[Any], params: types.NotificationParams
    ) -> None:
        await self.current(ctx)

    async def on_changed(
        self, ctx: ServerRequestContext[Any], params: types.NotificationParams
    ) -> None:
        self.stale = True
        await self.current(ctx)


def create_server(tools: MemoryTools) -> Server[Any]:
    """The low-level MCP server answering ``tools/list`` and ``tools/call`` with ``tools``
    (and following the client's roots when ``tools`` do)."""
    roots = _ClientRoots(tools)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listing())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        await roots.current(ctx)
        return await run_in_threadpool(tools.call, params.name, params.arguments)

    server: Server[Any] = Server(
        "poimen-memory",
        version=__version__,
        title="poimen-memory",
        description="Memories from coding-agent sessions, anchored to code through git.",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    if tools.client_roots:
        # Registered by method rather than as on_roots_list_changed=, which warns that
        # 2026-07-28 deprecates roots: handshake-era clients (the ones in use) still send it.
        server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, roots.on_initialized
        )
        server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, roots.on_changed
        )
    return server


def serve_stdio(tools: MemoryTools) -> None:
    """Serve MCP on stdin/stdout until the client closes them (stdout carries protocol only)."""
    server = create_server(tools)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    asyncio.run(run())


def http_app(
    tools: MemoryTools,
    guard: Callable[[ASGIApp], ASGIApp],
    *,
    max_sessions: int = MAX_SESSIONS,
    session_idle_timeout: float = SESSION_IDLE_TIMEOUT_S,
) -> ASGIApp:
    """The streamable HTTP app (MCP at ``/mcp``) inside ``guard``, which checks every request
    before the SDK sees it (``poimen_memory.http.Guard``: Host, Origin, bearer token, body).
    The SDK's own Host and Origin check is off, so that the two never disagree (the guard
    compares host names case-insensitively, as DNS does). At most ``max_sessions`` sessions
    are open (an ``initialize`` beyond them is answered 503), and one without a request for
    ``session_idle_timeout`` seconds is closed: sessions a client opened and left cannot fill
    the server's memory, nor keep others out for long."""
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = create_server(tools).streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security,
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_timeout,
    )
    return guard(app)
