"""The MCP server (Model Context Protocol): every operation of the table
(``poimen_memory.operations``) as a tool for coding agents (``why``, ``by_git``,
``by_commit``, ``by_author``, ``query``, ``remember``, ``blame``, ``status``,
``resolve_pending``), on the official ``mcp`` SDK's low-level server, over stdio or
streamable HTTP.

Each tool's ``inputSchema`` is its request model's JSON Schema and its arguments validate
through that model, so a bad value gets the same words as on HTTP, LSP and the CLI; the
answer is the response model as structured content (with its ``outputSchema``) plus a text
rendering for the model. Bad input and failed lookups come back as tool errors naming the
field; nothing else (no traceback) reaches the client, and the server keeps serving.

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

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp

from poimen_memory import __version__
from poimen_memory.errors import ErrorKind
from poimen_memory.lookup import LookupInputError
from poimen_memory.operations import OPERATIONS, Operation, Services, classify
from poimen_memory.operations.texts import CITE

__all__ = [
    "INSTRUCTIONS",
    "MAX_BODY",
    "MCP_PATH",
    "READ_TIMEOUT_S",
    "TOOL_NAMES",
    "MemoryTools",
    "create_server",
    "http_app",
    "serve_stdio",
]

MCP_PATH = "/mcp"
# A remembered text and brief may be 1 MiB each, and JSON escapes them: the body cap over
# HTTP is larger than the lookups' (it is the SDK's own default), and so is the time to send.
MAX_BODY = 4 * 1024 * 1024
READ_TIMEOUT_S = 30.0
TOOL_NAMES = tuple(op.mcp_tool for op in OPERATIONS)

log = logging.getLogger(__name__)

INSTRUCTIONS = f"""\
poimen-memory keeps what coding-agent sessions learned, anchored to the lines of code it was \
about through git blame: why a line is the way it is, which constraint or bug shaped it, what \
was tried before. Call `why` with a file and line before changing code whose reason is not \
obvious; `query` to search by words; `by_commit` and `by_author` to review a change or a \
person's work. After learning something about specific lines that a later session should \
know, call `remember` with the evidence and the lines. {CITE}"""

_TOOLS: dict[str, Operation[Any, Any, Any]] = {op.mcp_tool: op for op in OPERATIONS}
# Each tool's input and output schemas, made once (the SDK asks for them on every call).
_SCHEMAS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    op.mcp_tool: (op.request.model_json_schema(), op.response.model_json_schema())
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
    ``roots`` are the work trees an absolute ``file`` may be in (the served ones)."""

    def __init__(self, services: Services, roots: Iterable[Path] = ()) -> None:
        self.services = services
        self.service = services.service
        self.roots = tuple(roots)

    @classmethod
    def serving(cls, services: Services, repo_dirs: Iterable[str | Path]) -> MemoryTools:
        """The tools over ``services``, whose work trees are those containing ``repo_dirs``
        (already registered with it)."""
        roots = [services.service.checkouts.add(d)[1].repo.root for d in repo_dirs]
        return cls(services, dict.fromkeys(roots))

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
        return _answer(op.text(req, out), answer.model_dump(mode="json"))

    def _locate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """An absolute ``file`` inside a served work tree as the path in it, with its
        ``repo`` (links resolved first, as the work tree resolves them)."""
        given = arguments.get("file")
        if not isinstance(given, str) or not os.path.isabs(given):
            return arguments
        path = Path(os.path.realpath(given))
        if not any(path.is_relative_to(root) for root in self.roots):
            served = ", ".join(str(r) for r in self.roots) or "none; start it with --repo DIR"
            raise LookupInputError(
                "file", f"{given!r} is not in a work tree this server serves (served: {served})"
            )
        identity, _, rel = self.service.checkouts.locate(path)
        return {**arguments, "file": rel, "repo": identity.value}


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


def create_server(tools: MemoryTools) -> Server[Any]:
    """The low-level MCP server answering ``tools/list`` and ``tools/call`` with ``tools``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listing())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await run_in_threadpool(tools.call, params.name, params.arguments)

    return Server(
        "poimen-memory",
        version=__version__,
        title="poimen-memory",
        description="Memories from coding-agent sessions, anchored to code through git.",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(tools: MemoryTools) -> None:
    """Serve MCP on stdin/stdout until the client closes them (stdout carries protocol only)."""
    server = create_server(tools)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    asyncio.run(run())


def http_app(tools: MemoryTools, guard: Callable[[ASGIApp], ASGIApp]) -> ASGIApp:
    """The streamable HTTP app (MCP at ``/mcp``) inside ``guard``, which checks every request
    before the SDK sees it (``poimen_memory.http.Guard``: Host, Origin, bearer token, body).
    The SDK's own Host and Origin check is off, so that the two never disagree (the guard
    compares host names case-insensitively, as DNS does)."""
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = create_server(tools).streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=security
    )
    return guard(app)
