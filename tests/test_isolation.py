"""Projects never see each other: two projects with memories at the same line of the same file
in the same commit of one repository, and every lookup (by-git on a line, a range, the whole
file and literally in a commit; by-commit; by-author; query; the LSP's hover and code lenses)
on every surface that offers it (CLI, HTTP, LSP, MCP) answers with its own project's
memories and never the other's. Pages (by-commit and by-author with a limit) count the
project's own anchors only, and a server with no work tree answers by-git from the store,
for its own project only."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from lsprotocol import types

from poimen_memory.cli import build_parser
from poimen_memory.lsp import commands

from .gitrepo import FixtureRepo, kong_repo
from .lsp.conftest import World as LspWorld
from .lsp.conftest import start_client
from .lsp.test_server import hover, hover_text, open_doc
from .serving import free_port, wait_until_healthy
from .test_mcp import World as McpWorld
from .test_mcp import _env, call, stdio

REPO = "github.com/org/poimen"
BUFFER = "src/kong/buffer.rs"
CITED = f"{BUFFER}:42"
PROJECTS = {"alpha": "Alpha", "bravo": "Bravo"}


def summary_text(label: str) -> str:
    return f"{label} summary: the ledger reconciliation buffer is sized for {label} only."


def evidence_text(label: str) -> str:
    return f"{label} evidence: ledger reconciliation reads the buffer line for {label} only."


@dataclass
class Projects:
    root: Path
    kong: FixtureRepo
    dsn: str
    env: dict[str, str]
    ids: dict[str, str]  # "alpha"/"bravo" -> the project id in the store

    def mem(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", "--dsn", self.dsn, *args],
            cwd=self.kong.root, env=self.env, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> Projects:
    """The seed's repository; the same line (buffer.rs:42, alice's commit) remembered by two
    projects, each in its own words, ingested by `mem ingest --project`."""
    root = tmp_path_factory.mktemp("isolation")
    suffix = uuid.uuid4().hex[:6]
    world = Projects(root, kong_repo(root / "kong"), store_dsn, _env(root),
                     {key: f"{key}-{suffix}" for key in PROJECTS})  # fmt: skip
    for key, label in PROJECTS.items():
        rows = [
            {"type": "node", "id": "m", "level": "L1", "query_id": "q-ledger",
             "text": summary_text(label), "created_at": "2026-08-20T08:00:00Z"},
            {"type": "node", "id": "e", "level": "L0", "query_id": "q-ledger",
             "text": evidence_text(label), "parents": ["m"],
             "anchors": [{"file": BUFFER, "line": 42}], "created_at": "2026-08-20T07:00:00Z"},
        ]  # fmt: skip
        # A second piece of evidence in alice's commit, named there literally: by-commit
        # then has two anchors per project, so its pages can be followed.
        rows.append(
            {"type": "node", "id": "e2", "level": "L0", "query_id": "q-ledger",
             "text": f"{label} second evidence: the line above, for {label} only.",
             "anchors": [{"file": BUFFER, "line": 41, "commit": world.kong.commits["abc123"]}],
             "created_at": "2026-08-20T07:30:00Z"}
        )  # fmt: skip
        source = root / f"{key}.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
        done = world.mem("ingest", str(source), "--repo", str(world.kong.root),
                         "--project", world.ids[key])  # fmt: skip
        assert done.returncode == 0, done.stderr
    return world


# -- the lookups, in the request models' words --------------------------------------------------

ALICE_COMMIT = "<alice's commit>"  # filled in from the fixture repository
LOOKUPS: dict[str, tuple[str, dict[str, Any]]] = {
    "by-git one line": ("by_git", {"file": BUFFER, "line": 42}),
    "by-git range": ("by_git", {"file": BUFFER, "lines": [40, 44]}),
    "by-git whole file": ("by_git", {"file": BUFFER, "line": 0}),
    "by-git in a commit": ("by_git", {"file": BUFFER, "line": 42, "commit_sha": ALICE_COMMIT}),
    "by-commit": ("by_commit", {"commit_sha": ALICE_COMMIT}),
    "by-author": ("by_author", {"author": "alice@org.test"}),
    "query": ("query", {"query": "ledger reconciliation", "git_repo": REPO}),
}


def filled(two: Projects, body: dict[str, Any]) -> dict[str, Any]:
    sha = two.kong.commits["abc123"]
    return {k: sha if v == ALICE_COMMIT else v for k, v in body.items()}


def nodes_in(value: object) -> Iterator[dict[str, Any]]:
    """Every node object anywhere in a response (top level, parents, nested)."""
    if isinstance(value, dict):
        if isinstance(value.get("text"), str) and "level" in value:
            yield value
        for item in value.values():
            yield from nodes_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from nodes_in(item)


def problems(response: dict[str, Any], key: str) -> list[str]:
    """What is wrong with ``key``'s project's response: its memories missing or not cited at
    buffer.rs:42, or any memory of the other project in it."""
    label = PROJECTS[key]
    other = next(v for k, v in PROJECTS.items() if k != key)
    nodes = list(nodes_in(response))
    texts = {n["text"] for n in nodes}
    found = []
    for text in (summary_text(label), evidence_text(label)):
        if text not in texts:
            found.append(f"missing {text!r}")
    refs = {n["git_ref"] for n in nodes if n["text"] == evidence_text(label) and n["level"] == "L0"}
    if refs - {CITED}:
        found.append(f"evidence cited at {sorted(refs)}")
    leaked = [t for t in texts if other in t]
    if leaked:
        found.append(f"the other project's {leaked}")
    return found


# -- the surfaces ------------------------------------------------------------------------------


class Asker(Protocol):
    async def __call__(self, tool: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The response of a lookup; None when this surface does not offer it."""
        ...


def _cli_has(*argv: str) -> bool:
    """Whether `mem` parses these arguments (an option a command may not have yet)."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            build_parser().parse_args(list(argv))
        except SystemExit:
            return False
    return True


def cli_argv(two: Projects, tool: str, body: dict[str, Any]) -> list[str] | None:
    repo = ["--repo", str(two.kong.root)]
    limit = ["--limit", str(body["limit"])] if "limit" in body else []
    if tool == "by_git":
        lines = body.get("lines")
        where = (
            f"{body['file']}:{lines[0]}-{lines[1]}"
            if lines
            else f"{body['file']}:{body['line']}"
            if body.get("line")
            else body["file"]
        )
        commit = ["--commit", body["commit_sha"]] if "commit_sha" in body else []
        return ["by-git", where, *repo, *commit]
    if tool == "query":
        return ["query", body["query"], "--git-repo", body["git_repo"]]
    argv = [tool.replace("_", "-"), body.get("commit_sha") or body["author"], *repo, *limit]
    return argv if _cli_has(*argv) else None


@asynccontextmanager
async def cli(two: Projects, key: str) -> AsyncIterator[Asker]:
    async def ask(tool: str, body: dict[str, Any]) -> dict[str, Any] | None:
        argv = cli_argv(two, tool, body)
        if argv is None:
            return None  # (`mem by-commit` and `mem by-author` may not take --limit yet)
        done = two.mem(*argv, "--project", two.ids[key], "--json")
        assert done.returncode == 0, (argv, done.stderr)
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    yield ask


@contextlib.contextmanager
def _http_per_project(two: Projects, label: str, *repo: str) -> Iterator[dict[str, str]]:
    """A `mem http` for each project (serving the work trees ``repo``): key -> base URL."""
    servers: list[subprocess.Popen[bytes]] = []
    bases: dict[str, str] = {}
    try:
        for key, project in two.ids.items():
            port = free_port()
            log = two.root / f"http-{label}-{key}.log"
            with log.open("wb") as err:
                server = subprocess.Popen(
                    [sys.executable, "-m", "poimen_memory.cli", "--dsn", two.dsn, "http",
                     *repo, "--project", project, "--port", str(port)],
                    env={**two.env, "POIMEN_CACHE_DIR": str(two.root / f"cache-{label}-{key}")},
                    cwd=two.root, stdout=subprocess.DEVNULL, stderr=err,
                )  # fmt: skip
            servers.append(server)
            bases[key] = f"http://127.0.0.1:{port}"
            wait_until_healthy(bases[key], server, log)
        yield bases
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)


@pytest.fixture(scope="module")
def http_servers(two: Projects) -> Iterator[dict[str, str]]:
    """A `mem http` for each project, serving the repository's work tree."""
    with _http_per_project(two, "tree", "--repo", str(two.kong.root)) as bases:
        yield bases


@asynccontextmanager
async def http(base: str) -> AsyncIterator[Asker]:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:

        async def ask(tool: str, body: dict[str, Any]) -> dict[str, Any] | None:
            if tool == "query":
                response = await client.get("/memory/query", params=body)
            else:
                response = await client.post(f"/memory/nodes/{tool.replace('_', '-')}", json=body)
            assert response.status_code == 200, (tool, body, response.text)
            answer: dict[str, Any] = response.json()
            return answer

        yield ask


def lsp_world(two: Projects) -> LspWorld:
    return LspWorld(two.root, two.kong, two.dsn, two.root / "no-git-log", two.root, two.env)


@asynccontextmanager
async def lsp(two: Projects, key: str) -> AsyncIterator[Asker]:
    options = {"poimenMemory": {"dsn": two.dsn, "project": two.ids[key]}}
    client = await start_client(lsp_world(two), "visual-studio-code", options)
    command = {"by_git": commands.BY_GIT, "by_commit": commands.BY_COMMIT,
               "by_author": commands.BY_AUTHOR, "query": commands.QUERY}  # fmt: skip

    async def ask(tool: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if tool == "by_git":
            body = {**body, "repo": REPO}
        answer = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command[tool], [body])
        )
        assert isinstance(answer, dict)
        return answer

    try:
        yield ask
    finally:
        await client.shutdown_session()
        await client.stop()


@asynccontextmanager
async def mcp(two: Projects, key: str) -> AsyncIterator[Asker]:
    world = McpWorld(two.root, two.kong, two.dsn, two.ids[key], two.env)
    async with stdio(world, *world.serve_args()) as client:

        async def ask(tool: str, body: dict[str, Any]) -> dict[str, Any] | None:
            answer: dict[str, Any] = (await call(client, tool, body)).structured_content
            return answer

        yield ask


SURFACES = ["cli", "http", "lsp", "mcp"]


@pytest.mark.parametrize("key", list(PROJECTS))
@pytest.mark.parametrize("surface", SURFACES)
async def test_every_lookup_answers_with_its_own_projects_memories_only(
    surface: str, key: str, two: Projects, request: pytest.FixtureRequest
) -> None:
    if surface == "http":
        servers: dict[str, str] = request.getfixturevalue("http_servers")
        opened = http(servers[key])
    else:
        opened = {"cli": cli, "lsp": lsp, "mcp": mcp}[surface](two, key)
    wrong: dict[str, list[str]] = {}
    asked = []
    async with opened as ask:
        for name, (tool, body) in LOOKUPS.items():
            response = await ask(tool, filled(two, body))
            if response is None:
                continue
            asked.append(name)
            found = problems(response, key)
            if found:
                wrong[name] = found
    assert wrong == {}
    assert set(asked) == set(LOOKUPS)  # every lookup is offered everywhere


# -- the editor's own lookups: hover and code lenses -------------------------------------------


@pytest.mark.parametrize("key", list(PROJECTS))
async def test_hover_and_code_lenses_show_only_their_projects_memories(
    key: str, two: Projects
) -> None:
    label = PROJECTS[key]
    other = next(v for k, v in PROJECTS.items() if k != key)
    world = lsp_world(two)
    options = {"poimenMemory": {"dsn": two.dsn, "project": two.ids[key]}}
    client = await start_client(world, "visual-studio-code", options)
    try:
        uri = open_doc(client, world, BUFFER)
        shown = hover_text(await hover(client, uri, 42))
        assert f"{label} evidence" in shown
        assert f"{label} summary" in shown
        assert other not in shown
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(types.TextDocumentIdentifier(uri))
        )
        assert lenses is not None
        titles = {lens.range.start.line: lens.command.title for lens in lenses if lens.command}
        # Line 41 was Carol's in alice's commit: the second evidence, named there, is cited at
        # its origin, next to line 42's; one lens covers the block.
        assert titles == {
            0: "2 memories in this file",
            40: "2 memories · Alice, Carol · Increase buffer",
        }
        for lens in lenses:
            assert lens.command is not None
            data = (lens.command.arguments or [None])[0]
            resolved = await client.code_lens_resolve_async(
                types.CodeLens(range=lens.range, data=data)
            )
            assert resolved.command is not None
            result = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    resolved.command.command, list(resolved.command.arguments or [])
                )
            )
            assert isinstance(result, dict)
            assert problems(result, key) == [], lens.range.start.line
    finally:
        await client.shutdown_session()
        await client.stop()


# -- what has no work tree, and what comes in pages --------------------------------------------


@pytest.fixture(scope="module")
def http_without_checkouts(two: Projects) -> Iterator[dict[str, str]]:
    """A `mem http` for each project with no work tree at all (a team server with no clone)."""
    with _http_per_project(two, "bare") as bases:
        yield bases


@pytest.mark.parametrize("key", list(PROJECTS))
async def test_by_git_without_a_work_tree_answers_its_own_project_only(
    key: str, two: Projects, http_without_checkouts: dict[str, str]
) -> None:
    async with http(http_without_checkouts[key]) as ask:
        response = await ask("by_git", {"file": BUFFER, "line": 42, "repo": REPO})
    assert response is not None
    assert response["mapped"] is False
    assert problems(response, key) == []


@pytest.mark.parametrize("key", list(PROJECTS))
@pytest.mark.parametrize("tool", ["by_commit", "by_author"])
async def test_every_page_holds_its_own_projects_evidence_only(
    key: str, tool: str, two: Projects, http_servers: dict[str, str]
) -> None:
    label = PROJECTS[key]
    other = next(v for k, v in PROJECTS.items() if k != key)
    body = filled(
        two, {"commit_sha": ALICE_COMMIT} if tool == "by_commit" else {"author": "alice@org.test"}
    )
    texts: list[str] = []
    pages = 0
    async with http(http_servers[key]) as ask:
        cursor = None
        while True:
            response = await ask(
                tool, {**body, "limit": 1, **({"cursor": cursor} if cursor else {})}
            )
            assert response is not None
            pages += 1
            texts += [n["text"] for n in nodes_in(response)]
            cursor = response.get("cursor")
            if not response["truncated"]:
                break
            assert cursor, response
    assert pages == 2  # two anchors of this project, one a page, the other project's not counted
    assert {t for t in texts if t.startswith(f"{label} ") and "evidence" in t} == {
        evidence_text(label),
        f"{label} second evidence: the line above, for {label} only.",
    }
    assert not [t for t in texts if other in t]
