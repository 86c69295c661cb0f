"""M3.5.9 acceptance (seed 000): git-aware memory references, end to end.

A real repository is built per the seed's setup (alice's "Increase buffer" touching
src/kong/buffer.rs:42, bob's "Handle large bodies" touching src/kong/handler.rs:10), memories
are loaded with the real `mem ingest` command, and looked up through a real `mem http` server
over loopback and through the service.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from poimen_memory.domain import ProjectId
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupService,
    QueryRequest,
    build_service,
)
from poimen_memory.store import Store

from .gitrepo import ALICE, BOB, FixtureRepo, kong_repo

PROJECT = "poimen"
REPO = "github.com/org/poimen"
FORK = "github.com/someone/kong-fork"


def memories(extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [
        {"type": "node", "id": "s1", "level": "L2", "text": "Kong platform: request bodies are buffered up to 16MB and streamed beyond.", "created_at": "2026-08-20T09:00:00Z"},
        {"type": "node", "id": "m1", "level": "L1", "query_id": "q-buffer", "text": "Kong body buffer raised to 16MB so 16MB uploads pass.", "parents": ["s1"], "created_at": "2026-08-20T08:00:00Z"},
        {"type": "node", "id": "e1", "level": "L0", "query_id": "q-buffer", "text": "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module.", "parents": ["m1"], "anchors": [{"file": "src/kong/buffer.rs", "line": 42}], "created_at": "2026-08-20T07:00:00Z"},
        {"type": "node", "id": "e1b", "level": "L0", "query_id": "q-buffer", "text": "Benchmarked uploads with the 16MB buffer: no regression.", "parents": ["m1"], "anchors": [{"file": "src/kong/buffer.rs", "line": 42}], "created_at": "2026-08-20T07:30:00Z"},
        {"type": "node", "id": "m2", "level": "L1", "query_id": "q-large", "text": "Large bodies are streamed instead of rejected with 413.", "parents": ["s1"], "created_at": "2026-08-20T08:10:00Z"},
        {"type": "node", "id": "e2", "level": "L0", "query_id": "q-large", "text": "Handler streams bodies larger than BODY_BUFFER.", "parents": ["m2"], "anchors": [{"file": "src/kong/handler.rs", "line": 10}], "created_at": "2026-08-20T07:10:00Z"},
        {"type": "node", "id": "e3", "level": "L0", "query_id": "q-tune", "text": "Tuned the buffer module's comment on line 10.", "anchors": [{"file": "src/kong/buffer.rs", "line": 10}], "created_at": "2026-08-20T07:20:00Z"},
        {"type": "node", "id": "old", "level": "L0", "query_id": "q-old", "text": "Old evidence recorded before git enrichment existed.", "created_at": "2026-01-01T00:00:00Z"},
        *(extra or []),
    ]  # fmt: skip


@dataclass
class World:
    kong: FixtureRepo
    fork: FixtureRepo
    dsn: str
    env: dict[str, str]
    base: str
    service: LookupService

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.base}{path}", json=body, timeout=10)

    def by_git(self, **body: Any) -> dict[str, Any]:
        r = self.post("/memory/nodes/by-git", {"project": PROJECT, "repo": REPO, **body})
        assert r.status_code == 200, r.text
        return r.json()

    def mem(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> Iterator[World]:
    base = tmp_path_factory.mktemp("refs")
    kong = kong_repo(base / "kong")
    kong.set_line("src/kong/buffer.rs", 10, "// buffer: sizes are in bytes")
    kong.commit("ghi789", "Document buffer units", BOB)
    # A fork with the same file names and a different history.
    fork = FixtureRepo.create(base / "fork", "https://github.com/someone/kong-fork.git")
    fork.write("src/kong/buffer.rs", "".join(f"// fork line {i}\n" for i in range(1, 61)))
    fork.commit("fork", "Fork the kong module", BOB)
    env = {
        **os.environ,
        "POIMEN_DSN": store_dsn,
        "POIMEN_CACHE_DIR": str(base / "cache"),
        "POIMEN_CONFIG": str(base / "none.toml"),
    }
    inputs = write_jsonl(base / "memories.jsonl", memories())
    fork_input = write_jsonl(
        base / "fork.jsonl",
        [{"type": "node", "level": "L0", "query_id": "q-fork", "text": "Fork: buffer module rewritten for the fork.", "anchors": [{"file": "src/kong/buffer.rs", "line": 42}], "created_at": "2026-08-21T00:00:00Z"}],
    )  # fmt: skip
    for src, repo in ((inputs, kong), (fork_input, fork)):
        done = subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", "ingest", str(src), "--repo", str(repo.root), "--project", PROJECT],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    port = _free_port()
    log = (base / "http.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "poimen_memory.cli", "http", "--port", str(port), "--repo", str(kong.root), "--repo", str(fork.root),
         "--project", PROJECT],
        env=env, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            server.wait()
            log.close()
            raise AssertionError(f"mem http did not start: {(base / 'http.log').read_text()}")
        time.sleep(0.1)
    with Store(store_dsn) as store:
        service = build_service(
            store, [kong.root, fork.root], ProjectId(PROJECT), cache_path=base / "svc-cache.db"
        )
        try:
            yield World(kong, fork, store_dsn, env, url, service)
        finally:
            server.terminate()
            server.wait(10)
            log.close()


def texts(body: dict[str, Any], level: str | None = None) -> list[str]:
    return [n["text"] for n in body["nodes"] if level is None or n["level"] == level]


def node(body: dict[str, Any], prefix: str) -> dict[str, Any]:
    found = [n for n in body["nodes"] if n["text"].startswith(prefix)]
    assert len(found) == 1, [n["text"] for n in body["nodes"]]
    return found[0]


# -- the seed's acceptance tests ------------------------------------------------------------


def test_a1_by_git_lookup(world: World) -> None:
    body = world.by_git(file="src/kong/buffer.rs", line=42)
    assert body["repo"] == REPO
    assert sorted(texts(body, "L0")) == sorted([
        "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module.",
        "Benchmarked uploads with the 16MB buffer: no regression.",
    ])  # fmt: skip
    e1 = node(body, "Raised BODY_BUFFER")
    assert e1["git_commit"]["sha"] == world.kong.commits["abc123"]
    assert e1["git_context"]["commit_msg"] == "Increase buffer"
    assert e1["git_context"]["author"] == ALICE[1]
    # Newest first among the evidence.
    assert texts(body, "L0")[0].startswith("Benchmarked")
    # Parent memories are included (L1, then L2).
    assert [n["level"] for n in body["nodes"]] == ["L0", "L0", "L1", "L2"]


def test_a2_by_commit_lookup(world: World) -> None:
    r = world.post(
        "/memory/nodes/by-commit",
        {"repo": REPO, "commit_sha": world.kong.commits["abc123"][:7], "project": PROJECT},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert {n["level"] for n in body["nodes"]} == {"L0", "L1", "L2"}
    assert len(texts(body, "L0")) == 2
    assert texts(body, "L1") == ["Kong body buffer raised to 16MB so 16MB uploads pass."]
    assert texts(body, "L2") == [memories()[0]["text"]]
    assert {n["git_commit"]["sha"] for n in body["nodes"]} == {world.kong.commits["abc123"]}


def test_a3_by_author_lookup(world: World) -> None:
    r = world.post("/memory/nodes/by-author", {"author": ALICE[1], "project": PROJECT})
    assert r.status_code == 200, r.text
    assert sorted(texts(r.json(), "L0")) == sorted([
        "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module.",
        "Benchmarked uploads with the 16MB buffer: no regression.",
    ])  # fmt: skip
    # Normalization: the name, other case, and the pre-.mailmap address all find the same.
    for author in (ALICE[0], ALICE[1].upper(), "alice.smith@old-laptop.test"):
        again = world.post(
            "/memory/nodes/by-author", {"author": author, "project": PROJECT, "repo": REPO}
        )
        assert sorted(texts(again.json(), "L0")) == sorted(texts(r.json(), "L0")), author


def test_a4_query_enriched_with_git(world: World) -> None:
    r = httpx.get(
        f"{world.base}/memory/query",
        params={"query": "buffer", "git_repo": REPO, "project": PROJECT},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["nodes"]
    m1 = node(body, "Kong body buffer raised")
    assert m1["level"] == "L1"
    ctx = m1["git_context"]
    assert ctx["file"] == "src/kong/buffer.rs"
    assert ctx["repo"] == REPO
    assert ctx["commit_sha"] == world.kong.commits["abc123"]
    assert ctx["author"] == ALICE[1]
    for n in body["nodes"]:
        if n["git_context"] is not None:
            assert n["git_context"]["repo"] == REPO


def test_a5_git_ref_in_brief(world: World) -> None:
    body = world.by_git(file="src/kong/buffer.rs", line=42)
    e1 = node(body, "Raised BODY_BUFFER")
    assert e1["git_ref"] == "src/kong/buffer.rs:42"
    assert e1["brief"] == "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module."
    # And the readable CLI form is ready to cite: "file:line (commit abc1234)".
    done = world.mem(
        "by-git", "src/kong/buffer.rs:42", "--repo", str(world.kong.root), "--project", PROJECT
    )
    assert done.returncode == 0, done.stderr
    assert f"src/kong/buffer.rs:42 (commit {world.kong.commits['abc123'][:7]})" in done.stdout


def test_a6_idempotent_by_git_tuple(world: World, tmp_path: Path) -> None:
    def counts() -> tuple[int, int]:
        with psycopg.connect(world.dsn) as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM memory_node WHERE project = %s AND level = 'L0'),"
                " (SELECT count(*) FROM git_anchor WHERE project = %s)",
                (PROJECT, PROJECT),
            ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    before = counts()
    src = write_jsonl(tmp_path / "again.jsonl", memories())
    done = world.mem("ingest", str(src), "--repo", str(world.kong.root), "--project", PROJECT)
    assert done.returncode == 0, done.stderr
    assert counts() == before
    body = world.by_git(file="src/kong/buffer.rs", line=42)
    assert (
        texts(body, "L0").count("Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module.")
        == 1
    )


def test_a7_edge_walk_preserves_git(world: World) -> None:
    body = world.by_git(file="src/kong/buffer.rs", line=42)
    e1 = node(body, "Raised BODY_BUFFER")
    parents = {p["level"]: p for p in e1["parents"]}
    assert set(parents) == {"L1", "L2"}
    for parent in parents.values():
        assert parent["git_context"] == e1["git_context"]
        assert parent["git_ref"] == "src/kong/buffer.rs:42"
    assert parents["L1"]["text"].startswith("Kong body buffer raised")


def test_a8_cross_commit_correlation(world: World) -> None:
    whole = world.by_git(file="src/kong/buffer.rs", line=0)
    commits = {n["git_commit"]["sha"] for n in whole["nodes"] if n["level"] == "L0"}
    assert commits == {world.kong.commits["abc123"], world.kong.commits["ghi789"]}
    ranged = world.by_git(file="src/kong/buffer.rs", lines=[10, 42])
    assert sorted(texts(ranged, "L0")) == sorted(texts(whole, "L0"))
    narrow = world.by_git(file="src/kong/buffer.rs", lines=[11, 41])
    assert texts(narrow, "L0") == []


def test_a9_author_query_filters_correctly(world: World) -> None:
    alice = world.post("/memory/nodes/by-author", {"author": ALICE[1], "project": PROJECT}).json()
    bob = world.post("/memory/nodes/by-author", {"author": BOB[1], "project": PROJECT}).json()
    assert {n["git_commit"]["author"] for n in alice["nodes"] if n["level"] == "L0"} == {ALICE[1]}
    bob_l0 = texts(bob, "L0")
    assert "Handler streams bodies larger than BODY_BUFFER." in bob_l0
    assert not set(bob_l0) & set(texts(alice, "L0"))


def test_a10_missing_git_context_graceful(world: World) -> None:
    r = httpx.get(
        f"{world.base}/memory/query",
        params={"query": "old evidence enrichment", "git_repo": REPO, "project": PROJECT},
        timeout=10,
    )
    assert r.status_code == 200
    old = node(r.json(), "Old evidence")
    assert (old["git_ref"], old["git_commit"], old["git_context"]) == (None, None, None)


# -- the seed's False pass list, one test each ------------------------------------------------


def test_false_pass_git_context_is_extracted_from_the_repository(world: World) -> None:
    # The ingested JSONL names no commit, message or author: each must equal git's own record.
    e1 = node(world.by_git(file="src/kong/buffer.rs", line=42), "Raised BODY_BUFFER")
    sha = world.kong.commits["abc123"]
    subject, email, date = world.kong.git("log", "-1", "--format=%s%n%aE%n%aI", sha).splitlines()
    # The same instant, in UTC written with Z (as the seed's examples write it).
    date = datetime.fromisoformat(date).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert e1["git_commit"] == {
        "sha": sha, "message": subject, "author": email, "author_name": ALICE[0], "date": date,
    }  # fmt: skip
    assert json.dumps(memories()).count(sha) == 0


def test_false_pass_by_git_walks_edges_to_l1(world: World) -> None:
    body = world.by_git(file="src/kong/handler.rs", line=10)
    assert texts(body, "L1") == ["Large bodies are streamed instead of rejected with 413."]
    e2 = node(body, "Handler streams")
    assert [p["level"] for p in e2["parents"]] == ["L1", "L2"]


def test_false_pass_two_repositories_with_overlapping_file_names(world: World) -> None:
    ours = world.by_git(file="src/kong/buffer.rs", line=42)
    fork = world.by_git(file="src/kong/buffer.rs", line=42, repo=FORK)
    assert texts(fork, "L0") == ["Fork: buffer module rewritten for the fork."]
    assert not set(texts(fork)) & set(texts(ours))
    q = httpx.get(
        f"{world.base}/memory/query",
        params={"query": "buffer", "git_repo": FORK, "project": PROJECT},
        timeout=10,
    ).json()
    cited = [n for n in q["nodes"] if n["git_context"] is not None]
    assert [n["text"] for n in cited] == ["Fork: buffer module rewritten for the fork."]
    assert cited[0]["git_context"]["commit_sha"] == world.fork.commits["fork"]


def test_false_pass_same_commit_under_github_and_gitlab(world: World, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "mirror.jsonl", memories())
    done = world.mem(
        "ingest", str(src), "--repo", str(world.kong.root), "--project", PROJECT,
        "--repo-id", "https://gitlab.com/org/poimen.git",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sha = world.kong.commits["abc123"]
    with psycopg.connect(world.dsn) as conn:
        repos = conn.execute(
            "SELECT DISTINCT repo FROM git_anchor WHERE project = %s AND commit_sha = %s ORDER BY 1",
            (PROJECT, sha),
        ).fetchall()
        nodes = conn.execute(
            "SELECT count(*) FROM memory_node WHERE project = %s AND text LIKE 'Raised BODY_BUFFER%%'",
            (PROJECT,),
        ).fetchone()
    assert repos == [("github.com/org/poimen",), ("gitlab.com/org/poimen",)]
    assert nodes == (1,)
    for repo in ("github.com/org/poimen", "gitlab.com/org/poimen"):
        body = world.post(
            "/memory/nodes/by-commit", {"repo": repo, "commit_sha": sha, "project": PROJECT}
        ).json()
        assert {n["git_context"]["repo"] for n in body["nodes"]} == {repo}


# -- one answer on every surface --------------------------------------------------------------


def test_cli_http_and_service_answer_identically(world: World) -> None:
    http = world.by_git(file="src/kong/buffer.rs", line=42)
    cli = world.mem(
        "by-git",
        "src/kong/buffer.rs:42",
        "--repo",
        str(world.kong.root),
        "--project",
        PROJECT,
        "--json",
    )
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == http
    service = world.service.by_git(
        ByGitRequest.from_json(
            {"file": "src/kong/buffer.rs", "line": 42, "repo": REPO, "project": PROJECT}
        )
    )
    assert service.to_json() == http

    sha = world.kong.commits["def456"]
    cli = world.mem("by-commit", sha[:8], "--repo-id", REPO, "--project", PROJECT, "--json")
    http = world.post(
        "/memory/nodes/by-commit", {"commit_sha": sha[:8], "repo": REPO, "project": PROJECT}
    ).json()
    assert (
        json.loads(cli.stdout)
        == http
        == world.service.by_commit(
            ByCommitRequest.from_json({"commit_sha": sha[:8], "repo": REPO, "project": PROJECT})
        ).to_json()
    )

    cli = world.mem("by-author", BOB[1], "--project", PROJECT, "--json")
    http = world.post("/memory/nodes/by-author", {"author": BOB[1], "project": PROJECT}).json()
    assert (
        json.loads(cli.stdout)
        == http
        == world.service.by_author(
            ByAuthorRequest.from_json({"author": BOB[1], "project": PROJECT})
        ).to_json()
    )

    cli = world.mem("query", "streamed", "--git-repo", REPO, "--project", PROJECT, "--json")
    http = httpx.get(
        f"{world.base}/memory/query",
        params={"query": "streamed", "git_repo": REPO, "project": PROJECT},
        timeout=10,
    ).json()
    assert (
        json.loads(cli.stdout)
        == http
        == world.service.query(
            QueryRequest.from_json({"query": "streamed", "git_repo": REPO, "project": PROJECT})
        ).to_json()
    )
    assert http["nodes"]


# -- bad input --------------------------------------------------------------------------------

HTTP_BAD = [
    ("/memory/nodes/by-git", {"repo": REPO, "line": 3, "project": PROJECT}, "file"),
    ("/memory/nodes/by-git", {"repo": REPO, "file": "/etc/passwd", "line": 1, "project": PROJECT}, "file"),
    ("/memory/nodes/by-git", {"repo": REPO, "file": "a.rs", "line": -1, "project": PROJECT}, "line"),
    ("/memory/nodes/by-git", {"repo": REPO, "file": "a.rs", "line": "42", "project": PROJECT}, "line"),
    ("/memory/nodes/by-git", {"repo": REPO, "file": "src/kong/buffer.rs", "line": 999, "project": PROJECT}, "line"),
    ("/memory/nodes/by-git", {"repo": "--upload-pack=x", "file": "a.rs", "line": 1, "project": PROJECT}, "repo"),
    ("/memory/nodes/by-git", {"repo": "gitlab.com/nobody/x", "file": "a.rs", "line": 1, "project": PROJECT}, "repo"),
    ("/memory/nodes/by-commit", {"commit_sha": "--upload-pack=touch /tmp/pwned", "project": PROJECT}, "commit_sha"),
    ("/memory/nodes/by-commit", {"commit_sha": "abc", "project": PROJECT}, "commit_sha"),
    ("/memory/nodes/by-commit", {"commit_sha": "abcd", "project": "bad project"}, "project"),
    ("/memory/nodes/by-author", {"project": PROJECT}, "author"),
    ("/memory/nodes/by-author", {"author": 5, "project": PROJECT}, "author"),
    ("/memory/nodes/by-author", [], "arguments"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body", "field"), HTTP_BAD)
def test_http_bad_input_is_422_naming_the_field(
    world: World, path: str, body: Any, field: str
) -> None:
    r = world.post(path, body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert r.json()["error"].startswith(f"{field}:")


def test_http_malformed_json_and_query_params(world: World) -> None:
    r = httpx.post(f"{world.base}/memory/nodes/by-git", content=b"{nope", timeout=10)
    assert r.status_code == 422
    assert r.json()["field"] == "body"
    r = httpx.get(f"{world.base}/memory/query", params={"project": PROJECT}, timeout=10)
    assert r.status_code == 422
    assert r.json()["field"] == "query"
    r = httpx.get(f"{world.base}/memory/query", params={"query": "x", "limit": "1000"}, timeout=10)
    assert r.status_code == 422
    assert r.json()["field"] == "limit"
    # The server is still serving.
    assert httpx.get(f"{world.base}/health", timeout=10).status_code == 200


def test_openapi_describes_every_route(world: World) -> None:
    spec = httpx.get(f"{world.base}/openapi.json", timeout=10).json()
    assert spec["openapi"].startswith("3.")
    assert {
        "/memory/nodes/by-git",
        "/memory/nodes/by-commit",
        "/memory/nodes/by-author",
        "/memory/query",
    } <= set(spec["paths"])
    assert spec["paths"]["/memory/nodes/by-git"]["post"]["responses"]["422"]


def test_cli_bad_input_exit_2_one_line(world: World) -> None:
    done = world.mem("by-commit", "--upload-pack=x", "--project", PROJECT)
    assert done.returncode == 2
    done = world.mem("by-commit", "zzzz", "--project", PROJECT)
    assert done.returncode == 2
    assert done.stderr == "mem: error: commit_sha: expected 4 to 64 hex digits, got 'zzzz'\n"
    done = world.mem("query", "buffer", "--project", PROJECT, "--limit", "0")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "limit" in done.stderr


def test_http_refuses_public_bind_without_token(world: World) -> None:
    done = world.mem("http", "--host", "0.0.0.0", "--port", str(_free_port()))
    assert done.returncode == 2
    assert "--host: 0.0.0.0 is reachable from other machines" in done.stderr
    assert sys.executable
