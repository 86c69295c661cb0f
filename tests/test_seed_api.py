"""The seed's API as written (M3.5.9, and the M0.2 placeholder trap), end to end: a real
repository and a real store, memories loaded by the real ``mem ingest``, looked up through the
HTTP app (a server with a work tree of the repository, and a team server with none), the
``mem`` command and the service.

- by-git with no work tree answers the stored lines (``mapped: false``), with one the lines
  mapped through blame (``mapped: true``);
- by-commit and by-author answer a page at a time, saying ``truncated`` and giving a cursor;
- one rule for ``parents`` in every lookup;
- every response names its repository, or its repositories;
- a repository name that is no project id gives a valid one, never a placeholder;
- timestamps are written with ``Z``;
- evidence is keyed by content: two memories at one (file, line, commit) are two nodes;
- ``repo`` is a work tree's path or a repository identity alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from poimen_memory.domain import ProjectId, RepoId
from poimen_memory.http import create_app
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    HoverRequest,
    LookupService,
    build_service,
    project_for,
)
from poimen_memory.operations import Services
from poimen_memory.store import Store

from .gitrepo import ALICE, BOB, FixtureRepo, kong_repo

PROJECT = "poimen"
REPO = "github.com/org/poimen"
FORK = "github.com/someone/kong-fork"
BUFFER = "src/kong/buffer.rs"

E1 = "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module."
E1B = "Benchmarked uploads with the 16MB buffer: no regression."
E2 = "Handler streams bodies larger than BODY_BUFFER."
E4 = "Raised BODY_BUFFER again, to 32MB, for batch uploads."
FORKED = "Fork: the buffer module rewritten for the fork."

FIRST = [
    {"type": "node", "id": "s1", "level": "L2", "text": "Kong platform: bodies are buffered up to 16MB and streamed beyond.", "created_at": "2026-08-20T09:00:00Z"},
    {"type": "node", "id": "m1", "level": "L1", "query_id": "q-buffer", "text": "Kong body buffer raised to 16MB so 16MB uploads pass.", "parents": ["s1"], "created_at": "2026-08-20T08:00:00Z"},
    {"type": "node", "id": "m1b", "level": "L1", "query_id": "q-bench", "text": "The bigger buffer costs nothing measurable.", "parents": ["s1"], "created_at": "2026-08-20T08:05:00Z"},
    {"type": "node", "id": "e1", "level": "L0", "query_id": "q-buffer", "text": E1, "parents": ["m1", "m1b"], "anchors": [{"file": BUFFER, "line": 42}], "created_at": "2026-08-20T07:00:00Z"},
    {"type": "node", "id": "e1b", "level": "L0", "query_id": "q-bench", "text": E1B, "parents": ["m1b"], "anchors": [{"file": BUFFER, "line": 42}], "created_at": "2026-08-20T07:30:00Z"},
    {"type": "node", "id": "m2", "level": "L1", "query_id": "q-large", "text": "Large bodies are streamed instead of rejected with 413.", "parents": ["s1"], "created_at": "2026-08-20T08:10:00Z"},
    {"type": "node", "id": "e2", "level": "L0", "query_id": "q-large", "text": E2, "parents": ["m2"], "anchors": [{"file": "src/kong/handler.rs", "line": 10}], "created_at": "2026-08-20T07:10:00Z"},
]  # fmt: skip
AGAIN = [
    {"type": "node", "level": "L0", "query_id": "q-again", "text": E4, "anchors": [{"file": BUFFER, "line": 42}], "created_at": "2026-08-21T07:00:00Z"},
]  # fmt: skip
FORK_MEMORIES = [
    {"type": "node", "level": "L0", "query_id": "q-fork", "text": FORKED, "anchors": [{"file": BUFFER, "line": 42}], "created_at": "2026-08-21T08:00:00Z"},
]  # fmt: skip


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@dataclass
class World:
    base: Path
    kong: FixtureRepo
    fork: FixtureRepo
    dsn: str
    env: dict[str, str]
    tree: LookupService  # a server with work trees of kong and the fork
    bare: LookupService  # a team server with no work tree at all
    http_tree: TestClient
    http_bare: TestClient

    def mem(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", *args],
            env=self.env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def ingest(self, rows: list[dict[str, Any]], repo: FixtureRepo, name: str) -> None:
        src = write_jsonl(self.base / name, rows)
        done = self.mem("ingest", str(src), "--repo", str(repo.root), "--project", PROJECT)
        assert done.returncode == 0, done.stderr


def post(client: TestClient, path: str, body: dict[str, Any], status: int = 200) -> Any:
    answer = client.post(path, json={"project": PROJECT, **body})
    assert answer.status_code == status, answer.text
    return answer.json()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> Iterator[World]:
    base = tmp_path_factory.mktemp("seed-api")
    kong = kong_repo(base / "kong")
    fork = FixtureRepo.create(base / "fork", "https://github.com/someone/kong-fork.git")
    fork.write(BUFFER, "".join(f"// fork line {i}\n" for i in range(1, 61)))
    fork.commit("fork", "Fork the kong module", BOB)
    env = {
        **os.environ,
        "POIMEN_DSN": store_dsn,
        "POIMEN_CACHE_DIR": str(base / "cache"),
        "POIMEN_CONFIG": str(base / "none.toml"),
    }
    env.pop("POIMEN_PROJECT", None)
    with Store(store_dsn) as store:
        tree = build_service(
            store, [kong.root, fork.root], ProjectId(PROJECT), cache_path=base / "tree.db"
        )
        bare = build_service(store, [], ProjectId(PROJECT), cache_path=base / "bare.db")
        w = World(
            base, kong, fork, store_dsn, env, tree, bare,
            TestClient(create_app(Services.over(tree))), TestClient(create_app(Services.over(bare))),
        )  # fmt: skip
        w.ingest(FIRST, kong, "first.jsonl")
        # Line 42 changes again: its memories now sit at two commits.
        kong.set_line(BUFFER, 42, "const BODY_BUFFER: usize = 32 * MB;")
        kong.commit("again", "Raise the buffer again", ALICE)
        w.ingest(AGAIN, kong, "again.jsonl")
        w.ingest(FORK_MEMORIES, fork, "fork.jsonl")
        yield w


def l0(body: dict[str, Any]) -> list[str]:
    return [n["text"] for n in body["nodes"] if n["level"] == "L0"]


def by_text(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["text"]: n for n in body["nodes"]}


# -- 6. by-git with and without a work tree ---------------------------------------------------


def test_a1_by_git_without_a_work_tree_answers_the_stored_line(world: World) -> None:
    body = post(world.http_bare, "/memory/nodes/by-git", {"repo": REPO, "file": BUFFER, "line": 42})
    assert body["mapped"] is False
    assert body["repo"] == REPO
    # Every memory stored at that file and line, in any commit, newest first.
    assert l0(body) == [E4, E1B, E1]
    commits = {n["text"]: n["git_commit"]["sha"] for n in body["nodes"] if n["level"] == "L0"}
    assert commits == {
        E4: world.kong.commits["again"],
        E1B: world.kong.commits["abc123"],
        E1: world.kong.commits["abc123"],
    }
    # With the parent memories (the seed: walk edges to L1/L2).
    assert {n["level"] for n in body["nodes"]} == {"L0", "L1", "L2"}
    # No repository given: every repository's memories at that file and line.
    anywhere = post(world.http_bare, "/memory/nodes/by-git", {"file": BUFFER, "line": 42})
    assert anywhere["mapped"] is False
    assert l0(anywhere) == [FORKED, E4, E1B, E1]
    assert anywhere["repo"] == [REPO, FORK]


def test_a1_by_git_with_a_work_tree_maps_through_blame(world: World) -> None:
    body = post(world.http_tree, "/memory/nodes/by-git", {"repo": REPO, "file": BUFFER, "line": 42})
    assert body["mapped"] is True
    assert body["repo"] == REPO
    assert l0(body) == [E4]  # the line as it is now came from "again"
    # Asked at that commit, literally: the lines of that commit, not mapped.
    literal = post(
        world.http_tree,
        "/memory/nodes/by-git",
        {"repo": REPO, "file": BUFFER, "line": 42, "commit_sha": world.kong.commits["abc123"]},
    )
    assert literal["mapped"] is False
    assert l0(literal) == [E1B, E1]


def test_by_git_without_a_work_tree_refuses_what_needs_blame(world: World) -> None:
    at = world.kong.commits["abc123"]
    for field, extra in (("at", {"at": at}), ("history", {"history": True})):
        error = post(
            world.http_bare,
            "/memory/nodes/by-git",
            {"repo": REPO, "file": BUFFER, "line": 42, **extra},
            status=422,
        )
        assert error["field"] == field
        assert error["error"] == (
            f"{field}: needs a work tree of '{REPO}' to blame in, and none is known here"
        )


def test_the_other_lookups_leave_mapped_out(world: World) -> None:
    sha = world.kong.commits["abc123"]
    for path, body in (
        ("/memory/nodes/by-commit", {"commit_sha": sha}),
        ("/memory/nodes/by-author", {"author": ALICE[1]}),
    ):
        assert "mapped" not in post(world.http_tree, path, body)
    query = world.http_tree.get("/memory/query", params={"query": "buffer", "project": PROJECT})
    assert "mapped" not in query.json()


# -- 7. pages: truncated and a cursor ----------------------------------------------------------


def _pages(client: TestClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    pages = [post(client, path, body)]
    while pages[-1]["truncated"]:
        assert isinstance(pages[-1]["cursor"], str)
        pages.append(post(client, path, {**body, "cursor": pages[-1]["cursor"]}))
        assert len(pages) < 10
    assert "cursor" not in pages[-1]
    return pages


def test_a2_by_commit_returns_all_evidence_a_page_at_a_time(world: World) -> None:
    sha = world.kong.commits["abc123"]
    whole = post(world.http_tree, "/memory/nodes/by-commit", {"commit_sha": sha})
    assert whole["truncated"] is False
    assert "cursor" not in whole
    assert sorted(l0(whole)) == sorted([E1, E1B])
    for client in (world.http_tree, world.http_bare):
        pages = _pages(client, "/memory/nodes/by-commit", {"commit_sha": sha, "limit": 1})
        assert [p["truncated"] for p in pages] == [True, False]
        # One anchor per page, none twice, none left out; each page with its parents.
        assert [len(l0(p)) for p in pages] == [1, 1]
        assert sorted(t for p in pages for t in l0(p)) == sorted(l0(whole))
        for page in pages:
            assert {n["level"] for n in page["nodes"]} == {"L0", "L1", "L2"}


def test_a3_by_author_returns_all_discoveries_a_page_at_a_time(world: World) -> None:
    whole = post(world.http_tree, "/memory/nodes/by-author", {"author": ALICE[1]})
    assert whole["truncated"] is False
    assert l0(whole) == [E4, E1B, E1]
    for limit, sizes in ((1, [1, 1, 1]), (2, [2, 1])):
        pages = _pages(
            world.http_bare, "/memory/nodes/by-author", {"author": ALICE[1], "limit": limit}
        )
        assert [len(l0(p)) for p in pages] == sizes
        # Newest commit first: "again" fills the first page.
        assert l0(pages[0])[0] == E4
        assert sorted(t for p in pages for t in l0(p)) == sorted(l0(whole))


def test_a_cursor_is_good_only_for_the_lookup_that_gave_it(world: World) -> None:
    sha = world.kong.commits["abc123"]
    first = post(world.http_tree, "/memory/nodes/by-commit", {"commit_sha": sha, "limit": 1})
    cursor = first["cursor"]
    wrong = [
        ("/memory/nodes/by-author", {"author": ALICE[1], "cursor": cursor}),
        ("/memory/nodes/by-commit", {"commit_sha": world.kong.commits["def456"], "cursor": cursor}),
    ]  # fmt: skip
    for path, body in wrong:
        error = post(world.http_tree, path, body, status=422)
        assert error["field"] == "cursor"
        assert error["error"].startswith("cursor: given by another lookup")
    error = post(
        world.http_tree, "/memory/nodes/by-commit", {"commit_sha": sha, "cursor": "c1.bm9wZQ"}, 422
    )
    assert error == {
        "error": "cursor: not a cursor a response of this server gave, got 'c1.bm9wZQ'",
        "field": "cursor",
    }


def test_a4_query_says_when_more_matches_than_its_limit(world: World) -> None:
    params = {"query": "buffer OR bodies", "project": PROJECT, "git_repo": REPO}
    one = world.http_tree.get("/memory/query", params={**params, "limit": "1"}).json()
    assert (len(one["nodes"]), one["truncated"]) == (1, True)
    assert "cursor" not in one  # ranked matches: ask with a larger limit
    every = world.http_tree.get("/memory/query", params={**params, "limit": "100"}).json()
    assert every["truncated"] is False
    assert len(every["nodes"]) > 1


def test_cli_limit_and_all_follow_the_cursor(world: World) -> None:
    sha = world.kong.commits["abc123"]
    whole = post(world.http_tree, "/memory/nodes/by-commit", {"commit_sha": sha})
    common = ("--project", PROJECT, "--json")
    page = world.mem("by-commit", sha, "--limit", "1", *common)
    assert page.returncode == 0, page.stderr
    first = json.loads(page.stdout)
    assert (first["truncated"], len(l0(first))) == (True, 1)
    following = world.mem("by-commit", sha, "--cursor", first["cursor"], *common)
    assert json.loads(following.stdout)["truncated"] is False
    every = world.mem("by-commit", sha, "--limit", "1", "--all", *common)
    assert every.returncode == 0, every.stderr
    assert json.loads(every.stdout) == whole
    authored = world.mem("by-author", ALICE[1], "--limit", "1", "--all", *common)
    assert l0(json.loads(authored.stdout)) == [E4, E1B, E1]
    # As text, a page says that more follows and how to get it.
    shown = world.mem("by-commit", sha, "--limit", "1", "--project", PROJECT)
    assert (
        f"(truncated: more than shown; the next page's cursor: {first['cursor']})" in shown.stdout
    )
    bad = world.mem("by-commit", sha, "--limit", "0", "--project", PROJECT)
    assert bad.returncode == 2
    assert bad.stderr == "mem: error: limit: expected an integer from 1 to 10000, got 0\n"


# -- 8. one rule for parents -------------------------------------------------------------------


def _parents(body: dict[str, Any]) -> dict[str, list[str]]:
    """Each node's text -> its parents' texts (and every parent is cited as its node)."""
    out = {}
    for n in body["nodes"]:
        for p in n["parents"]:
            assert p["git_context"] == n["git_context"]
            assert "parents" not in p
        out[n["text"]] = [p["text"] for p in n["parents"]]
    return out


S1, M1, M1B, M2 = (FIRST[i]["text"] for i in (0, 1, 2, 5))
PARENTS = {
    # Every node above, by level (L1 before L2), then newest first.
    E1: [M1B, M1, S1],
    E1B: [M1B, S1],
    E2: [M2, S1],
    M1: [S1],
    M1B: [S1],
    M2: [S1],
    S1: [],
}


def test_a7_parents_follow_one_rule_in_every_lookup(world: World) -> None:
    sha = world.kong.commits["abc123"]
    answers = [
        post(world.http_tree, "/memory/nodes/by-git", {"file": BUFFER, "line": 42, "repo": REPO, "commit_sha": sha}),
        post(world.http_bare, "/memory/nodes/by-git", {"file": BUFFER, "line": 42, "repo": REPO}),
        post(world.http_tree, "/memory/nodes/by-git", {"file": "src/kong/handler.rs", "line": 10, "repo": REPO}),
        post(world.http_tree, "/memory/nodes/by-commit", {"commit_sha": sha}),
        post(world.http_tree, "/memory/nodes/by-author", {"author": ALICE[1]}),
        post(world.http_tree, "/memory/nodes/by-author", {"author": BOB[1]}),
        world.http_tree.get("/memory/query", params={"query": "buffer OR bodies OR bigger OR platform", "project": PROJECT, "git_repo": REPO}).json(),
        world.http_tree.get("/memory/query", params={"query": "buffer OR bodies OR bigger OR platform", "project": PROJECT}).json(),
    ]  # fmt: skip
    seen: set[str] = set()
    for body in answers:
        for text, parents in _parents(body).items():
            if text in PARENTS:
                assert parents == PARENTS[text], text
                seen.add(text)
    assert seen == set(PARENTS)


# -- 9. every response names its repository ----------------------------------------------------


def test_every_response_names_its_repository(world: World) -> None:
    sha = world.kong.commits["abc123"]
    for client in (world.http_tree, world.http_bare):
        # Not scoped: the one repository the nodes come from...
        assert post(client, "/memory/nodes/by-author", {"author": ALICE[1]})["repo"] == REPO
        assert post(client, "/memory/nodes/by-commit", {"commit_sha": sha})["repo"] == REPO
        # ...or all of them, sorted, each node naming its own.
        bob = post(client, "/memory/nodes/by-author", {"author": BOB[1]})
        assert bob["repo"] == [REPO, FORK]
        assert {n["text"]: n["git_context"]["repo"] for n in bob["nodes"] if n["level"] == "L0"} == {
            E2: REPO, FORKED: FORK,
        }  # fmt: skip
        # Scoped: that repository, even with nothing found.
        scoped = post(
            client, "/memory/nodes/by-author", {"author": "nobody@org.test", "repo": FORK}
        )
        assert scoped == {"repo": FORK, "nodes": [], "truncated": False}
    # Not scoped and nothing found: no repository, an empty list (never null).
    none = post(world.http_bare, "/memory/nodes/by-author", {"author": "nobody@org.test"})
    assert none == {"repo": [], "nodes": [], "truncated": False}
    query = world.http_tree.get("/memory/query", params={"query": "buffer", "project": PROJECT})
    assert query.json()["repo"] == []
    cited = world.http_tree.get(
        "/memory/query", params={"query": "buffer", "project": PROJECT, "git_repo": FORK}
    )
    assert cited.json()["repo"] == FORK


# -- 10. no placeholder project (M0.2) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("remote", "identity", "project"),
    [
        ("git@github.com:org/.github.git", "github.com/org/.github", "github"),
        ("https://gitlab.example.com/org/_infra.git", "gitlab.example.com/org/_infra", "infra"),
        ("https://code.example.com/org/a~b.git", "code.example.com/org/a~b", "a-b"),
    ],
)
def test_m02_no_placeholder_project_for_a_repository_name(
    world: World, tmp_path: Path, remote: str, identity: str, project: str
) -> None:
    assert project_for(RepoId(identity)) == ProjectId(project)
    assert project_for(RepoId(identity)) == project_for(RepoId(identity))
    repo = FixtureRepo.create(tmp_path / "repo", remote)
    repo.write("x.py", "".join(f"x = {i}\n" for i in range(1, 11)))
    repo.commit("one", "Add x", ALICE)
    memory = {"type": "node", "level": "L0", "query_id": "q", "anchors": [{"file": "x.py", "line": 3}], "created_at": "2026-08-20T07:00:00Z"}  # fmt: skip
    for into, text in ((project, f"x is three in {project}"), ("default", "a placeholder's")):
        src = write_jsonl(tmp_path / f"{into}.jsonl", [{**memory, "text": text}])
        done = world.mem("ingest", str(src), "--repo", str(repo.root), "--project", into)
        assert done.returncode == 0, done.stderr
    # No project configured: lookups go to the project derived from the name, never "default".
    with Store(world.dsn) as store:
        service = build_service(store, [repo.root], None, cache_path=tmp_path / "blame.db")
        found = service.hover(HoverRequest(file=str(repo.root / "x.py"), line=3))
    assert found is not None
    assert [m.node.text for m in found.memories] == [f"x is three in {project}"]
    assert {m.node.project.value for m in found.memories} == {project}


def test_m02_a_name_with_nothing_valid_gets_a_stable_hashed_project() -> None:
    first = project_for(RepoId("code.example.com/org/___"))
    assert first == project_for(RepoId("code.example.com/org/___"))
    assert first.value.startswith("repo-")
    assert len(first.value) == len("repo-") + 12
    assert first != project_for(RepoId("code.example.com/other/___"))


# -- 11. timestamps with Z ---------------------------------------------------------------------

STAMPS = {"date", "created_at", "author_date", "replaced_at", "expires_at"}


def _stamps(value: object) -> list[str]:
    if isinstance(value, dict):
        return [
            v if k in STAMPS else s
            for k, v in value.items()
            for s in ([v] if k in STAMPS else _stamps(v))
        ]
    if isinstance(value, list):
        return [s for item in value for s in _stamps(item)]
    return []


def test_timestamps_are_utc_with_z(world: World, tmp_path: Path) -> None:
    sha = world.kong.commits["abc123"]
    answers = [
        post(world.http_tree, "/memory/nodes/by-git", {"file": BUFFER, "line": 42, "repo": REPO, "history": True}),
        post(world.http_bare, "/memory/nodes/by-git", {"file": BUFFER, "line": 42}),
        post(world.http_tree, "/memory/nodes/by-commit", {"commit_sha": sha}),
        post(world.http_tree, "/memory/nodes/by-author", {"author": ALICE[1]}),
        world.http_tree.get("/memory/query", params={"query": "buffer", "project": PROJECT, "git_repo": REPO}).json(),
    ]  # fmt: skip
    stamps = [s for body in answers for s in _stamps(body)]
    e1 = by_text(answers[2])[E1]
    assert e1["created_at"] == "2026-08-20T07:00:00Z"
    assert e1["git_commit"]["date"] == e1["git_context"]["author_date"]
    # A remembered line not committed yet: its pending anchor expires at a Z timestamp.
    repo = FixtureRepo.create(tmp_path / "app", "git@github.com:org/app.git")
    repo.write("app.py", "a = 1\n")
    repo.commit("base", "Initial", ALICE)
    repo.write("app.py", "a = 1\nb = 2\n")
    done = world.mem(
        "remember", "app.py:2", "b is two", "--repo", str(repo.root), "--project", "z-app", "--json"
    )
    assert done.returncode == 0, done.stderr
    remembered = json.loads(done.stdout)
    assert len(remembered["pending"]) == 1
    stamps += _stamps(remembered)
    assert len(stamps) > 20
    kinds = {k for body in [*answers, remembered] for k in _keys(body)} & STAMPS
    assert kinds == STAMPS
    for stamp in stamps:
        assert stamp.endswith("Z"), stamp
        assert "+" not in stamp, stamp
        assert datetime.fromisoformat(stamp).utcoffset() is not None


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for item in value for k in _keys(item)}
    return set()


# -- 12. evidence keyed by content -------------------------------------------------------------


def test_a6_two_memories_at_one_line_and_commit_are_two_nodes(world: World) -> None:
    sha = world.kong.commits["abc123"]
    body = post(world.http_tree, "/memory/nodes/by-commit", {"commit_sha": sha})
    at_line = [n for n in body["nodes"] if n["level"] == "L0"]
    assert sorted(n["text"] for n in at_line) == sorted([E1, E1B])
    # The same (file, line, commit), two different texts: two nodes, each its own sha256.
    assert {(n["git_ref"], n["git_commit"]["sha"]) for n in at_line} == {(f"{BUFFER}:42", sha)}
    assert len({n["sha256"] for n in at_line}) == 2

    def counts() -> tuple[int, int]:
        with psycopg.connect(world.dsn) as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM memory_node WHERE project = %s),"
                " (SELECT count(*) FROM git_anchor WHERE project = %s)",
                (PROJECT, PROJECT),
            ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    # The same content again adds nothing: the key is the content, and the anchor's tuple.
    before = counts()
    # (Line 42 changed since: the anchors name the commit they were recorded at.)
    pinned = [
        {**row, "anchors": [{**a, "commit": sha} for a in row["anchors"]]}
        if row["text"] in (E1, E1B)
        else row
        for row in FIRST
    ]
    world.ingest(pinned, world.kong, "first-again.jsonl")
    assert counts() == before


# -- 13. repo: a work tree's path or an identity ----------------------------------------------


def test_repo_is_a_path_or_an_identity_over_http(world: World) -> None:
    root = str(world.kong.root)
    by_identity = post(
        world.http_tree, "/memory/nodes/by-author", {"author": ALICE[1], "repo": REPO}
    )
    by_path = post(world.http_tree, "/memory/nodes/by-author", {"author": ALICE[1], "repo": root})
    assert by_path == by_identity
    assert l0(by_path) == [E4, E1B, E1]
    git = post(
        world.http_tree, "/memory/nodes/by-git", {"file": BUFFER, "line": 42, "repo": root + "/src"}
    )
    assert (git["repo"], git["mapped"], l0(git)) == (REPO, True, [E4])
    query = world.http_tree.get(
        "/memory/query", params={"query": "streams", "project": PROJECT, "git_repo": root}
    ).json()
    assert query["repo"] == REPO
    assert by_text(query)[E2]["git_ref"] == "src/kong/handler.rs:10"
    # A server with no work tree knows no path; an identity it has no memories of is unknown.
    error = post(
        world.http_bare, "/memory/nodes/by-author", {"author": ALICE[1], "repo": root}, 422
    )
    assert error == {
        "error": f"repo: {root!r} is not in a work tree known here (known: none)",
        "field": "repo",
    }
    error = post(
        world.http_bare,
        "/memory/nodes/by-commit",
        {"commit_sha": "abcd", "repo": "github.com/org/nothing"},
        422,
    )
    assert error["field"] == "repo"
    assert error["error"].startswith(
        "repo: 'github.com/org/nothing' is not known here: no work tree of it, and project "
        f"'{PROJECT}' has no memories in it (known: {REPO}, {FORK})"
    )


def test_repo_is_a_path_or_an_identity_in_the_cli(world: World) -> None:
    common = ("--project", PROJECT, "--json")
    by_identity = world.mem("by-author", ALICE[1], "--repo-id", REPO, *common)
    by_path = world.mem("by-author", ALICE[1], "--repo-id", "./kong", *common, cwd=world.base)
    by_dir = world.mem("by-author", ALICE[1], "--repo", str(world.kong.root), *common)
    assert by_identity.returncode == by_path.returncode == by_dir.returncode == 0, by_path.stderr
    assert json.loads(by_path.stdout) == json.loads(by_identity.stdout) == json.loads(by_dir.stdout)
    query = world.mem("query", "streams", "--git-repo", str(world.kong.root), *common)
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout)["repo"] == REPO
    assert by_text(json.loads(query.stdout))[E2]["git_ref"] == "src/kong/handler.rs:10"
    unknown = world.mem("by-author", ALICE[1], "--repo-id", "github.com/org/nothing", *common)
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("mem: error: repo: 'github.com/org/nothing' is not known here")


def test_service_requests_take_paths_too(world: World) -> None:
    req = ByAuthorRequest.from_json({"author": ALICE[1], "repo": str(world.kong.root)})
    assert world.tree.by_author(req).repo == RepoId(REPO)
    req2 = ByCommitRequest.from_json(
        {"commit_sha": world.kong.commits["abc123"], "repo": str(world.kong.root)}
    )
    assert world.tree.by_commit(req2).to_json()["repo"] == REPO
