"""`mem mcp` with no --repo serves the work tree it was started in and, on stdio, those of the
client's roots (the MCP `roots` capability): asked after the handshake and again when the
client says they changed. The official SDK's client over stdio, a real `mem mcp` subprocess,
real git repositories and Postgres."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp import types as mcp_types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from .gitrepo import kong_repo
from .test_mcp import REPO, World, call, cites, refused, text_of
from .test_mcp import world as world

BUFFER = "src/kong/buffer.rs"


class Roots:
    """What the client offers as its roots, and how often the server asked for them."""

    def __init__(self, *dirs: Path) -> None:
        self.dirs = list(dirs)
        self.asked = 0

    async def __call__(self, context: ClientRequestContext) -> mcp_types.ListRootsResult:
        self.asked += 1
        return mcp_types.ListRootsResult(
            roots=[mcp_types.Root(uri=d.as_uri(), name=d.name) for d in self.dirs]
        )


@asynccontextmanager
async def started_in(
    world: World, cwd: Path, roots: Roots | None, *args: str
) -> AsyncIterator[Client]:
    """A handshake-era client (as the editors and Claude Code are) of `mem mcp ARGS` started
    in ``cwd``, offering ``roots`` when given."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "poimen_memory.cli", "mcp", "--project", world.project, "--dsn", world.dsn,
              *args],
        env=world.env,
        cwd=str(cwd),
    )  # fmt: skip
    async with Client(
        params, mode="legacy", list_roots_callback=roots, read_timeout_seconds=60
    ) as client:
        yield client


def elsewhere(world: World, name: str) -> Path:
    """A directory in no git work tree."""
    path = world.root / name
    path.mkdir(exist_ok=True)
    return path


async def test_the_client_roots_are_served_by_a_server_started_outside_any_repository(
    world: World,
) -> None:
    roots = Roots(world.kong.root / "src")  # a folder inside the work tree: the tree is served
    async with started_in(world, elsewhere(world, "home"), roots) as client:
        why = await call(client, "why", {"file": BUFFER, "line": 42})
        assert roots.asked == 1
        assert why.structured_content["mapped"] is True
        assert cites(why) == [f"{BUFFER}:42"]
        alice = world.kong.commits["abc123"]
        assert f"{BUFFER}:42 (commit {alice[:7]})" in text_of(why)
        absolute = await call(client, "why", {"file": str(world.kong.root / BUFFER), "line": 42})
        assert absolute.structured_content == why.structured_content
        assert roots.asked == 1  # asked once, not per call


async def test_without_roots_the_work_tree_it_was_started_in_is_served(world: World) -> None:
    async with started_in(world, world.kong.root / "src", None) as client:
        why = await call(client, "why", {"file": BUFFER, "line": 42})
        assert why.structured_content["mapped"] is True
        assert cites(why) == [f"{BUFFER}:42"]
    # Started outside any work tree, with no roots: the memories as stored, not mapped.
    async with started_in(world, elsewhere(world, "bare"), None) as client:
        unmapped = await call(client, "why", {"file": BUFFER, "line": 42})
        assert unmapped.structured_content["mapped"] is False
        message = await refused(client, "why", {"file": str(world.kong.root / BUFFER), "line": 1})
        assert "is not in a work tree this server serves" in message


async def test_a_repo_given_at_start_is_served_alone(world: World, tmp_path: Path) -> None:
    other = kong_repo(tmp_path / "other", remote="git@github.com:org/other.git")
    roots = Roots(other.root)
    args = ("--repo", str(world.kong.root))
    async with started_in(world, elsewhere(world, "pinned"), roots, *args) as client:
        why = await call(client, "why", {"file": BUFFER, "line": 42})
        assert cites(why) == [f"{BUFFER}:42"]
        message = await refused(client, "why", {"file": str(other.root / BUFFER), "line": 42})
        assert "is not in a work tree this server serves" in message
    assert roots.asked == 0


async def test_roots_that_change_are_asked_again(world: World, tmp_path: Path) -> None:
    # A space in the path: the root's URI has %20, the server reads it as the path.
    other = kong_repo(tmp_path / "other repo", remote="git@github.com:org/other.git")
    roots = Roots(world.kong.root)
    async with started_in(world, elsewhere(world, "moving"), roots) as client:
        assert cites(await call(client, "why", {"file": BUFFER, "line": 42})) == [f"{BUFFER}:42"]
        roots.dirs = [other.root]
        with pytest.warns(MCPDeprecationWarning):  # 2026-07-28 drops roots; handshake keeps them
            await client.send_roots_list_changed()
        moved = await call(client, "why", {"file": str(other.root / BUFFER), "line": 42})
        assert roots.asked == 2
        assert moved.structured_content["repo"] == "github.com/org/other"
        assert moved.structured_content["nodes"] == []  # nothing remembered there
        message = await refused(client, "why", {"file": str(world.kong.root / BUFFER), "line": 42})
        assert "is not in a work tree this server serves" in message


async def test_a_relative_file_is_looked_up_in_the_root_that_has_it(
    world: World, tmp_path: Path
) -> None:
    other = kong_repo(tmp_path / "other", remote="git@github.com:org/other.git")
    other.write("only-here.rs", "fn main() {}\n")
    other.commit("only", "Add a file of its own", ("Dana", "dana@org.test"))
    outside = elsewhere(world, "not-a-repo")
    roots = Roots(world.kong.root, other.root, outside)  # a root in no work tree is left out
    async with started_in(world, elsewhere(world, "two"), roots) as client:
        mine = await call(client, "why", {"file": "only-here.rs", "line": 1})
        assert mine.structured_content["repo"] == "github.com/org/other"
        both = await refused(client, "why", {"file": BUFFER, "line": 42})
        assert both == (
            f"repo: required: {BUFFER!r} is in several work trees served "
            f"(github.com/org/other, {REPO}); name one"
        )
        named = await call(client, "why", {"file": BUFFER, "line": 42, "repo": REPO})
        assert cites(named) == [f"{BUFFER}:42"]
