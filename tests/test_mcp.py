"""`mem mcp`: the MCP server, spoken to through the official SDK's own client, over stdio (a
`mem mcp` subprocess) and streamable HTTP (`mem mcp --http`), on a real git repository with
memories ingested by `mem ingest`."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

from poimen_memory.cli import build_parser, main
from poimen_memory.cli.mcp_commands import mcp_serve
from poimen_memory.domain import ProjectId
from poimen_memory.lookup import (
    ByGitRequest,
    LookupResponse,
    LookupResult,
    RememberResponse,
    build_service,
)
from poimen_memory.mcpserver import (
    ANSWER_TEXT_LIMIT,
    MemoryTools,
    bounded,
    create_server,
    tool_input_schema,
)
from poimen_memory.operations import OPERATIONS, Services
from poimen_memory.store import Store

from .gitrepo import FixtureRepo, kong_repo
from .lsp.conftest import MEMORIES
from .serving import mem_mcp_http

REPO = "github.com/org/poimen"
TOKEN = "mcp-t0ken-for-tests"


@dataclass
class World:
    root: Path
    kong: FixtureRepo
    dsn: str
    project: str
    env: dict[str, str]

    def mem(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", *args],
            env=self.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def serve_args(self, repo: FixtureRepo | None = None, dsn: str | None = None) -> list[str]:
        return ["--repo", str((repo or self.kong).root), "--project", self.project,
                "--dsn", dsn or self.dsn]  # fmt: skip


def _env(root: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "POIMEN_CONFIG": str(root / "no-config.toml"),
        "POIMEN_CACHE_DIR": str(root / f"cache-{uuid.uuid4().hex[:8]}"),
    }
    for name in ("POIMEN_DSN", "POIMEN_PROJECT", "POIMEN_HTTP_TOKEN"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> World:
    root = tmp_path_factory.mktemp("mcp")
    w = World(root, kong_repo(root / "kong"), store_dsn, f"mcp-{uuid.uuid4().hex[:8]}", _env(root))
    src = root / "memories.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in MEMORIES))
    done = w.mem("ingest", str(src), "--repo", str(w.kong.root), "--project", w.project,
                 "--dsn", w.dsn)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return w


@asynccontextmanager
async def stdio(world: World, *args: str, mode: str = "auto") -> AsyncIterator[Client]:
    """A client of `mem mcp ARGS` running as a subprocess on stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "poimen_memory.cli", "mcp", *args],
        env=world.env,
    )
    async with Client(params, mode=mode, read_timeout_seconds=60) as client:
        yield client


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    """A call that must succeed, with its structured content checked against the model."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    model = RememberResponse if tool == "remember" else LookupResponse
    model.model_validate(result.structured_content)
    return result


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """A call that must come back as a tool error; its text."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    message = text_of(result)
    assert "Traceback" not in message
    return message


def cites(result: CallToolResult) -> list[str]:
    return [n["git_ref"] for n in result.structured_content["nodes"] if n["level"] == "L0"]


# -- the tools listed -------------------------------------------------------------------------


def _nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object inside ``schema``, itself included."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _nodes(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _nodes(value)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tools_are_listed_with_the_request_models_schemas(world: World, mode: str) -> None:
    """Both protocol eras (2026 discovery and the initialize handshake) list the same tools,
    each with its request model's JSON Schema as input, in the shape every client reads (each
    parameter one plain type and a description, no null branch, no $ref, nothing else
    allowed), and the response model's as output."""
    async with stdio(world, *world.serve_args(), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert client.instructions is not None
        assert "(commit abc1234)" in client.instructions
        assert f"at most {ANSWER_TEXT_LIMIT:,} characters" in client.instructions
    assert list(tools) == [op.mcp_tool for op in OPERATIONS]
    assert list(tools)[:6] == ["why", "by_git", "by_commit", "by_author", "query", "remember"]
    for op in OPERATIONS:
        given = tools[op.mcp_tool].input_schema
        model = op.request.model_json_schema()
        assert given == tool_input_schema(op.request), op.name
        assert given["type"] == "object"
        assert given["additionalProperties"] is False, op.name
        assert list(given["properties"]) == list(op.request.model_fields), op.name
        assert given["required"] == model.get("required", []), op.name
        for name, prop in given["properties"].items():
            assert prop["description"] == model["properties"][name]["description"]
            assert isinstance(prop["type"], str), (op.name, name, prop)
            if op.request.model_fields[name].default is None and name not in given["required"]:
                assert "default" not in prop, (op.name, name)  # left out: what null meant
        for node in _nodes(given):
            assert not {"anyOf", "oneOf", "$ref", "$defs", "prefixItems"} & set(node), op.name
            assert node.get("type") != "null", op.name
    why = tools["why"].input_schema["properties"]
    assert why["line"] == {
        "type": "integer", "minimum": 1, "maximum": 2**31 - 1, "title": "Line",
        "description": "A line (1-based) as the work tree has it now.",
    }  # fmt: skip
    assert why["lines"]["type"] == "array"
    assert why["lines"]["items"] == {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
    assert (why["lines"]["minItems"], why["lines"]["maxItems"]) == (2, 2)
    assert (why["history"]["type"], why["history"]["default"]) == ("integer", 0)
    assert tools["by_commit"].input_schema["properties"]["limit"]["default"] == 500
    assert tools["blame"].input_schema["properties"]["verify"]["default"] is False
    by_git = tools["by_git"].input_schema["properties"]
    for field in ("project", "file", "repo", "lines"):
        assert why[field] == by_git[field], field
    assert tools["why"].input_schema["required"] == ["file"]
    assert tools["by_git"].input_schema["required"] == ["file"]
    assert tools["by_commit"].input_schema["required"] == ["commit_sha"]
    assert tools["by_author"].input_schema["required"] == ["author"]
    assert tools["query"].input_schema["required"] == ["query"]
    assert tools["remember"].input_schema["required"] == ["text", "file"]
    assert tools["status"].input_schema["required"] == []
    for op in OPERATIONS:
        tool = tools[op.mcp_tool]
        assert tool.output_schema == op.response.model_json_schema(), op.name
        assert tool.description is not None
        if op.response in (LookupResponse, RememberResponse):
            assert "file:line (commit abc1234)" in tool.description, op.name
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (not op.writes), op.name


async def test_an_argument_left_out_is_what_null_was(world: World) -> None:
    """The schema no longer says `null`; a client that sends it still gets what leaving the
    argument out gets, and a number in a string is refused in the same words as elsewhere."""
    async with stdio(world, *world.serve_args()) as client:
        for tool, arguments in [
            ("why", {"file": "src/kong/buffer.rs", "line": 42}),
            ("by_git", {"file": "src/kong/buffer.rs"}),
            ("by_commit", {"commit_sha": world.kong.commits["abc123"]}),
            ("query", {"query": "buffer"}),
            ("blame", {"file": "src/kong/buffer.rs"}),
        ]:
            op = next(o for o in OPERATIONS if o.mcp_tool == tool)
            nulls = {
                name: None
                for name, info in op.request.model_fields.items()
                if info.default is None and name not in arguments
            }
            assert nulls, tool
            left_out = await client.call_tool(tool, arguments)
            sent_null = await client.call_tool(tool, {**arguments, **nulls})
            assert not left_out.is_error, text_of(left_out)
            assert sent_null.structured_content == left_out.structured_content, tool
            assert text_of(sent_null) == text_of(left_out), tool
        message = await refused(client, "why", {"file": "src/kong/buffer.rs", "line": "42"})
        assert message == "line: expected an integer, got '42'"


# -- the tools on a real repository -----------------------------------------------------------


async def test_each_tool_answers_with_the_memories_and_their_citations(world: World) -> None:
    alice, bob = world.kong.commits["abc123"], world.kong.commits["def456"]
    async with stdio(world, *world.serve_args()) as client:
        why = await call(client, "why", {"file": "src/kong/buffer.rs", "line": 42})
        text = text_of(why)
        assert text.startswith(f"1 memory for src/kong/buffer.rs:42 in {REPO}")
        assert "Uploads of 16MB now pass; larger ones get a 413." in text
        assert f"src/kong/buffer.rs:42 (commit {alice[:7]})" in text
        assert "L1 · Kong body buffer raised to 16MB" in text  # the stack above the evidence
        assert "L2 · Kong platform" in text
        body = why.structured_content
        assert body["repo"] == REPO
        assert [n["level"] for n in body["nodes"]] == ["L0", "L1", "L2"]
        assert body["nodes"][0]["git_commit"]["sha"] == alice

        # The same lines by an absolute path in the served work tree, and as a range.
        absolute = str(world.kong.root / "src/kong/buffer.rs")
        again = await call(client, "why", {"file": absolute, "line": 42})
        assert again.structured_content == body
        ranged = await call(client, "why", {"file": "src/kong/buffer.rs", "lines": [40, 44]})
        assert cites(ranged) == ["src/kong/buffer.rs:42"]
        assert text_of(ranged).startswith("1 memory for src/kong/buffer.rs:40-44")

        # A line without memories: none, said plainly.
        none = await call(client, "why", {"file": "src/kong/buffer.rs", "line": 41})
        assert none.structured_content == {
            "repo": REPO, "nodes": [], "mapped": True, "truncated": False,
        }  # fmt: skip
        assert text_of(none) == f"no memories recorded for src/kong/buffer.rs:41 in {REPO}\n"

        by_git = await call(client, "by_git", {"file": "src/kong/handler.rs", "line": 10})
        assert cites(by_git) == ["src/kong/handler.rs:10"]
        assert f"src/kong/handler.rs:10 (commit {bob[:7]})" in text_of(by_git)
        whole = await call(client, "by_git", {"file": "src/kong/buffer.rs"})
        assert cites(whole) == ["src/kong/buffer.rs:42"]

        by_commit = await call(client, "by_commit", {"commit_sha": bob[:8]})
        assert cites(by_commit) == ["src/kong/handler.rs:10"]
        assert "Handler streams bodies larger than BODY_BUFFER." in text_of(by_commit)

        by_author = await call(client, "by_author", {"author": "alice@org.test"})  # .mailmap
        assert cites(by_author) == ["src/kong/buffer.rs:42"]
        assert f"(commit {alice[:7]})" in text_of(by_author)

        query = await call(client, "query", {"query": "streams bodies", "git_repo": REPO})
        assert cites(query) == ["src/kong/handler.rs:10"]
        assert f"src/kong/handler.rs:10 (commit {bob[:7]})" in text_of(query)


async def test_bad_arguments_are_tool_errors_naming_the_field(world: World) -> None:
    buffer = "src/kong/buffer.rs"
    outside = world.root / "elsewhere.rs"
    outside.write_text("x\n")
    async with stdio(world, *world.serve_args()) as client:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("why", {"file": buffer, "line": "x"}, "line: expected an integer, got 'x'"),
            ("why", {"line": 3}, "file: required"),
            ("why", {"file": buffer, "lines": [5, 3]}, "lines: end 3 is before start 5"),
            ("why", {"file": buffer, "line": 42, "repo": "github.com/org/other"},
             "repo: 'github.com/org/other' is not known here: no work tree of it"),
            ("why", {"file": buffer, "line": 9999}, "line: 9999 is beyond the end of"),
            ("why", {"file": buffer, "line": 42, "commit_sha": "abcd1234"},
             "commit_sha: not an argument of why"),
            ("why", {"file": str(outside), "line": 1}, "file: "),
            ("by_git", {"file": "../escape.rs", "line": 1}, "file: "),
            ("by_commit", {"commit_sha": "xyz"}, "commit_sha: expected 4 to 64 hex digits"),
            ("by_author", {"author": ""}, "author: expected a non-empty string"),
            ("query", {"query": "buffer", "limit": 0}, "limit: expected an integer from 1 to"),
            ("remember", {"text": "x", "file": buffer}, "line: required"),
        ]  # fmt: skip
        for tool, arguments, message in cases:
            got = await refused(client, tool, arguments)
            assert got.startswith(message), (tool, arguments, got)
        assert "not in a work tree this server serves" in await refused(
            client, "why", {"file": str(outside), "line": 1}
        )
        with pytest.raises(MCPError, match="unknown tool 'nope'"):
            await client.call_tool("nope", {})
        # Still serving, and still right.
        why = await call(client, "why", {"file": buffer, "line": 42})
        assert cites(why) == ["src/kong/buffer.rs:42"]


async def test_a_store_that_does_not_answer_is_a_tool_error(world: World) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = f"postgresql://nobody@127.0.0.1:{port}/none?connect_timeout=2"
    async with stdio(world, *world.serve_args(dsn=down)) as client:
        assert len((await client.list_tools()).tools) == len(OPERATIONS)  # starts without it
        message = await refused(client, "why", {"file": "src/kong/buffer.rs", "line": 42})
        assert message.startswith("memory store unreachable: ")
        assert str(port) in message
        assert "\n" not in message


async def test_an_unexpected_failure_is_logged_not_shown(
    world: World, store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Any other exception: its type for the client, its stack in the server's log; the
    server keeps serving. (In process, through the SDK's client, to make a lookup fail.)"""
    service = build_service(
        store, [world.kong.root], ProjectId(world.project), cache_path=tmp_path / "blame.db"
    )
    tools = MemoryTools.serving(Services.over(service), [world.kong.root])

    def broken(req: ByGitRequest) -> LookupResult:
        raise RuntimeError("a detail the client must not see")

    service.by_git = broken  # type: ignore[method-assign]
    async with Client(create_server(tools)) as client:
        message = await refused(client, "why", {"file": "src/kong/buffer.rs", "line": 42})
        assert message == "internal error: RuntimeError"
        query = await call(client, "query", {"query": "streams", "git_repo": REPO})
        assert cites(query) == ["src/kong/handler.rs:10"]
    [record] = [r for r in caplog.records if r.name == "poimen_memory.mcpserver" and r.exc_info]
    assert record.exc_info is not None
    assert "a detail the client must not see" in str(record.exc_info[1])


def test_stdout_carries_protocol_only(world: World) -> None:
    """Nothing but protocol on stdout: with no client message, nothing at all."""
    done = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", "mcp", *world.serve_args()],
        env=world.env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""


# -- streamable HTTP --------------------------------------------------------------------------


@contextmanager
def serving_http(world: World, *args: str) -> Iterator[str]:
    """`mem mcp --http` on a free loopback port; yields the MCP endpoint's URL."""
    with mem_mcp_http([*world.serve_args(), *args], world.env, world.root) as url:
        yield url


async def test_http_serves_the_tools_to_the_token_only(world: World) -> None:
    with serving_http(world, "--token", TOKEN) as url:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            r = httpx.post(url, json=initialize, headers=headers)
            assert r.status_code == 401, (headers, r.text)
            assert r.json()["field"] == "authorization"
        port = url.split(":")[2].split("/")[0]
        good = {"Authorization": f"Bearer {TOKEN}"}
        r = httpx.post(url, json=initialize, headers={**good, "Host": f"evil.example:{port}"})
        assert r.status_code == 400, r.text  # DNS rebinding
        r = httpx.post(url, json=initialize, headers={**good, "Origin": "https://evil.example"})
        assert r.status_code == 403, r.text
        async with (
            create_mcp_http_client(headers=good) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            why = await call(client, "why", {"file": "src/kong/buffer.rs", "line": 42})
            assert "Uploads of 16MB now pass" in text_of(why)
            assert cites(why) == ["src/kong/buffer.rs:42"]
            message = await refused(client, "why", {"file": "src/kong/buffer.rs", "line": "x"})
            assert message == "line: expected an integer, got 'x'"
        async with (  # the initialize handshake, a session and its event stream
            create_mcp_http_client(headers=good) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            by_commit = await call(
                client, "by_commit", {"commit_sha": world.kong.commits["def456"]}
            )
            assert cites(by_commit) == ["src/kong/handler.rs:10"]


def test_http_off_loopback_needs_a_token(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused at start, in one line, exit 2: as `mem http` refuses it."""
    monkeypatch.setenv("POIMEN_CONFIG", world.env["POIMEN_CONFIG"])
    monkeypatch.delenv("POIMEN_HTTP_TOKEN", raising=False)
    for host in ("0.0.0.0", "192.0.2.1"):  # every address; another machine's
        assert main(["mcp", "--http", "--host", host, *world.serve_args()]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith(f"mem: error: --host: {host} is reachable from other machines")
        assert "--token" in err
        assert err.count("\n") == 1
    assert main(["mcp", "--token", TOKEN, *world.serve_args()]) == 2
    assert capsys.readouterr().err == (
        "mem: error: --token: only with --http (stdio needs no address)\n"
    )


# -- the command line -------------------------------------------------------------------------


def test_mcp_serves_unless_an_action_is_given() -> None:
    """`mem mcp` alone serves; an action added under it (`mem mcp install ...`) runs its
    own function, not the server."""
    parser = build_parser()
    args = parser.parse_args(["mcp", "--repo", "a", "--repo", "b", "--http", "--port", "9"])
    assert args.func is mcp_serve
    assert (args.mcp_command, args.repo, args.http, args.port) == (None, ["a", "b"], True, 9)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    mcp = commands.choices["mcp"]
    actions = next(a for a in mcp._actions if isinstance(a, argparse._SubParsersAction))
    assert actions.dest == "mcp_command"

    def probe(args: argparse.Namespace) -> int:
        return 0

    actions.add_parser("probe").set_defaults(func=probe)
    args = parser.parse_args(["mcp", "probe"])
    assert (args.func, args.mcp_command) == (probe, "probe")
    if "install" in actions.choices:
        args = parser.parse_args(["mcp", "install", "claude-code", "--dry-run"])
        assert args.mcp_command == "install"
        assert args.func is not mcp_serve


# -- remember, then find ----------------------------------------------------------------------


@pytest.fixture
def fresh(world: World, tmp_path: Path) -> tuple[World, FixtureRepo]:
    """A repository of its own (remember changes it) on the world's store."""
    repo = kong_repo(tmp_path / "kong", remote=f"git@github.com:org/r-{uuid.uuid4().hex[:8]}.git")
    return world, repo


async def test_remember_on_committed_lines_is_found_at_once(
    fresh: tuple[World, FixtureRepo],
) -> None:
    world, repo = fresh
    alice = repo.commits["abc123"]
    evidence = "BODY_BUFFER must stay at 16MB: the upload tests send exactly 16MB bodies."
    arguments = {"text": evidence, "brief": "16MB buffer is load-bearing",
                 "file": str(repo.root / "src/kong/buffer.rs"), "line": 42}  # fmt: skip
    async with stdio(world, *world.serve_args(repo)) as client:
        before = await call(client, "why", {"file": "src/kong/buffer.rs", "line": 42})
        assert before.structured_content["nodes"] == []
        done = await call(client, "remember", arguments)
        answer = done.structured_content
        assert answer["anchored"] == [
            {"commit": alice, "file": "src/kong/buffer.rs", "line_start": 42, "line_end": 42}
        ]
        assert (answer["pending"], answer["created"]) == ([], True)
        assert answer["brief_node"] is not None
        assert f"anchored: src/kong/buffer.rs:42 (commit {alice[:7]})" in text_of(done)
        why = await call(client, "why", {"file": "src/kong/buffer.rs", "line": 42})
        assert evidence in text_of(why)
        assert f"src/kong/buffer.rs:42 (commit {alice[:7]})" in text_of(why)
        assert [n["level"] for n in why.structured_content["nodes"]] == ["L0", "L1"]
        assert why.structured_content["nodes"][0]["sha256"] == answer["node"]
        again = await call(client, "remember", arguments)  # the same text: stored once
        assert (again.structured_content["node"], again.structured_content["created"]) == (
            answer["node"], False,
        )  # fmt: skip
        nearby = await call(client, "why", {"file": "src/kong/buffer.rs", "line": 43})
        assert nearby.structured_content["nodes"] == []


async def test_remember_on_uncommitted_lines_is_found_once_they_are_committed(
    fresh: tuple[World, FixtureRepo],
) -> None:
    world, repo = fresh
    lines = repo.lines("src/kong/handler.rs")
    new = "let retry_budget = Duration::from_millis(250); // mcp-new-line"
    repo.write("src/kong/handler.rs", "\n".join([*lines[:4], new, *lines[4:]]) + "\n")
    evidence = "The retry budget is 250ms: the upstream times out at 300ms."
    async with stdio(world, *world.serve_args(repo)) as client:
        done = await call(client, "remember", {"text": evidence, "file": "src/kong/handler.rs",
                                               "line": 5})  # fmt: skip
        answer = done.structured_content
        assert answer["anchored"] == []
        assert [(p["file"], p["line_start"], p["line_end"]) for p in answer["pending"]] == [
            ("src/kong/handler.rs", 5, 5)
        ]
        assert "pending: src/kong/handler.rs:5 is not committed yet" in text_of(done)
        # Not committed: line 5 at HEAD is still the old line, which has no memory.
        assert (await call(client, "why", {"file": "src/kong/handler.rs", "line": 5})
                ).structured_content["nodes"] == []  # fmt: skip
        sha = repo.commit("retry", "Add a retry budget", ("Dana", "dana@org.test"))
        why = await call(client, "why", {"file": "src/kong/handler.rs", "line": 5})
        assert evidence in text_of(why)
        assert f"src/kong/handler.rs:5 (commit {sha[:7]})" in text_of(why)
        others = await call(client, "why", {"file": "src/kong/handler.rs", "lines": [1, 4]})
        assert others.structured_content["nodes"] == []


async def test_remember_on_lines_edited_before_their_commit_is_not_shown_on_them(
    fresh: tuple[World, FixtureRepo],
) -> None:
    world, repo = fresh
    lines = repo.lines("src/kong/handler.rs")
    first = ["let limit = 10; // mcp-edited-a", "let window = 60; // mcp-edited-b"]
    repo.write("src/kong/handler.rs", "\n".join([*lines[:2], *first, *lines[2:]]) + "\n")
    evidence = "Rate limit: 10 requests a minute, as the partner contract says."
    async with stdio(world, *world.serve_args(repo)) as client:
        done = await call(client, "remember", {"text": evidence, "file": "src/kong/handler.rs",
                                               "lines": [3, 4]})  # fmt: skip
        assert len(done.structured_content["pending"]) == 1
        edited = ["let limit = 20; // mcp-edited-a", "let window = 30; // mcp-edited-b"]
        repo.write("src/kong/handler.rs", "\n".join([*lines[:2], *edited, *lines[2:]]) + "\n")
        repo.commit("limits", "Add rate limits", ("Dana", "dana@org.test"))
        for line in (3, 4):
            why = await call(client, "why", {"file": "src/kong/handler.rs", "line": line})
            assert why.structured_content["nodes"] == [], line
            assert evidence not in text_of(why)
        ranged = await call(client, "why", {"file": "src/kong/handler.rs", "lines": [1, 6]})
        assert ranged.structured_content["nodes"] == []


# -- the text's limit --------------------------------------------------------------------------


def test_a_text_over_the_limit_is_cut_after_a_whole_memory_and_says_so() -> None:
    assert bounded("short\n", 100) == "short\n"
    memories = [f"L0 · memory {i}\n   src/app.py:{i} (commit 1a2b3c4)\n" for i in range(400)]
    whole = "\n".join(memories)
    cut = bounded(whole, 2000)
    assert len(cut) <= 2000
    shown, note = cut.split("\n\n[cut: ")
    assert whole.startswith(shown + "\n\n")  # ends after a whole memory and its citation
    assert shown.endswith("(commit 1a2b3c4)")
    rest = len(whole) - len(shown)
    assert note == (
        f"this text is limited to 2,000 characters; {rest:,} more are not shown. The "
        "structured content has the whole answer; or ask for fewer lines, a smaller "
        "`limit`, or the next page by `cursor`.]\n"
    )
    one_line = bounded("x" * 5000, 1000)  # no line end to cut at
    assert len(one_line) <= 1000
    assert one_line.startswith("x" * 500)


async def test_the_text_of_a_long_answer_is_bounded_and_the_structure_is_whole(
    fresh: tuple[World, FixtureRepo],
) -> None:
    """Many memories on one line: the text stops at the limit after a whole memory and says
    so; every memory is in the structured content, whole."""
    world, repo = fresh
    paragraph = "The retry budget is shared by every upstream call in this handler. " * 4
    rows = [
        {"type": "node", "id": f"n{i}", "level": "L0", "query_id": "q-many",
         "text": f"Finding {i}: {paragraph}", "created_at": f"2026-08-20T07:{i // 60:02}:{i % 60:02}Z",
         "anchors": [{"file": "src/kong/handler.rs", "line": 10}]}
        for i in range(200)
    ]  # fmt: skip
    src = world.root / f"many-{uuid.uuid4().hex[:8]}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    target = ("--repo", str(repo.root), "--project", world.project, "--dsn", world.dsn)
    done = world.mem("ingest", str(src), *target)
    assert done.returncode == 0, done.stderr
    async with stdio(world, *world.serve_args(repo)) as client:
        why = await call(client, "why", {"file": "src/kong/handler.rs", "line": 10})
    text = text_of(why)
    assert len(text) <= ANSWER_TEXT_LIMIT
    assert text.startswith("200 memories for src/kong/handler.rs:10")
    shown, note = text.split("\n\n[cut: ")
    assert note.startswith(f"this text is limited to {ANSWER_TEXT_LIMIT:,} characters")
    whole = world.mem("why", "src/kong/handler.rs:10", *target)  # the CLI: the whole text
    assert whole.returncode == 0, whole.stderr
    assert len(whole.stdout) > ANSWER_TEXT_LIMIT
    assert whole.stdout.startswith(shown + "\n\n")  # cut after a whole memory
    assert f"{len(whole.stdout) - len(shown):,} more are not shown" in note
    stored = {n["text"] for n in why.structured_content["nodes"]}
    assert {r["text"] for r in rows} <= stored


async def test_an_agent_remembers_through_mcp_and_a_developer_sees_it_on_hover(
    fresh: tuple[World, FixtureRepo],
) -> None:
    """The whole path: an agent with only MCP records a memory on lines it just wrote; the
    lines are committed; a developer's editor (the real language server over stdio) shows
    it on hover, and not on the line next to it."""
    from lsprotocol import types as lsp
    from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

    world, repo = fresh
    rel = "src/kong/buffer.rs"
    lines = repo.lines(rel)
    new = "const MAX_CHUNK: usize = 64 * KB; // e2e"
    repo.write(rel, "\n".join([*lines[:19], new, *lines[19:]]) + "\n")
    evidence = "Chunks of 64KB keep the proxy's memory flat under 1,000 uploads."
    async with stdio(world, *world.serve_args(repo)) as client:
        done = await call(client, "remember", {"text": evidence, "file": rel, "line": 20})
        assert done.structured_content["pending"]
    repo.commit("chunk", "Chunked uploads", ("Dana", "dana@org.test"))

    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "poimen_memory.cli", "lsp"], server_env=world.env
    )
    editor = await config.start()
    assert isinstance(editor, LanguageClient)
    try:
        await editor.initialize_session(
            lsp.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=repo.root.as_uri(),
                workspace_folders=[lsp.WorkspaceFolder(uri=repo.root.as_uri(), name="kong")],
                initialization_options={
                    "poimenMemory": {"dsn": world.dsn, "project": world.project}
                },
            )
        )
        uri = (repo.root / rel).as_uri()
        editor.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri, "rust", 1, (repo.root / rel).read_text())
            )
        )

        async def hover(line: int) -> lsp.Hover | None:
            return await editor.text_document_hover_async(
                lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line - 1, 0))
            )

        shown = await hover(20)
        assert shown is not None
        assert isinstance(shown.contents, lsp.MarkupContent)
        assert "Chunks of 64KB" in shown.contents.value
        assert await hover(19) is None
        assert await hover(21) is None
    finally:
        await editor.shutdown_session()
        await editor.stop()
