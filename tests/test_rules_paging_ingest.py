"""Rules of paging and of placing an agent's edits, each guarded by a test that fails when the
rule is broken.

- Paging by author walks commits of one date by their id, strictly after the cursor's: three
  commits of one author at one date, a page of one anchor at a time, end, and list every
  memory once (a cursor that took in its own date's earlier commits again would page for
  ever). Paging by commit likewise, with two memories on one line (keys that differ only in
  the node).
- A Claude Code edit whose text HEAD holds twice is left unanchored (counted so), never put
  on the first copy; so is one whose added lines HEAD holds twice when its text is not whole
  at HEAD any more.
- Lines older than an edit are not the edit's: an edit that put back a line of the first
  commit is not anchored there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from poimen_memory.domain import ProjectId
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupService,
    build_service,
)
from poimen_memory.store import Store

from .claude_sessions import Session
from .gitrepo import ALICE, CAROL, FixtureRepo

MEM = [sys.executable, "-m", "poimen_memory.cli"]
# A paged lookup that does not end is killed after this long: the test then fails.
PAGING_TIMEOUT_S = 60


def mem_env(tmp: Path, dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POIMEN_")}
    return {
        **env,
        "POIMEN_DSN": dsn,
        "POIMEN_CACHE_DIR": str(tmp / "cache"),
        "POIMEN_CONFIG": str(tmp / "none.toml"),
    }


def run_mem(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [*MEM, *args], env=env, cwd=cwd, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"`mem {' '.join(args)}` did not end within {timeout} s (pages for ever?)")


def l0_texts(body: dict[str, Any]) -> list[str]:
    return [n["text"] for n in body["nodes"] if n["level"] == "L0"]


# -- paging: three commits of one author at one date ------------------------------------------

A1 = "Parser: the header is read before the body (paging memory A1)."
A2 = "Parser: a missing header is an error, not an empty one (paging memory A2)."
A3 = "Parser: the body limit comes from the header (paging memory A3)."
B1 = "Writer: flush after every record (paging memory B1)."
C1 = "Reader: retry a short read once (paging memory C1)."


@dataclass
class Team:
    repo: FixtureRepo
    env: dict[str, str]
    project: str
    service: LookupService
    commits: dict[str, str]  # label -> sha

    def mem(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_mem(self.env, self.repo.root, *args, timeout=timeout)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, store: Store, store_dsn: str) -> Team:
    base = tmp_path_factory.mktemp("paging")
    repo = FixtureRepo.create(base / "team", "git@github.com:org/paging-rules.git")
    for name in ("parser.py", "writer.py", "reader.py"):
        repo.write(name, "".join(f"# {name} line {n}\n" for n in range(1, 13)))
    repo.commit("initial", "Initial modules", CAROL)
    # Three commits by one author at one date: the same author and committer date for all
    # three (a script or a rebase can make that).
    same = repo.clock + 3600
    for label, path, lines in (
        ("parser", "parser.py", (3, 7)),
        ("writer", "writer.py", (5,)),
        ("reader", "reader.py", (9,)),
    ):
        for n in lines:
            repo.set_line(path, n, f"{label}_step_{n}()")
        repo.clock = same - 3600  # commit() adds the hour back
        repo.commit(label, f"Change the {label}", ALICE)
    dates = {repo.git("log", "-1", "--format=%at %ct", sha).strip() for sha in repo.commits.values()
             if sha != repo.commits["initial"]}  # fmt: skip
    assert dates == {f"{same} {same}"}
    project = f"paging-{uuid.uuid4().hex[:8]}"
    rows = [
        {"type": "node", "level": "L0", "query_id": f"q-{n}", "text": text,
         "anchors": [{"file": path, "line": line}], "created_at": "2026-08-20T07:00:00Z"}
        for n, (text, path, line) in enumerate([
            (A1, "parser.py", 3), (A2, "parser.py", 3), (A3, "parser.py", 7),
            (B1, "writer.py", 5), (C1, "reader.py", 9),
        ])
    ]  # fmt: skip
    source = base / "memories.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = mem_env(base, store_dsn)
    done = run_mem(env, repo.root, "ingest", str(source), "--repo", str(repo.root),
                   "--project", project, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["anchors"] == 5
    service = build_service(store, [repo.root], ProjectId(project), cache_path=base / "look.db")
    return Team(repo, env, project, service, dict(repo.commits))


def test_by_author_pages_of_one_date_end_and_list_each_memory_once(team: Team) -> None:
    done = team.mem(
        "by-author", ALICE[1], "--limit", "1", "--all", "--project", team.project, "--json",
        timeout=PAGING_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["truncated"] is False
    texts = l0_texts(body)
    assert Counter(texts) == dict.fromkeys([A1, A2, A3, B1, C1], 1)
    shas = {n["git_commit"]["sha"] for n in body["nodes"] if n["level"] == "L0"}
    assert shas == {team.commits[k] for k in ("parser", "writer", "reader")}


def test_by_author_cursor_pages_of_one_date_one_anchor_each(team: Team) -> None:
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while len(pages) < 10:
        body: dict[str, Any] = {"author": ALICE[1], "limit": 1}
        if cursor is not None:
            body["cursor"] = cursor
        pages.append(team.service.by_author(ByAuthorRequest.parse(body)).to_json())
        cursor = pages[-1].get("cursor")
        if cursor is None:
            break
    assert [p["truncated"] for p in pages] == [True] * 4 + [False], [l0_texts(p) for p in pages]
    assert [len(l0_texts(p)) for p in pages] == [1] * 5
    assert Counter(t for p in pages for t in l0_texts(p)) == dict.fromkeys([A1, A2, A3, B1, C1], 1)


def test_by_commit_pages_end_and_list_each_memory_once(team: Team) -> None:
    # Two memories on one line of one commit: their keys differ only in the node.
    sha = team.commits["parser"]
    done = team.mem(
        "by-commit", sha, "--limit", "1", "--all", "--project", team.project, "--json",
        timeout=PAGING_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert Counter(l0_texts(json.loads(done.stdout))) == dict.fromkeys([A1, A2, A3], 1)
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while len(pages) < 10:
        body: dict[str, Any] = {"commit_sha": sha, "limit": 1}
        if cursor is not None:
            body["cursor"] = cursor
        pages.append(team.service.by_commit(ByCommitRequest.parse(body)).to_json())
        cursor = pages[-1].get("cursor")
        if cursor is None:
            break
    assert [len(l0_texts(p)) for p in pages] == [1, 1, 1], [l0_texts(p) for p in pages]
    assert sorted(t for p in pages for t in l0_texts(p)) == sorted([A1, A2, A3])


# -- Claude Code edits: placed with certainty or not at all -----------------------------------

APP = "".join(f"# app line {n}\n" for n in range(1, 21))
RETRY_LOOP = (
    "for attempt in range(RETRIES):\n"
    "    if send(request):\n"
    "        break\n"
    "    time.sleep(backoff(attempt))\n"
)


@dataclass
class Work:
    repo: FixtureRepo
    env: dict[str, str]
    project: ProjectId
    service: LookupService
    tmp: Path

    def session(self, start: float) -> Session:
        transcript = self.tmp / "home" / ".claude" / "projects" / "-app" / f"{uuid.uuid4()}.jsonl"
        return Session(self.repo.root, transcript, start=start)

    def ingest(self, session: Session) -> dict[str, Any]:
        done = run_mem(
            self.env, self.repo.root, "ingest", str(session.save()), "--repo",
            str(self.repo.root), "--project", self.project.value, "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        summary: dict[str, Any] = json.loads(done.stdout)
        assert summary["skipped"] == []
        return summary

    def hover(self, path: str) -> dict[int, list[str]]:
        """Every line of ``path`` at HEAD -> the L0 memories by-git shows there."""
        count = len(self.repo.git("show", f"HEAD:{path}").splitlines())
        shown = {}
        for line in range(1, count + 1):
            body = self.service.by_git(ByGitRequest.parse({"file": path, "line": line}))
            shown[line] = l0_texts(body.to_json())
        return shown

    def by_git_cli(self, spec: str) -> dict[str, Any]:
        done = run_mem(self.env, self.repo.root, "by-git", spec, "--project",
                       self.project.value, "--json")  # fmt: skip
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result


@pytest.fixture
def work(tmp_path: Path, store: Store, store_dsn: str, project: ProjectId) -> Work:
    repo = FixtureRepo.create(tmp_path / "app", f"git@github.com:org/{project.value}.git")
    service = build_service(store, [repo.root], project, cache_path=tmp_path / "look.db")
    return Work(repo, mem_env(tmp_path, store_dsn), project, service, tmp_path)


def test_an_edit_whose_text_head_holds_twice_is_left_unanchored(work: Work) -> None:
    repo = work.repo
    repo.write("app.py", APP)
    initial = repo.commit("initial", "Initial", CAROL)
    session = work.session(start=repo.clock + 600)
    session.prompt("Retry a failed send with backoff.")
    session.edit("app.py", "# app line 10\n", "# app line 10\n" + RETRY_LOOP)
    session.say("Failed sends are retried with exponential backoff.")
    # Before committing, the human pastes the block the edit wrote (with the lines around
    # it, as the edit's patch has them) at the end of the file too.
    lines = (repo.root / "app.py").read_text().splitlines(keepends=True)
    assert "".join(lines[10:14]) == RETRY_LOOP
    repo.write("app.py", "".join(lines) + "".join(lines[6:17]))
    human = repo.commit("human", "Retry failed sends, twice", ("Human", "human@example.com"))
    head = repo.git("show", "HEAD:app.py")
    assert head.count("# app line 7\n# app line 8\n# app line 9\n# app line 10\n" + RETRY_LOOP
                      + "# app line 11\n# app line 12\n# app line 13\n") == 2  # fmt: skip
    copies = [11, 12, 13, 14], [29, 30, 31, 32]
    for copy in copies:
        assert [head.splitlines()[n - 1] for n in copy] == RETRY_LOOP.splitlines()
        assert {repo.git("blame", "-L", f"{n},{n}", "--porcelain", "HEAD", "--", "app.py")
                .split()[0] for n in copy} == {human}  # fmt: skip
    assert initial != human

    summary = work.ingest(session)
    # Neither copy shows the edit's memory, nor does any other line.
    shown = work.hover("app.py")
    assert {n: t for n, t in shown.items() if t} == {}
    assert work.by_git_cli(f"app.py:{copies[0][0]}-{copies[1][-1]}")["nodes"] == []
    # The summary says so: a memory, with an edit left unanchored.
    assert summary["nodes"]["L0"] >= 1
    assert (summary["anchors"], summary["unanchored_edits"], summary["pending_edits"]) == (0, 1, 0)


def test_an_edit_whose_added_lines_head_holds_twice_is_left_unanchored_and_counted(
    work: Work,
) -> None:
    # The human changed a line around the edit before committing, so HEAD no longer holds the
    # edit's text whole; its added lines are looked for alone, and HEAD holds them twice.
    repo = work.repo
    repo.write("app.py", APP)
    repo.commit("initial", "Initial", CAROL)
    session = work.session(start=repo.clock + 600)
    session.prompt("Retry a failed send with backoff.")
    session.edit("app.py", "# app line 10\n", "# app line 10\n" + RETRY_LOOP)
    session.say("Failed sends are retried with exponential backoff.")
    text = (repo.root / "app.py").read_text().replace("# app line 9\n", "# app line nine\n")
    repo.write("app.py", text + RETRY_LOOP)
    repo.commit("human", "Retry failed sends, twice", ("Human", "human@example.com"))
    head = repo.git("show", "HEAD:app.py").splitlines()
    assert [head[n - 1] for n in (11, 25)] == [RETRY_LOOP.splitlines()[0]] * 2

    summary = work.ingest(session)
    shown = work.hover("app.py")
    assert {n: t for n, t in shown.items() if t} == {}
    # Not placed and not waiting for a commit: the summary counts it left unanchored.
    assert (summary["anchors"], summary["unanchored_edits"], summary["pending_edits"]) == (0, 1, 0)


def test_an_edit_that_put_back_a_line_of_the_first_commit_is_not_anchored_there(
    work: Work,
) -> None:
    repo = work.repo
    app = APP.replace("# app line 10\n", "TIMEOUT_S = 30\n")
    repo.write("app.py", app)
    first = repo.commit("initial", "Initial", CAROL)
    # A day later the work tree holds a change nobody committed; the agent undoes it.
    repo.write("app.py", app.replace("TIMEOUT_S = 30\n", "TIMEOUT_S = 60\n"))
    session = work.session(start=repo.clock + 86400)
    session.prompt("Put the timeout back to what it was.")
    session.edit("app.py", "TIMEOUT_S = 60\n", "TIMEOUT_S = 30\n")
    session.say("The timeout is 30 s again.")
    assert (repo.root / "app.py").read_text() == app  # the work tree is HEAD again
    blamed = repo.git("blame", "-L", "10,10", "--porcelain", "HEAD", "--", "app.py")
    assert blamed.split()[0] == first  # the line HEAD holds is the first commit's

    summary = work.ingest(session)
    # HEAD holds the edit's text, once, but from a commit made a day before the edit.
    shown = work.hover("app.py")
    assert {n: t for n, t in shown.items() if t} == {}
    assert work.by_git_cli("app.py:10")["nodes"] == []
    assert (summary["anchors"], summary["unanchored_edits"], summary["pending_edits"]) == (0, 1, 0)
