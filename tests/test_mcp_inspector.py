"""`mem mcp` driven by a second, independent client: the MCP Inspector's CLI (npm
`@modelcontextprotocol/inspector`), every tool called with `--tool-arg key=value` as a person
or a script would, against a real store with memories, the answers checked.

Two pinned versions: INSPECTOR, whose `tools/list --strict` reports tool-schema portability
problems (exit 6 on an error), over streamable HTTP (one server for the module) and stdio;
and TYPED_BY_TYPE, a CLI that types a `key=value` argument only from the property's top-level
`type` (it sent `line=42` as the string "42" while optional parameters were `anyOf` with
`null`). Each is installed once into a cache directory (`npm install --prefix`); without npm
the tests are skipped, unless POIMEN_REQUIRE_EDITORS=1 makes that a failure."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from poimen_memory.mcpserver import TOOL_NAMES

from .editors import REQUIRE_ENV, editors_required
from .test_mcp import REPO, World, serving_http
from .test_mcp import world as world

INSPECTOR = "2.12.0"
TYPED_BY_TYPE = "0.15.0"
PACKAGE = "@modelcontextprotocol/inspector"
BUFFER = "src/kong/buffer.rs"
HANDLER = "src/kong/handler.rs"


def _absent(reason: str) -> None:
    if editors_required():
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: a missing client is a failure)")
    pytest.skip(reason)


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "poimen-tests"


def installed(version: str) -> Path:
    """The Inspector's launcher at ``version``, installed into the cache once (a lock keeps
    two test runs from installing it at the same time)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        _absent("node and npm are needed to install the MCP Inspector")
    assert npm is not None
    prefix = _cache() / f"inspector-{version}"
    manifest = prefix / "node_modules" / PACKAGE / "package.json"
    launcher = prefix / "node_modules" / ".bin" / "mcp-inspector"
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix.parent / f"inspector-{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if manifest.exists() and json.loads(manifest.read_text())["version"] == version:
            return launcher
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--save-exact", f"{PACKAGE}@{version}"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            _absent(f"npm install {PACKAGE}@{version} failed: {last}")
    assert json.loads(manifest.read_text())["version"] == version
    return launcher


class Inspector:
    """The Inspector's CLI at one version, pointed at one `mem mcp` (an HTTP URL, or the
    command line of a stdio server)."""

    def __init__(self, launcher: Path, world: World, target: list[str]) -> None:
        self.launcher = launcher
        self.world = world
        self.target = target
        home = world.root / f"inspector-{uuid.uuid4().hex[:6]}"
        home.mkdir()
        # Its catalog and client config in a directory of the test's, never the user's.
        self.env = {
            **world.env,
            "MCP_CATALOG_PATH": str(home / "mcp.json"),
            "MCP_CLIENT_CONFIG_PATH": str(home / "client.json"),
        }

    def run(self, *options: str) -> subprocess.CompletedProcess[str]:
        # The server first: --tool-arg takes every word after it. A stdio server gets the
        # variables it needs, and nothing else of ours.
        served = [f"-e{n}={self.world.env[n]}" for n in ("POIMEN_CONFIG", "POIMEN_CACHE_DIR")]
        if self.target[0].startswith("http"):
            served = []
        return subprocess.run(
            [str(self.launcher), "--cli", *served, *self.target, *options],
            env=self.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def call(self, tool: str, *pairs: str, ok: bool = True) -> dict[str, Any]:
        """``tools/call`` with ``--tool-arg`` pairs; the result (a tool error when not ok)."""
        given = ["--tool-arg", *pairs] if pairs else []
        done = self.run("--method", "tools/call", "--tool-name", tool, *given)
        assert done.stdout, (tool, pairs, done.stderr)
        result = json.loads(done.stdout)
        result = result.get("result", result)  # --format json wraps it; older versions do not
        if ok:
            assert done.returncode == 0, (tool, pairs, done.stdout, done.stderr)
            assert result.get("isError") is not True, result
        else:
            assert result["isError"] is True, result
        return dict(result)


def text(result: dict[str, Any]) -> str:
    [block] = result["content"]
    assert block["type"] == "text"
    return str(block["text"])


def cites(result: dict[str, Any]) -> list[str]:
    return [n["git_ref"] for n in result["structuredContent"]["nodes"] if n["level"] == "L0"]


@pytest.fixture(scope="module")
def url(world: World) -> Iterator[str]:
    """One `mem mcp --http` for the module's calls."""
    with serving_http(world) as served:
        yield served


@pytest.fixture(scope="module")
def inspector(world: World, url: str) -> Inspector:
    return Inspector(installed(INSPECTOR), world, [url])


def stdio_server(world: World) -> list[str]:
    return [sys.executable, "-m", "poimen_memory.cli", "mcp", *world.serve_args()]


# -- tools/list ----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_tools_are_listed_and_their_schemas_pass_the_strict_portability_check(
    world: World, inspector: Inspector, transport: str
) -> None:
    client = inspector
    if transport == "stdio":
        client = Inspector(inspector.launcher, world, stdio_server(world))
    done = client.run("--method", "tools/list", "--strict", "--format", "json")
    assert done.returncode == 0, (done.stdout, done.stderr)  # 6: an unportable schema
    listed = json.loads(done.stdout)
    assert "schemaFindings" not in listed, listed.get("schemaFindings")
    tools = listed["result"]["tools"]
    assert [t["name"] for t in tools] == list(TOOL_NAMES)
    for tool in tools:
        schema = tool["inputSchema"]
        assert schema["additionalProperties"] is False, tool["name"]
        for name, prop in schema["properties"].items():
            assert prop["description"], (tool["name"], name)
            assert prop["type"] in {"string", "integer", "boolean", "array"}, (tool["name"], name)
            assert "anyOf" not in prop, (tool["name"], name)


# -- tools/call, every tool ----------------------------------------------------------------


def test_why(world: World, inspector: Inspector) -> None:
    alice = world.kong.commits["abc123"]
    why = inspector.call("why", f"file={BUFFER}", "line=42")
    assert text(why).startswith(f"1 memory for {BUFFER}:42 in {REPO}")
    assert "Uploads of 16MB now pass; larger ones get a 413." in text(why)
    assert f"{BUFFER}:42 (commit {alice[:7]})" in text(why)
    assert [n["level"] for n in why["structuredContent"]["nodes"]] == ["L0", "L1", "L2"]
    assert cites(inspector.call("why", f"file={BUFFER}", "line=41")) == []


def test_by_git(inspector: Inspector) -> None:
    ranged = inspector.call("by_git", f"file={BUFFER}", "lines=[40,44]")
    assert cites(ranged) == [f"{BUFFER}:42"]
    whole = inspector.call("by_git", f"file={HANDLER}")
    assert cites(whole) == [f"{HANDLER}:10"]
    assert whole["structuredContent"]["mapped"] is True


def test_by_commit(world: World, inspector: Inspector) -> None:
    bob = world.kong.commits["def456"]
    by_commit = inspector.call("by_commit", f"commit_sha={bob}", "limit=1")
    assert cites(by_commit) == [f"{HANDLER}:10"]
    assert f"{HANDLER}:10 (commit {bob[:7]})" in text(by_commit)
    assert by_commit["structuredContent"]["truncated"] is False


def test_by_author(world: World, inspector: Inspector) -> None:
    by_author = inspector.call("by_author", "author=alice@org.test", "limit=5")  # .mailmap
    assert cites(by_author) == [f"{BUFFER}:42"]
    assert f"(commit {world.kong.commits['abc123'][:7]})" in text(by_author)


def test_query(inspector: Inspector) -> None:
    query = inspector.call("query", "query=streams bodies", f"git_repo={REPO}", "limit=3")
    assert cites(query) == [f"{HANDLER}:10"]
    assert "Handler streams bodies larger than BODY_BUFFER." in text(query)


def test_remember_then_why(world: World, inspector: Inspector) -> None:
    evidence = f"Line 20 stays a comment: a parser test counts them ({uuid.uuid4().hex[:8]})."
    done = inspector.call("remember", f"text={evidence}", f"file={HANDLER}", "line=20")
    answer = done["structuredContent"]
    initial = world.kong.commits["initial"]
    assert answer["anchored"] == [
        {"commit": initial, "file": HANDLER, "line_start": 20, "line_end": 20}
    ]
    assert (answer["created"], answer["pending"]) == (True, [])
    assert f"anchored: {HANDLER}:20 (commit {initial[:7]})" in text(done)
    why = inspector.call("why", f"file={HANDLER}", "line=20")
    assert evidence in text(why)
    assert cites(why) == [f"{HANDLER}:20"]


def test_blame(world: World, inspector: Inspector) -> None:
    blame = inspector.call("blame", f"file={BUFFER}", "verify=true")["structuredContent"]
    assert blame["verified"] is True
    assert len(blame["lines"]) == 60
    assert blame["lines"][41]["commit"] == world.kong.commits["abc123"]


def test_status(inspector: Inspector) -> None:
    status = inspector.call("status")  # no argument at all
    assert (
        status["structuredContent"]["schema_version"]
        == (status["structuredContent"]["latest_version"])
    )
    assert status["structuredContent"]["nodes"]["L0"] >= 2
    assert "schema version" in text(status)


def test_resolve_pending(world: World, inspector: Inspector) -> None:
    # Lines remembered before their commit wait; once committed, resolve_pending anchors them.
    world.kong.write("src/kong/pending.rs", "fn pending() {}\n")
    waiting = inspector.call(
        "remember", "text=pending.rs is new; it waits for its commit", "file=src/kong/pending.rs",
        "line=1",
    )["structuredContent"]  # fmt: skip
    assert [p["file"] for p in waiting["pending"]] == ["src/kong/pending.rs"]
    world.kong.commit("pending", "Add pending.rs", ("Dana", "dana@org.test"))
    done = inspector.call("resolve_pending", f"project={world.project}")["structuredContent"]
    assert done["expired"] == 0
    assert done["repos"] == [
        {"project": world.project, "repo": REPO, "anchors": 1,
         "files": ["src/kong/pending.rs"], "skipped": None}
    ]  # fmt: skip


def test_mistakes_are_tool_errors_naming_the_argument(inspector: Inspector) -> None:
    unknown = inspector.call("why", f"file={BUFFER}", "line=42", "bogus=1", ok=False)
    assert text(unknown) == (
        "bogus: not an argument of why (it takes project, file, line, lines, repo, history)"
    )
    zero = inspector.call("why", f"file={BUFFER}", "line=0", ok=False)
    assert text(zero) == "line: expected a line number >= 1, got 0"
    short = inspector.call("by_commit", "commit_sha=abc", ok=False)
    assert text(short).startswith("commit_sha: expected 4 to 64 hex digits")


# -- a client that types arguments only from `type` ------------------------------------------


def test_a_client_that_reads_only_the_type_sends_numbers_arrays_and_booleans(
    world: World,
) -> None:
    client = Inspector(installed(TYPED_BY_TYPE), world, stdio_server(world))
    why = client.call("why", f"file={BUFFER}", "line=42")
    assert cites(why) == [f"{BUFFER}:42"]
    ranged = client.call("by_git", f"file={BUFFER}", "lines=[40,44]", "history=0")
    assert cites(ranged) == [f"{BUFFER}:42"]
    blame = client.call("blame", f"file={BUFFER}", "verify=true")
    assert blame["structuredContent"]["verified"] is True


def test_installing_twice_is_a_no_op() -> None:
    first = installed(INSPECTOR)
    manifest = first.parent.parent / PACKAGE / "package.json"
    before = manifest.stat().st_mtime_ns
    assert installed(INSPECTOR) == first
    assert manifest.stat().st_mtime_ns == before
