"""The MCP server (Model Context Protocol): the lookups and ``remember`` as tools for coding
agents, on the official ``mcp`` SDK's low-level server, over stdio or streamable HTTP.

    why         why a line or range is so: its memories   ByGitRequest (location fields)
    by_git      memories at a code location               ByGitRequest
    by_commit   memories anchored in a commit             ByCommitRequest
    by_author   evidence from an author's commits         ByAuthorRequest
    query       full-text search over memories            QueryRequest
    remember    record what was learned about lines       RememberRequest

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp.types as types
import psycopg
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp

from poimen_memory import __version__
from poimen_memory.domain import ContentError
from poimen_memory.errors import StoreUnavailable
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupFailed,
    LookupInputError,
    LookupRequest,
    LookupResponse,
    LookupResult,
    QueryRequest,
    RememberRequest,
    RememberResponse,
)
from poimen_memory.recording import Recorder
from poimen_memory.render import render_text

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
TOOL_NAMES = ("why", "by_git", "by_commit", "by_author", "query", "remember")

log = logging.getLogger(__name__)

_CITE = (
    "Cite a memory by the reference printed with it, `file:line (commit abc1234)`, e.g. "
    "`src/app.py:42 (commit 1a2b3c4)`, so a reader can check it with git."
)
_FILE = (
    "`file` is a path relative to the repository root, or an absolute path inside a work tree "
    "this server serves; `repo` (the repository identity, e.g. github.com/org/app) is needed "
    "only when the server serves several."
)
_ANSWER = (
    "Answers the memories as text (each with its level L0 evidence / L1 per-question memory / "
    "L2 project synthesis, its text, and where it is anchored with commit, author and date) "
    "and as structured content (`nodes`, evidence first, newest first)."
)

INSTRUCTIONS = f"""\
poimen-memory keeps what coding-agent sessions learned, anchored to the lines of code it was \
about through git blame: why a line is the way it is, which constraint or bug shaped it, what \
was tried before. Call `why` with a file and line before changing code whose reason is not \
obvious; `query` to search by words; `by_commit` and `by_author` to review a change or a \
person's work. After learning something about specific lines that a later session should \
know, call `remember` with the evidence and the lines. {_CITE}"""

_WHY = f"""\
Why is this code the way it is? The memories recorded about a line (`line`) or a range \
(`lines: [start, end]`) of a file as it is now: each line is traced through git blame to the \
commit that produced it, so only memories about that change come back, never ones about \
lines since rewritten. Call it before modifying code whose reason is not obvious, or when \
asked why something is done a certain way. `history: true` also returns memories about the \
versions of the line it replaced (one line only). {_FILE} {_ANSWER} An answer with no \
memories means none were recorded for these lines. {_CITE}"""

_BY_GIT = f"""\
Memories at a code location, with every option of the lookup: a line, a range or (neither) \
the whole file; `commit_sha` looks the lines up literally as they were in that commit, \
without blame; `at` blames as of that commit instead of HEAD; `history` adds memories of \
earlier versions of one line. Prefer `why` for a line as it is now. `mapped: false` in the \
answer: no work tree of the repository is known to blame in, so the lines are matched as \
the memories stored them, in any commit. {_FILE} {_ANSWER} {_CITE}"""

_PAGED = """\
An answer with `truncated: true` is one page of `limit` anchors, not the whole: call again \
with the same arguments and its `cursor` for the next page."""

_BY_COMMIT = f"""\
Every memory whose evidence is anchored in one commit (a full id or a unique prefix of at \
least 4 hex digits): what was learned while making that change. Use it to review or explain \
a commit. {_PAGED} {_ANSWER} {_CITE}"""

_BY_AUTHOR = f"""\
Evidence anchored in the commits of one author (email or name, any case; the repository's \
.mailmap applies), newest first, up to `limit`. Use it to see what was learned in a person's \
changes. {_PAGED} {_ANSWER} {_CITE}"""

_QUERY = f"""\
Full-text search over all memories of the project (web-search syntax: words, "a phrase", \
-excluded, or). Use it when you do not know where in the code something is, or to find what \
is known about a topic. With `git_repo`, each result is cited by its evidence in that \
repository. {_ANSWER} {_CITE}"""

_REMEMBER = """\
Record what you learned about specific lines so that a later session asking `why` about \
them finds it. `text` is the evidence (what was found, decided or ruled out, and why; \
self-contained, no secrets); `brief` an optional one-line summary, kept as a memory above \
the evidence; `file` with `line` or `lines: [start, end]` the code it is about (a path \
relative to the repository root, or an absolute path inside a served work tree). Lines \
already committed are anchored at once to the commit that produced them; new or changed \
lines not yet committed are kept pending and anchored when a commit containing them \
appears (if they are edited before that commit, the memory stays off the changed lines). \
Recording the same text twice stores it once. Answers the node id (sha256), where it was \
anchored and what is pending. Once anchored it is found and cited like any memory: \
`file:line (commit abc1234)`."""


def _subset(schema: Mapping[str, Any], keep: Iterable[str]) -> dict[str, Any]:
    """``schema`` with only the properties in ``keep`` (the required ones among them)."""
    names = [name for name in schema["properties"] if name in set(keep)]
    out = {k: v for k, v in schema.items() if k not in ("properties", "required", "title")}
    out["properties"] = {name: schema["properties"][name] for name in names}
    out["required"] = [name for name in schema.get("required", []) if name in names]
    return out


# What `why` takes: a ByGitRequest's location fields (no commit_sha / at: that is by_git).
WHY_FIELDS = ("project", "file", "line", "lines", "repo", "history")


@dataclass(frozen=True, slots=True)
class _Tool:
    name: str
    title: str
    description: str
    model: type[LookupRequest]
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool
    locates: bool  # takes a `file` that may be absolute


def _tool(
    name: str,
    title: str,
    description: str,
    model: type[LookupRequest],
    output: type[BaseModel],
    *,
    read_only: bool = True,
    fields: Iterable[str] | None = None,
) -> _Tool:
    schema = model.model_json_schema()
    if fields is not None:
        schema = _subset(schema, fields)
    locates = "file" in schema["properties"]
    return _Tool(
        name, title, description, model, schema, output.model_json_schema(), read_only, locates
    )


TOOLS: dict[str, _Tool] = {
    t.name: t
    for t in (
        _tool("why", "Why is this line so?", _WHY, ByGitRequest, LookupResponse, fields=WHY_FIELDS),
        _tool("by_git", "Memories at a code location", _BY_GIT, ByGitRequest, LookupResponse),
        _tool("by_commit", "Memories of a commit", _BY_COMMIT, ByCommitRequest, LookupResponse),
        _tool("by_author", "Evidence by author", _BY_AUTHOR, ByAuthorRequest, LookupResponse),
        _tool("query", "Search memories", _QUERY, QueryRequest, LookupResponse),
        _tool(
            "remember", "Remember what was learned", _REMEMBER, RememberRequest,
            RememberResponse, read_only=False,
        ),
    )
}  # fmt: skip
assert tuple(TOOLS) == TOOL_NAMES


class MemoryTools:
    """The tools over one lookup service (and a Recorder on it): validation, the call, the
    answer, the errors. ``roots`` are the work trees an absolute ``file`` may be in (the
    served ones)."""

    def __init__(self, recorder: Recorder, roots: Iterable[Path] = ()) -> None:
        # The recorder is attached to its service: the service's lookups resolve the pending
        # anchors of lines remembered before they were committed (in any session).
        self.recorder = recorder
        self.service = recorder.service
        self.roots = tuple(roots)

    @classmethod
    def serving(cls, recorder: Recorder, repo_dirs: Iterable[str | Path]) -> MemoryTools:
        """The tools over ``recorder``'s service, whose work trees are those containing
        ``repo_dirs`` (already registered with it)."""
        roots = [recorder.service.checkouts.add(d)[1].repo.root for d in repo_dirs]
        return cls(recorder, dict.fromkeys(roots))

    def listing(self) -> list[types.Tool]:
        """The tools, as ``tools/list`` answers them."""
        return [
            types.Tool(
                name=t.name,
                title=t.title,
                description=t.description,
                input_schema=t.input_schema,
                output_schema=t.output_schema,
                annotations=types.ToolAnnotations(
                    title=t.title,
                    read_only_hint=t.read_only,
                    destructive_hint=False,
                    idempotent_hint=True,
                    open_world_hint=False,
                ),
            )
            for t in TOOLS.values()
        ]

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """Tool ``name``'s input schema (None: no such tool), for the SDK's header checks."""
        tool = TOOLS.get(name)
        return None if tool is None else tool.input_schema

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        """Run tool ``name`` (blocking: git and the store); errors come back as tool errors."""
        tool = TOOLS.get(name)
        if tool is None:
            raise MCPError(
                types.INVALID_PARAMS, f"unknown tool {name!r}; the tools are {', '.join(TOOLS)}"
            )
        try:
            return self._run(tool, {} if arguments is None else arguments)
        except (StoreUnavailable, psycopg.OperationalError) as exc:
            return _failed(f"memory store unreachable: {' '.join(str(exc).split())}")
        except (ContentError, LookupFailed) as exc:  # LookupInputError, NotInRepository too
            return _failed(str(exc))
        except Exception as exc:
            log.exception("tool %s failed", name)
            return _failed(f"internal error: {type(exc).__name__}")

    def _run(self, tool: _Tool, arguments: Mapping[str, Any]) -> types.CallToolResult:
        if tool.name == "why":
            for name in ByGitRequest.model_fields.keys() - WHY_FIELDS:
                if name in arguments:
                    raise LookupInputError(name, "not an argument of why; by_git takes it")
        if tool.locates:
            arguments = self._locate(arguments)
        req = tool.model.parse(arguments, self.service.default_project)
        if isinstance(req, RememberRequest):
            answer = self.recorder.remember(req)
            return _answer(_remembered(answer), answer.model_dump(mode="json"))
        if isinstance(req, ByGitRequest):
            result = self.service.by_git(req)
            if tool.name == "why":
                return _answer(_why(req, result), result.to_json())
        elif isinstance(req, ByCommitRequest):
            result = self.service.by_commit(req)
        elif isinstance(req, ByAuthorRequest):
            result = self.service.by_author(req)
        else:
            assert isinstance(req, QueryRequest)
            result = self.service.query(req)
        return _answer(render_text(result), result.to_json())

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


def _answer(text: str, structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured
    )


def _failed(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _where(req: ByGitRequest) -> str:
    if req.line_start == 0:
        return req.file
    if req.line_start == req.line_end:
        return f"{req.file}:{req.line_start}"
    return f"{req.file}:{req.line_start}-{req.line_end}"


def _why(req: ByGitRequest, result: LookupResult) -> str:
    where = _where(req) + ("" if result.repo is None else f" in {result.repo.value}")
    if not result.memories:
        return f"no memories recorded for {where}\n"
    count = len(result.evidence)
    head = f"{count} memor{'y' if count == 1 else 'ies'} for {where} (evidence first, newest first)"
    return f"{head}:\n\n{render_text(result)}\n{_CITE}\n"


def _span(start: int, end: int) -> str:
    return f"{start}" if start == end else f"{start}-{end}"


def _remembered(answer: RememberResponse) -> str:
    """The recording, in words: what was stored, where it is anchored, what waits."""
    known = "" if answer.created else " (already known: stored once)"
    lines = [
        f"remembered {answer.file}:{_span(*answer.lines)} in {answer.repo} "
        f"(project {answer.project}) as node {answer.node}{known}"
    ]
    if answer.brief_node is not None:
        lines.append(f"brief stored as node {answer.brief_node}, above it")
    for a in answer.anchored:
        span = _span(a.line_start, a.line_end)
        lines.append(f"anchored: {a.file}:{span} (commit {a.commit[:7]})")
    for p in answer.pending:
        lines.append(
            f"pending: {p.file}:{_span(p.line_start, p.line_end)} is not committed yet; it is "
            f"anchored when a commit holds these lines (until {p.expires_at})"
        )
    if answer.redacted:
        taken = ", ".join(f"{n} {kind}" for kind, n in sorted(answer.redacted.items()))
        lines.append(f"secrets taken out of the text before it was stored: {taken}")
    return "\n".join(lines) + "\n"


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
