"""The guards hold where the other tests could not tell: the allowed origin is matched exactly,
a token limited to projects never reaches the server's own default project, MCP over HTTP
checks the Host itself and refuses a token limited to projects, `remember` starts no
fsmonitor, each of git's two transport pins holds on its own, and the lookup with no work tree
answers for the project the request names. Real `mem http`, `mem mcp` and `mem` processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters

from ..gitrepo import ALICE, FixtureRepo, kong_repo
from ..serving import free_port, mem_http, mem_mcp_http
from .conftest import PROJECT, Faults

TOKEN = "t0ken-for-guard-tests"
REPO = "github.com/org/poimen"
BUFFER = "src/kong/buffer.rs"
BY_GIT = {"file": BUFFER, "line": 42}
APP = "http://localhost:3000"


def _refused(response: httpx.Response, status: int, field: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["field"] == field, response.text
    assert response.json()["error"].startswith(f"{field}:"), response.text


def _serving(faults: Faults, *args: str, cwd: Path | None = None) -> Any:
    """``mem http ARGS`` on a free loopback port, run in ``cwd`` (default: outside any
    work tree); yields its base URL."""
    where = cwd or faults.root
    return mem_http(args, faults.env, where / f"http-{uuid.uuid4().hex[:8]}.log")


def _texts(value: object) -> set[str]:
    """The text of every node anywhere in an answer."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("text"), str) and "level" in value:
            found.add(value["text"])
        for item in value.values():
            found |= _texts(item)
    elif isinstance(value, list):
        for item in value:
            found |= _texts(item)
    return found


def _memory(text: str, line: int = 42, **anchor: Any) -> list[dict[str, Any]]:
    """One piece of evidence at buffer.rs:``line`` and a summary above it."""
    return [
        {"type": "node", "id": "m", "level": "L1", "query_id": "q-guard",
         "text": f"{text} (summary)", "created_at": "2026-08-20T08:00:00Z"},
        {"type": "node", "id": "e", "level": "L0", "query_id": "q-guard", "text": text,
         "parents": ["m"], "anchors": [{"file": BUFFER, "line": line, **anchor}],
         "created_at": "2026-08-20T07:00:00Z"},
    ]  # fmt: skip


# -- 1. the allowed origin, exactly -------------------------------------------------------------


@pytest.fixture(scope="module")
def allowing(faults: Faults) -> Iterator[str]:
    """``mem http`` letting in the web pages of http://localhost:3000 only."""
    args = ("--repo", str(faults.kong.root), "--project", PROJECT, "--allow-origin", APP)
    with _serving(faults, *args) as url:
        yield url


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:3000.evil.example",  # the allowed one is a prefix of it
        "http://localhost:30001",
        "http://localhost:300",  # a prefix of the allowed one
        "http://localhost:3000@evil.example",
        "http://localhost:3000/evil",
        "http://evil.localhost:3000",  # the allowed one's host is a suffix of it
        "http://xlocalhost:3000",
        "https://localhost:3000",  # another scheme
        "ws://localhost:3000",
        "http://localhost",
        "http://127.0.0.1:3000",  # the same machine, but another origin
        "http://localhost:3000 http://evil.example",
        "null",
    ],
)
def test_only_the_exact_allowed_origin_is_let_in(allowing: str, origin: str) -> None:
    url = f"{allowing}/memory/nodes/by-git"
    r = httpx.post(url, json=BY_GIT, headers={"Origin": origin})
    _refused(r, 403, "origin")
    assert "access-control-allow-origin" not in r.headers
    r = httpx.get(
        f"{allowing}/memory/query", params={"query": "buffer"}, headers={"Origin": origin}
    )
    _refused(r, 403, "origin")
    preflight = httpx.options(
        url, headers={"Origin": origin, "Access-Control-Request-Method": "POST"}
    )
    _refused(preflight, 403, "origin")
    assert "access-control-allow-origin" not in preflight.headers
    # The allowed one itself is let in, with its CORS header.
    r = httpx.post(url, json=BY_GIT, headers={"Origin": APP})
    assert r.status_code == 200, r.text
    assert r.json()["nodes"]
    assert r.headers["access-control-allow-origin"] == APP


# -- 2. a token limited to projects and the server's default project ---------------------------


@pytest.fixture(scope="module")
def limited(faults: Faults) -> Iterator[tuple[str, str]]:
    """``mem http`` whose default project is not one of its token's: (base URL, default)."""
    default = f"default-{uuid.uuid4().hex[:6]}"
    done = faults.ingest(_memory("Default project's own words at the buffer line."), default)
    assert done.returncode == 0, done.stderr
    args = (
        "--repo", str(faults.kong.root), "--project", default, "--token", TOKEN,
        "--token-project", PROJECT, "--token-project", "spare",
    )  # fmt: skip
    with _serving(faults, *args) as url:
        yield url, default


def test_a_token_limited_to_projects_never_reaches_the_servers_default_project(
    faults: Faults, limited: tuple[str, str]
) -> None:
    url, default = limited
    auth = {"Authorization": f"Bearer {TOKEN}"}
    commit = faults.kong.commits["abc123"]
    posts = {
        "/memory/nodes/by-git": BY_GIT,
        "/memory/why": BY_GIT,
        "/memory/nodes/by-commit": {"commit_sha": commit},
        "/memory/nodes/by-author": {"author": ALICE[1]},
        "/memory/remember": {"text": "Written into the default project.", **BY_GIT},
    }
    for path, body in posts.items():
        r = httpx.post(f"{url}{path}", json=body, headers=auth, timeout=30)
        _refused(r, 403, "project")
        assert default in r.json()["error"], (path, r.text)
    r = httpx.get(f"{url}/memory/query", params={"query": "buffer line"}, headers=auth)
    _refused(r, 403, "project")
    # Its own project, named, is served, and nothing of the default's is in it...
    r = httpx.post(f"{url}/memory/nodes/by-git", json={**BY_GIT, "project": PROJECT}, headers=auth)
    assert r.status_code == 200, r.text
    texts = _texts(r.json())
    assert "Raised BODY_BUFFER from 8MB to 16MB." in texts
    assert not [t for t in texts if "default project" in t.lower()], texts
    # ...and nothing was written into the default project.
    check = faults.mem(
        "by-git", f"{BUFFER}:42", "--repo", str(faults.kong.root), "--project", default, "--json"
    )
    assert check.returncode == 0, check.stderr
    assert _texts(json.loads(check.stdout)) == {
        "Default project's own words at the buffer line.",
        "Default project's own words at the buffer line. (summary)",
    }


# -- 3. and 4. MCP over HTTP: its own Host check; no token limited to projects -----------------


@contextmanager
def _mcp_http(faults: Faults, *args: str) -> Iterator[str]:
    """``mem mcp --http`` on a free loopback port; yields its MCP endpoint's URL."""
    argv = ["--repo", str(faults.kong.root), "--project", PROJECT, *args]
    with mem_mcp_http(argv, faults.env, faults.root) as url:
        yield url


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "guard-test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def test_mcp_over_http_refuses_a_foreign_host_before_the_sdk_sees_it(faults: Faults) -> None:
    with _mcp_http(faults) as url:
        port = int(url.split(":")[2].split("/")[0])
        for host in ("evil.example", f"evil.example:{port}", f"localhost:{port + 1}", "127.0.0.1"):
            r = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Host": host})
            _refused(r, 400, "host")  # the guard's words, not the SDK's
        # The very same initialize, sent to a name this server answers to, is served.
        for host in (f"127.0.0.1:{port}", f"LOCALHOST:{port}"):
            r = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Host": host})
            assert r.status_code == 200, (host, r.text)
            assert "poimen-memory" in r.text


@pytest.mark.parametrize("token", [[], ["--token", TOKEN]])
def test_mcp_over_http_refuses_a_token_limited_to_projects(
    faults: Faults, token: list[str]
) -> None:
    env = {"POIMEN_HTTP_TOKEN_PROJECTS": PROJECT}
    argv = ("mcp", "--http", "--port", str(free_port()), "--repo", str(faults.kong.root))
    try:
        done = faults.mem(*argv, *token, env=env, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("mem mcp --http served with POIMEN_HTTP_TOKEN_PROJECTS set")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("mem: error: POIMEN_HTTP_TOKEN_PROJECTS: "), done.stderr


# -- 5. remember starts no fsmonitor -----------------------------------------------------------


def _marker_program(bin_dir: Path, marker: Path) -> str:
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / f"leave-{marker.name}"
    script.write_text(f'#!/bin/sh\ntouch "{marker}"\nexit 1\n')
    script.chmod(0o755)
    return str(script)


def test_remember_never_starts_the_repositorys_fsmonitor(faults: Faults, tmp_path: Path) -> None:
    repo = kong_repo(tmp_path / "kong", remote=f"git@github.com:fsm/{uuid.uuid4().hex[:8]}.git")
    repo.set_line(BUFFER, 50, "let pending = 1; // not committed yet")
    marker = tmp_path / "fsmonitor-ran"
    # Set last: from here on a plain git in this repository would run it.
    repo.git("config", "core.fsmonitor", _marker_program(tmp_path / "bin", marker))
    project = ["--project", f"fsm-{uuid.uuid4().hex[:6]}"]
    for where, said in ((f"{BUFFER}:42", "Committed line remembered."),
                        (f"{BUFFER}:50", "Uncommitted line remembered.")):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", "remember", where, said, *project,
             "--json"],
            cwd=repo.root, env=faults.env, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["created"] is True, done.stdout
        assert answer["anchored" if where.endswith(":42") else "pending"], done.stdout
        assert not marker.exists(), f"remember {where} ran core.fsmonitor"
    # ...and the remembered line is there to be found.
    found = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", "by-git", f"{BUFFER}:42", *project,
         "--json"],
        cwd=repo.root, env=faults.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert "Committed line remembered." in _texts(json.loads(found.stdout))
    assert not marker.exists()


# -- 6. each of git's two transport pins, on its own --------------------------------------------


def _partial_clone(tmp_path: Path, name: str) -> FixtureRepo:
    """A partial clone of the kong history: HEAD's blobs are there, older ones are missing
    (blame fetches them lazily from the promisor remote, ``origin``)."""
    source = kong_repo(tmp_path / f"{name}-upstream")
    source.git("config", "uploadpack.allowFilter", "true")
    clone = tmp_path / name
    source.git("clone", "-q", "--filter=blob:none", source.root.as_uri(), str(clone))
    repo = FixtureRepo(clone, commits=dict(source.commits))
    missing = repo.git("rev-list", "--objects", "--missing=print", "--all")
    assert "?" in missing, "the partial clone has every object"
    return repo


def _by_git_in_a_session(
    faults: Faults, repo: FixtureRepo, env: dict[str, str], timeout: float
) -> tuple[subprocess.CompletedProcess[str] | None, float]:
    """``mem by-git`` on ``repo`` in a session of its own (its git processes killed with it
    when it takes longer than ``timeout``): its result (None: timed out) and its time."""
    argv = [sys.executable, "-m", "poimen_memory.cli", "by-git", f"{BUFFER}:42",
            "--repo", str(repo.root), "--project", f"partial-{uuid.uuid4().hex[:6]}"]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, env={**faults.env, **env}, cwd=repo.root, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, time.monotonic() - started
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), time.monotonic() - started


def test_a_partial_clone_never_even_starts_a_lazy_fetch(faults: Faults, tmp_path: Path) -> None:
    """GIT_NO_LAZY_FETCH on its own: the promisor remote is a large file with no line end,
    which ``git fetch`` reads one byte at a time to see whether it is a bundle, before any
    transport is checked against GIT_ALLOW_PROTOCOL. A fetch started at all takes minutes."""
    repo = _partial_clone(tmp_path, "partial")
    remote = tmp_path / "not-a-bundle"
    with remote.open("wb") as sparse:
        sparse.truncate(1 << 30)  # sparse: it takes no room on disk
    repo.git("config", "remote.origin.url", str(remote))
    done, seconds = _by_git_in_a_session(faults, repo, {}, timeout=30)
    assert done is not None, f"mem by-git still running after {seconds:.0f} s: a fetch started"
    assert seconds < 20, seconds
    assert "objects missing (a partial clone; nothing is fetched)" in done.stderr, done.stderr


def test_a_git_that_would_fetch_lazily_still_runs_no_transport(
    faults: Faults, tmp_path: Path
) -> None:
    """GIT_ALLOW_PROTOCOL on its own: a git that ignores GIT_NO_LAZY_FETCH (those before
    2.39.4, which do not know it; here the real git run with that variable taken out) does
    fetch a partial clone's missing object, through the transport the repository names: an
    ``ext::`` command its configuration allows."""
    repo = _partial_clone(tmp_path, "partial-ext")
    marker = tmp_path / "transport-ran"
    program = _marker_program(tmp_path / "bin", marker)
    repo.git("config", "protocol.allow", "always")
    repo.git("config", "remote.origin.url", f"ext::{program}")
    real_git = shutil.which("git")
    assert real_git is not None
    old_git = tmp_path / "old-git"
    old_git.mkdir()
    (old_git / "git").write_text(f'#!/bin/sh\nunset GIT_NO_LAZY_FETCH\nexec "{real_git}" "$@"\n')
    (old_git / "git").chmod(0o755)
    env = {"PATH": f"{old_git}{os.pathsep}{faults.env.get('PATH', '')}"}
    done, seconds = _by_git_in_a_session(faults, repo, env, timeout=60)
    assert done is not None, f"mem by-git still running after {seconds:.0f} s"
    assert not marker.exists(), "the repository's transport ran"
    # Such a git hands the refused fetch its objects wanted while it may already have quit:
    # it fails as the blame that asked for them, or is killed by the broken pipe.
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert (
        "objects missing (a partial clone; nothing is fetched)" in done.stderr
        or "git blame was stopped" in done.stderr
    ), done.stderr


# -- 7. the lookup with no work tree answers for the project named -----------------------------


@pytest.fixture(scope="module")
def two_projects(faults: Faults) -> dict[str, str]:
    """alpha and bravo, remembered at the same line of the same repository: key -> project."""
    suffix = uuid.uuid4().hex[:6]
    ids = {key: f"{key}-{suffix}" for key in ("alpha", "bravo")}
    for key, project in ids.items():
        label = key.capitalize()
        rows = _memory(f"{label} evidence at the buffer line, for {label} only.")
        rows.append(
            {"type": "node", "id": "e2", "level": "L0", "query_id": "q-guard",
             "text": f"{label} evidence in alice's commit, for {label} only.",
             "anchors": [{"file": BUFFER, "line": 42, "commit": faults.kong.commits["abc123"]}],
             "created_at": "2026-08-20T07:30:00Z"}
        )  # fmt: skip
        done = faults.ingest(rows, project)
        assert done.returncode == 0, done.stderr
    return ids


def _only(label: str, texts: set[str]) -> None:
    """``texts`` are ``label``'s memories, and there are some."""
    assert texts, f"{label}'s memories are missing"
    assert all(t.startswith(f"{label} ") for t in texts), sorted(texts)


BODIES: dict[str, dict[str, Any]] = {
    "one line": {"repo": REPO, "file": BUFFER, "line": 42},
    "a range": {"repo": REPO, "file": BUFFER, "lines": [40, 44]},
    "the whole file": {"repo": REPO, "file": BUFFER, "line": 0},
}


def test_the_lookup_without_a_work_tree_answers_for_the_project_named_over_http(
    faults: Faults, two_projects: dict[str, str]
) -> None:
    alpha, bravo = two_projects["alpha"], two_projects["bravo"]
    with _serving(faults, "--project", alpha) as url:  # no work tree: a team server
        for name, body in BODIES.items():
            r = httpx.post(f"{url}/memory/nodes/by-git", json={**body, "project": bravo})
            assert r.status_code == 200, (name, r.text)
            assert r.json()["mapped"] is False, name
            _only("Bravo", _texts(r.json()))
            # ...and, not named, the server's own.
            r = httpx.post(f"{url}/memory/nodes/by-git", json=body)
            assert r.status_code == 200, (name, r.text)
            _only("Alpha", _texts(r.json()))
        literal = {**BODIES["one line"], "commit_sha": faults.kong.commits["abc123"]}
        r = httpx.post(f"{url}/memory/nodes/by-git", json={**literal, "project": bravo})
        assert r.status_code == 200, r.text
        _only("Bravo", _texts(r.json()))


async def test_the_lookup_without_a_work_tree_answers_for_the_project_named_over_mcp(
    faults: Faults, two_projects: dict[str, str]
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "poimen_memory.cli", "mcp", "--project", two_projects["alpha"]],
        env=faults.env,
        cwd=faults.root,  # in no work tree
    )
    async with Client(params, read_timeout_seconds=60) as client:
        for name, body in BODIES.items():
            result = await client.call_tool("by_git", {**body, "project": two_projects["bravo"]})
            assert not result.is_error, (name, result.content)
            assert result.structured_content is not None
            assert result.structured_content["mapped"] is False
            _only("Bravo", _texts(result.structured_content))
