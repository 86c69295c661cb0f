"""The operations table is the one door: every operation of ``poimen_memory.operations`` is
reachable on every surface (the CLI, HTTP, the language server's commands, MCP tools) with the
same request and response schema, and each surface answers the same request with the same
JSON. Each surface reports each kind of failure through its own small table: bad input, not
found, store unavailable, refused.

Real parts only: `mem` subprocesses, a `mem http` server, `mem lsp` through pytest-lsp and
`mem mcp` through the official SDK's client, on a real git repository and Postgres."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from poimen_memory.cli import EXIT_STATUS, build_parser
from poimen_memory.errors import ErrorKind
from poimen_memory.http import STATUS
from poimen_memory.lsp import commands
from poimen_memory.lsp.lookups import ERROR_CODES
from poimen_memory.mcpserver import tool_input_schema
from poimen_memory.operations import OPERATIONS, Operation, operation

from .gitrepo import ALICE
from .lsp.conftest import World as LspWorld
from .lsp.conftest import start_client
from .serving import free_port, mem_http
from .test_mcp import REPO, World, stdio
from .test_mcp import world as world

BUFFER = "src/kong/buffer.rs"
MARK = "<alice's commit>"

# One request per operation, in the request model's words (the same body on every surface).
REQUESTS: dict[str, dict[str, Any]] = {
    "why": {"file": BUFFER, "line": 42, "repo": REPO},
    "by_git": {"file": BUFFER, "lines": [40, 44], "repo": REPO},
    "by_commit": {"commit_sha": MARK, "repo": REPO, "limit": 1},
    "by_author": {"author": ALICE[1], "repo": REPO},
    "query": {"query": "buffer", "git_repo": REPO},
    "remember": {"text": "", "file": BUFFER, "line": 42, "repo": REPO},  # text: per run
    "blame": {"file": BUFFER, "repo": REPO, "verify": True},
    "status": {},
    "resolve_pending": {"project": ""},  # the world's project
}


def test_every_operation_has_a_request_here() -> None:
    assert set(REQUESTS) == {op.name for op in OPERATIONS}


def body_of(world: World, name: str, text: str) -> dict[str, Any]:
    filled = {}
    for key, value in REQUESTS[name].items():
        if value == MARK:
            value = world.kong.commits["abc123"]
        elif name == "remember" and key == "text":
            value = text
        elif name == "resolve_pending" and key == "project":
            value = world.project
        filled[key] = value
    return filled


# -- the surfaces, each asked the same body -------------------------------------------------

Ask = Callable[[Operation[Any, Any, Any], dict[str, Any]], Awaitable[Any]]


def cli_argv(world: World, op: Operation[Any, Any, Any], body: dict[str, Any]) -> list[str]:
    """The `mem` command line of ``body``, from the operation's CLI form: its words, its
    positional arguments, then an option per other field."""
    spec = op.cli
    assert spec is not None, f"{op.name} has no CLI form"
    argv = list(spec.words)
    given = dict(body)
    for name, _ in spec.positional:
        if name == "location":
            where = given.pop("file")
            if "line" in given:
                where += f":{given.pop('line')}"
            elif "lines" in given:
                first, last = given.pop("lines")
                where += f":{first}-{last}"
            argv.append(where)
        else:
            argv.append(str(given.pop(name)))
    if given.pop("repo", None) is not None:
        argv += ["--repo", str(world.kong.root)]
    given.pop("project", None)  # the project is the command's --project
    for name, value in given.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return [*argv, "--project", world.project, "--dsn", world.dsn, "--json"]


@asynccontextmanager
async def cli(world: World) -> AsyncIterator[Ask]:
    async def ask(op: Operation[Any, Any, Any], body: dict[str, Any]) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", *cli_argv(world, op, body)],
            cwd=world.kong.root, env=world.env, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, (op.name, done.stderr)
        return json.loads(done.stdout)

    yield ask


def http_server(world: World, *extra: str, dsn: str | None = None) -> Any:
    """`mem http` serving the world's work tree for its project (on ``dsn``, if given)."""
    args = ["--repo", str(world.kong.root), "--project", world.project,
            "--dsn", dsn or world.dsn, *extra]  # fmt: skip
    return mem_http(args, world.env, world.root / f"ops-http-{uuid.uuid4().hex[:6]}.log")


@pytest.fixture(scope="module")
def http_base(world: World) -> Iterator[str]:
    with http_server(world) as base:
        yield base


async def http_ask(
    client: httpx.AsyncClient, op: Operation[Any, Any, Any], body: dict[str, Any]
) -> httpx.Response:
    assert op.http is not None, f"{op.name} has no HTTP route"
    if op.http.method == "GET":
        return await client.get(op.http.path, params=body)
    return await client.post(op.http.path, json=body)


@asynccontextmanager
async def http(base: str) -> AsyncIterator[Ask]:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:

        async def ask(op: Operation[Any, Any, Any], body: dict[str, Any]) -> Any:
            response = await http_ask(client, op, body)
            assert response.status_code == 200, (op.name, response.text)
            return response.json()

        yield ask


def lsp_world(world: World) -> LspWorld:
    return LspWorld(world.root, world.kong, world.dsn, world.root / "no-log", world.root, world.env)


@asynccontextmanager
async def lsp_client(world: World, dsn: str | None = None) -> AsyncIterator[LanguageClient]:
    options = {"poimenMemory": {"dsn": dsn or world.dsn, "project": world.project}}
    client = await start_client(lsp_world(world), "visual-studio-code", options)
    try:
        yield client
    finally:
        await client.shutdown_session()
        await client.stop()


async def execute(client: LanguageClient, command: str, body: dict[str, Any]) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command, [body]))


@asynccontextmanager
async def lsp(world: World) -> AsyncIterator[Ask]:
    async with lsp_client(world) as client:

        async def ask(op: Operation[Any, Any, Any], body: dict[str, Any]) -> Any:
            return await execute(client, op.lsp_command, body)

        yield ask


@asynccontextmanager
async def mcp(world: World) -> AsyncIterator[Ask]:
    async with stdio(world, *world.serve_args()) as client:

        async def ask(op: Operation[Any, Any, Any], body: dict[str, Any]) -> Any:
            result = await client.call_tool(op.mcp_tool, body)
            assert not result.is_error, (op.name, result.content)
            return result.structured_content

        yield ask


# -- the same schema everywhere ---------------------------------------------------------------


def test_every_operation_is_a_cli_command_with_its_fields_as_options() -> None:
    parser = build_parser()
    for op in OPERATIONS:
        assert op.cli is not None, op.name
        positional = ["x"] * len(op.cli.positional)
        args = parser.parse_args([*op.cli.words, *positional])
        assert callable(args.func), op.name
        given_otherwise = {"project", "repo", "file", "line", "lines"} | {
            name for name, _ in op.cli.positional
        }
        for field in op.request.model_fields:
            if field not in given_otherwise:
                assert hasattr(args, field), (op.name, field)


def test_every_operation_is_an_lsp_command_the_editors_know() -> None:
    for op in OPERATIONS:
        assert op.lsp_command in commands.ALL, op.name


def test_every_field_of_every_request_says_what_it_is() -> None:
    for op in OPERATIONS:
        for model in (op.request, op.response):
            schema = model.model_json_schema()
            for name, prop in schema["properties"].items():
                assert prop.get("description"), (op.name, model.__name__, name)


async def test_every_surface_offers_every_operation_with_the_same_schema(
    world: World,
    http_base: str,
) -> None:
    # HTTP: a route per operation, the request model as its body (or query) and the response
    # model as its answer, in the OpenAPI document the server publishes.
    spec = httpx.get(f"{http_base}/openapi.json", timeout=30).json()
    components = spec["components"]["schemas"]
    for op in OPERATIONS:
        assert op.http is not None, op.name
        route = spec["paths"][op.http.path][op.http.method.lower()]
        if op.http.method == "GET":
            named = {p["name"] for p in route.get("parameters", [])}
        else:
            ref = route["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            named = set(components[ref.rsplit("/", 1)[-1]]["properties"])
        assert named == set(op.request.model_fields), op.name
        answer = route["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert answer.rsplit("/", 1)[-1] == op.response.__name__, op.name
    # MCP: a tool per operation whose schemas are the models' own (the input in the shape
    # every client reads: the same fields, required ones and descriptions, one plain type each).
    async with stdio(world, *world.serve_args()) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for op in OPERATIONS:
        tool = tools[op.mcp_tool]
        model = op.request.model_json_schema()
        assert tool.input_schema == tool_input_schema(op.request), op.name
        assert list(tool.input_schema["properties"]) == list(model["properties"]), op.name
        assert tool.input_schema["required"] == model.get("required", []), op.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop["description"] == model["properties"][name]["description"], name
        assert tool.output_schema == op.response.model_json_schema(), op.name
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (not op.writes), op.name
    # LSP: a command per operation, announced at initialize.
    async with lsp_client(world) as client:
        provider = client.init_result.capabilities.execute_command_provider  # type: ignore[attr-defined]
        assert provider is not None
        assert {op.lsp_command for op in OPERATIONS} <= set(provider.commands)


# -- the same answer everywhere ---------------------------------------------------------------


def comparable(name: str, answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs by process or moment: where a blame came from (each
    process has its own cache), whether a remembered text was new (the first surface stored
    it), and the shared blame cache's size (servers share their blames in the background)."""
    drop = {
        "blame": {"source"},
        "remember": {"created"},
        "status": {"blame_files", "blame_runs"},
    }.get(name, set())
    return {k: v for k, v in answer.items() if k not in drop}


async def test_every_surface_answers_every_operation_with_the_same_json(
    world: World,
    http_base: str,
) -> None:
    text = f"Operations table check {uuid.uuid4().hex}: the buffer is sized for uploads."
    answers: dict[str, dict[str, Any]] = {}
    surfaces = {
        "cli": cli(world),
        "http": http(http_base),
        "lsp": lsp(world),
        "mcp": mcp(world),
    }
    for surface, opened in surfaces.items():
        async with opened as ask:
            # The writes first: every surface's lookups then see the same store.
            for op in sorted(OPERATIONS, key=lambda op: not op.writes):
                answer = await ask(op, body_of(world, op.name, text))
                op.response.model_validate(answer)
                answers.setdefault(op.name, {})[surface] = answer
    for name, by_surface in answers.items():
        first = comparable(name, by_surface["cli"])
        for surface, answer in by_surface.items():
            assert comparable(name, answer) == first, (name, surface)
    # The answers are about something: the memory at buffer.rs:42 on every lookup of it, a
    # page of one anchor with the cursor of the next, every line of the blame git's.
    assert answers["why"]["cli"]["nodes"], answers["why"]["cli"]
    assert answers["by_commit"]["cli"]["truncated"] is True
    assert answers["by_commit"]["cli"]["cursor"]
    assert answers["blame"]["cli"]["verified"] is True
    assert answers["status"]["cli"]["schema_version"] == answers["status"]["cli"]["latest_version"]
    remembered = answers["remember"]
    assert remembered["cli"]["created"] is True
    assert [remembered[s]["created"] for s in ("http", "lsp", "mcp")] == [False] * 3
    # What the first surface remembered, every surface finds on its line.
    assert any(n["text"] == text for n in answers["why"]["mcp"]["nodes"])


# -- each kind of failure, through each surface's table ---------------------------------------


# What each kind of failure is on each surface: (exit status, HTTP status, JSON-RPC code).
EXPECTED: dict[ErrorKind, tuple[int, int, int]] = {
    ErrorKind.INPUT: (2, 422, -32602),
    ErrorKind.NOT_FOUND: (1, 404, -32602),
    ErrorKind.UNAVAILABLE: (1, 503, -32603),
    ErrorKind.REFUSED: (1, 403, -32803),
    ErrorKind.INTERNAL: (1, 500, -32603),
}


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_every_surface_has_its_status_for_every_kind(kind: ErrorKind) -> None:
    assert (EXIT_STATUS[kind], STATUS[kind], ERROR_CODES[kind]) == EXPECTED[kind]


BAD_LINE = ("why", {"file": BUFFER, "line": 0, "repo": REPO}, "line")
NO_SUCH_REV = ("blame", {"file": BUFFER, "repo": REPO, "at": "0123456789abcdef"}, None)


async def test_bad_input_and_not_found_on_every_surface(
    world: World,
    http_base: str,
) -> None:
    cases = [(ErrorKind.INPUT, *BAD_LINE), (ErrorKind.NOT_FOUND, *NO_SUCH_REV)]
    for kind, name, body, field in cases:
        op = operation(name)
        # CLI: the exit status of the kind, one line on stderr.
        done = subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", *cli_argv(world, op, body)],
            cwd=world.kong.root, env=world.env, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        exit_status, http_status, code = EXPECTED[kind]
        assert done.returncode == exit_status, (name, done.stderr)
        assert done.stderr.startswith("mem: error: ")
        assert done.stderr.count("\n") == 1
        # HTTP: the kind's status, the field named.
        async with httpx.AsyncClient(base_url=http_base, timeout=60) as client:
            response = await http_ask(client, op, body)
        assert response.status_code == http_status, (name, response.text)
        assert response.json().get("field") == field
        # LSP: the kind's error code, the field in its data.
        async with lsp_client(world) as client:
            with pytest.raises(JsonRpcException) as caught:
                await execute(client, op.lsp_command, body)
        assert caught.value.code == code, (name, caught.value.message)
        assert (caught.value.data or {}).get("field") == field
        # MCP: a tool error in words, no traceback.
        async with stdio(world, *world.serve_args()) as mcp_client:
            result = await mcp_client.call_tool(op.mcp_tool, body)
        assert result.is_error, (name, result.content)
        said = result.content[0].text  # type: ignore[union-attr]
        assert "Traceback" not in said
        if field is not None:
            assert said.startswith(f"{field}: "), said


async def test_a_store_that_does_not_answer_on_every_surface(world: World) -> None:
    dead = f"postgresql://nobody@127.0.0.1:{free_port()}/nothing?connect_timeout=2"
    op = operation("by_author")
    body = {"author": ALICE[1], "repo": REPO}
    done = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", *cli_argv(world, op, body)[:-5],
         "--project", world.project, "--dsn", dead, "--json"],
        cwd=world.kong.root, env=world.env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    exit_status, http_status, code = EXPECTED[ErrorKind.UNAVAILABLE]
    assert done.returncode == exit_status, done.stderr
    with http_server(world, dsn=dead) as base:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            response = await http_ask(client, op, body)
        assert response.status_code == http_status, response.text
        assert "memory store" in response.json()["error"]
    async with lsp_client(world, dsn=dead) as client:
        with pytest.raises(JsonRpcException) as caught:
            await execute(client, op.lsp_command, body)
    assert caught.value.code == code
    assert "memory store unreachable" in caught.value.message
    mcp_args = [a if a != world.dsn else dead for a in world.serve_args()]
    async with stdio(world, *mcp_args) as mcp_client:
        result = await mcp_client.call_tool(op.mcp_tool, body)
    assert result.is_error
    assert result.content[0].text.startswith("memory store unreachable")  # type: ignore[union-attr]


async def test_a_token_for_other_projects_is_refused(world: World) -> None:
    token = "ops-t0ken"
    env_extra = ("--token", token, "--token-project", "someone-else")
    with http_server(world, *env_extra) as base:
        headers = {"authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as client:
            for name in ("why", "status", "resolve_pending"):
                op = operation(name)
                response = await http_ask(client, op, body_of(world, name, ""))
                assert response.status_code == 403, (name, response.text)
                assert response.json()["field"] == "project"
