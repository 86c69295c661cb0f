"""``remember`` and pending anchors, on a real repository and a real store: committed lines
are anchored at their origin; uncommitted ones wait for the commit that holds them and are
then found by hover; lines edited before the commit, or never committed, get nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poimen_memory.domain import CommitSha, ProjectId
from poimen_memory.errors import StoreUnavailable
from poimen_memory.ingest.remember import _place
from poimen_memory.lookup import (
    ByGitRequest,
    HoverRequest,
    LookupInputError,
    LookupService,
    RememberRequest,
    build_service,
)
from poimen_memory.recording import Recorder, pending_resolver
from poimen_memory.store import Store, migrate

from .gitrepo import ALICE, BOB, FixtureRepo, numbered
from .scenes import resolving_service


@pytest.fixture
def repo(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "work", "git@github.com:org/app.git")
    repo.write("app.py", numbered("# app", 20))
    repo.commit("base", "Initial", ALICE)
    return repo


@pytest.fixture
def service(store: Store, repo: FixtureRepo, project: ProjectId, tmp_path: Path) -> LookupService:
    return resolving_service(store, repo, project, tmp_path)


def _remember(recorder: Recorder, **body: object) -> dict[str, object]:
    return recorder.remember(RememberRequest.parse(body)).model_dump(mode="json")


def _texts(service: LookupService, repo: FixtureRepo, line: int) -> list[str]:
    found = service.hover(HoverRequest(file=str(repo.root / "app.py"), line=line))
    return [] if found is None else [m.node.text for m in found.memories]


def test_committed_lines_are_anchored_at_their_origin(
    service: LookupService, repo: FixtureRepo
) -> None:
    recorder = Recorder(service)
    repo.set_line("app.py", 5, "retry = 3  # the flaky upstream")
    origin = repo.commit("retry", "Retry upstream", BOB)
    repo.write("other.txt", "x\n")
    repo.commit("later", "Unrelated", ALICE)
    out = _remember(
        recorder, text="Upstream drops one call in ten; three retries.", file="app.py", line=5
    )
    assert out["anchored"] == [{"commit": origin, "file": "app.py", "line_start": 5, "line_end": 5}]
    assert out["pending"] == []
    assert out["created"] is True
    assert _texts(service, repo, 5) == ["Upstream drops one call in ten; three retries."]
    assert _texts(service, repo, 4) == []
    again = _remember(
        recorder, text="Upstream drops one call in ten; three retries.", file="app.py", line=5
    )
    assert again["created"] is False
    assert again["node"] == out["node"]


def test_uncommitted_lines_wait_for_their_commit_then_show(
    service: LookupService, repo: FixtureRepo
) -> None:
    recorder = Recorder(service)
    lines = repo.lines("app.py")
    lines[9:9] = ["def backoff(n):", "    return min(2 ** n, 60)"]
    repo.write("app.py", "\n".join(lines) + "\n")
    out = _remember(
        recorder,
        text="Capped at a minute: the gateway times out at 90 s.",
        brief="backoff is capped",
        file="app.py",
        lines=[10, 11],
    )
    assert out["anchored"] == []
    assert [(p["line_start"], p["line_end"]) for p in out["pending"]] == [(10, 11)]  # type: ignore[index]
    assert out["brief_node"] is not None
    assert _texts(service, repo, 10) == []  # nothing committed yet
    sha = repo.commit("backoff", "Add backoff", BOB)
    shown = service.hover(HoverRequest(file=str(repo.root / "app.py"), line=11))
    assert shown is not None
    texts = [m.node.text for m in shown.memories]
    assert "Capped at a minute: the gateway times out at 90 s." in texts
    assert "backoff is capped" in texts  # the L1 over it
    assert _texts(service, repo, 9) == []
    assert _texts(service, repo, 12) == []
    rows = service.store.evidence_at_line(
        ProjectId(out["project"]),
        service.checkouts.identities()[0],
        CommitSha(sha),
        "app.py",
        10,  # type: ignore[arg-type]
    )
    assert rows, "anchored at the commit that added the lines"
    assert (
        service.store.pending_files(ProjectId(out["project"]), service.checkouts.identities()[0])
        == set()
    )  # type: ignore[arg-type]


def test_lines_edited_before_the_commit_get_nothing(
    service: LookupService, repo: FixtureRepo
) -> None:
    recorder = Recorder(service)
    lines = repo.lines("app.py")
    lines[4:4] = ["first = load()", "second = parse(first)", "third = store(second)"]
    repo.write("app.py", "\n".join(lines) + "\n")
    _remember(recorder, text="A pipeline of three steps.", file="app.py", lines=[5, 7])
    lines[5] = "second = parse_strict(first)"  # edited before the commit
    repo.write("app.py", "\n".join(lines) + "\n")
    repo.commit("pipeline", "Pipeline", BOB)
    assert _texts(service, repo, 6) == []  # the changed line: never
    assert _texts(service, repo, 5) == ["A pipeline of three steps."]
    assert _texts(service, repo, 7) == ["A pipeline of three steps."]


def test_lines_never_committed_are_never_shown(service: LookupService, repo: FixtureRepo) -> None:
    recorder = Recorder(service)
    lines = repo.lines("app.py")
    lines[2:2] = ["experimental = True"]
    repo.write("app.py", "\n".join(lines) + "\n")
    _remember(recorder, text="Tried a flag; dropped it.", file="app.py", line=3)
    repo.write("app.py", numbered("# app", 20))  # reverted, then something else committed
    repo.set_line("app.py", 3, "# app line 3 changed")
    repo.commit("other", "Other change", BOB)
    assert _texts(service, repo, 3) == []


def test_a_line_that_existed_before_is_not_taken_for_the_new_one(
    service: LookupService, repo: FixtureRepo
) -> None:
    """The remembered text also occurs in old lines: only a line committed after the
    memory's base can carry it."""
    recorder = Recorder(service)
    repo.set_line("app.py", 2, "return result")
    repo.commit("old", "Old return", ALICE)
    lines = repo.lines("app.py")
    lines[14:14] = ["return result"]
    repo.write("app.py", "\n".join(lines) + "\n")
    out = _remember(recorder, text="Returns early on purpose.", file="app.py", line=15)
    assert out["pending"]
    repo.commit("new", "New return", BOB)
    assert _texts(service, repo, 15) == ["Returns early on purpose."]
    assert _texts(service, repo, 2) == []


def test_resolve_pending_command_path_and_expiry(
    service: LookupService, repo: FixtureRepo, store_dsn: str
) -> None:
    recorder = Recorder(service)
    lines = repo.lines("app.py")
    lines[0:0] = ["import os"]
    repo.write("app.py", "\n".join(lines) + "\n")
    out = _remember(recorder, text="os for the environment.", file="app.py", line=1)
    project = ProjectId(out["project"])  # type: ignore[arg-type]
    repo.commit("os", "Import os", BOB)
    expired, done = recorder.resolve_pending(project)
    assert expired == 0
    assert [(r.anchors, r.files) for r in done] == [(1, ["app.py"])]
    # Another, never committed: it expires and is deleted.
    lines = repo.lines("app.py")
    lines[3:3] = ["never = committed"]
    repo.write("app.py", "\n".join(lines) + "\n")
    _remember(recorder, text="Will expire.", file="app.py", line=4)
    with psycopg.connect(store_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pending_anchor SET expires_at = now() - interval '1 second' WHERE project = %s",
            (project.value,),
        )
    expired, done = recorder.resolve_pending(project)
    assert expired == 1
    assert done == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "x", "file": "app.py", "line": 99}, "line"),
        ({"text": "x", "file": "app.py", "lines": [19, 40]}, "lines"),
        ({"text": "x", "file": "missing.py", "line": 1}, "file"),
        ({"text": "x", "file": "app.py"}, "line"),
        ({"text": " ", "file": "app.py", "line": 1}, "text"),
        ({"text": "x", "file": "/etc/passwd", "line": 1}, "file"),
    ],
)
def test_bad_requests_name_the_field(
    service: LookupService, body: dict[str, object], field: str
) -> None:
    recorder = Recorder(service)
    with pytest.raises(LookupInputError) as caught:
        recorder.remember(RememberRequest.parse(body))
    assert caught.value.field == field


def test_a_link_out_of_the_work_tree_is_not_read(
    service: LookupService, repo: FixtureRepo, tmp_path: Path
) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("secret\n")
    (repo.root / "link.txt").symlink_to(secret)
    with pytest.raises(LookupInputError) as caught:
        Recorder(service).remember(
            RememberRequest.parse({"text": "x", "file": "link.txt", "line": 1})
        )
    assert caught.value.field == "file"


def test_secrets_are_redacted_before_the_node_is_hashed(
    service: LookupService, repo: FixtureRepo
) -> None:
    out = _remember(
        Recorder(service),
        text="Deploy with AKIAIOSFODNN7EXAMPLE for the bucket.",
        file="app.py",
        line=1,
    )
    assert out["redacted"] == {"aws-access-key": 1}
    found = service.by_git(ByGitRequest.parse({"file": "app.py", "line": 1}))
    (text,) = [m.node.text for m in found.memories]
    assert "AKIAIOSFODNN7EXAMPLE" not in text
    assert "[REDACTED:" in text


# -- the matching rule, on its own ---------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    wanted=st.lists(st.integers(0, 5), min_size=1, max_size=6),
    hashes=st.lists(st.integers(0, 5), max_size=30),
    data=st.data(),
)
def test_placement_is_increasing_unique_and_only_on_new_equal_lines(
    wanted: list[int], hashes: list[int], data: st.DataObject
) -> None:
    new = data.draw(st.lists(st.booleans(), min_size=len(hashes), max_size=len(hashes)))
    placed = _place(wanted, hashes, new)
    lines = [n for first, last in placed for n in range(first, last + 1)]
    assert lines == sorted(set(lines))  # increasing, no line twice
    assert len(lines) <= len(wanted)
    for n in lines:
        assert new[n - 1], "only lines committed after the base"
        assert hashes[n - 1] in wanted
    for first, last in placed:  # each run occurs once among the new lines
        run = hashes[first - 1 : last]
        seq = [h if ok else None for h, ok in zip(hashes, new, strict=True)]
        starts = [j for j in range(len(seq)) if seq[j : j + len(run)] == run]
        assert starts == [first - 1]


def test_placement_finds_the_run_among_others() -> None:
    assert _place([7, 8, 9], [1, 7, 8, 9, 2], [True] * 5) == [(2, 4)]
    assert _place([7, 8, 9], [7, 8, 9, 7, 8, 9], [True] * 6) == []  # twice: ambiguous
    assert _place([7, 8, 9], [7, 8, 9, 7, 8, 9], [False] * 3 + [True] * 3) == [(4, 6)]
    assert _place([7, 5, 9], [7, 8, 9], [True] * 3) == [(1, 1), (3, 3)]  # middle edited


# -- the CLI ----------------------------------------------------------------------------------


def _mem(*argv: str, cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "POIMEN_CONFIG": str(cwd / "no-config.toml")},
    )
    return done.returncode, done.stdout, done.stderr


def test_cli_remember_then_commit_then_resolve_pending(
    repo: FixtureRepo, store_dsn: str, project: ProjectId
) -> None:
    lines = repo.lines("app.py")
    lines[7:7] = ["timeout = 90  # the gateway's"]
    repo.write("app.py", "\n".join(lines) + "\n")
    common = ["--dsn", store_dsn, "--project", project.value]
    code, out, err = _mem(
        "remember", "app.py:8", "Matches the gateway timeout.", "--json", *common, cwd=repo.root
    )
    assert code == 0, err
    body = json.loads(out)
    assert body["anchored"] == []
    assert body["pending"][0]["line_start"] == 8
    code, out, err = _mem(
        "remember", "app.py:8", "Matches the gateway timeout.", *common, cwd=repo.root
    )
    assert code == 0, err
    assert out.startswith("already remembered")
    code, out, err = _mem("remember", "app.py:99", "x", *common, cwd=repo.root)
    assert code == 2
    assert err.strip() == "mem: error: line: 99 is beyond the end of app.py (21 lines)"
    repo.commit("timeout", "Gateway timeout", BOB)
    code, out, err = _mem("db", "resolve-pending", "--json", *common, cwd=repo.root)
    assert code == 0, err
    assert json.loads(out)["repos"][0]["anchors"] == 1
    code, out, err = _mem("by-git", "app.py:8", "--json", *common, cwd=repo.root)
    assert code == 0, err
    assert [n["text"] for n in json.loads(out)["nodes"]] == ["Matches the gateway timeout."]


# -- what must never be taken for the remembered lines ----------------------------------------


def _insert(repo: FixtureRepo, at: int, new: list[str], path: str = "app.py") -> None:
    lines = repo.lines(path)
    lines[at:at] = new
    repo.write(path, "\n".join(lines) + "\n")


def test_one_matching_line_of_a_rewritten_block_elsewhere_is_not_the_memory(
    service: LookupService, repo: FixtureRepo
) -> None:
    """Of two remembered lines, only one's text comes back, in other code: not enough to be
    them."""
    recorder = Recorder(service)
    _insert(repo, 3, ["def g(x):", "    if x:", "        return None", "    return x"])
    _remember(recorder, text="g bails out on falsy x.", file="app.py", lines=[5, 6])
    repo.write("app.py", numbered("# app", 20))
    _insert(repo, 3, ["def g(x):", "    return x or 0", "def h(y):", "    for i in y:"])
    _insert(repo, 7, ["        return None"])
    repo.commit("rewrite", "Rewrite g, add h", BOB)
    for line in range(1, 26):
        assert _texts(service, repo, line) == [], line


def test_lines_committed_on_another_branch_are_not_the_memory(
    service: LookupService, repo: FixtureRepo
) -> None:
    recorder = Recorder(service)
    repo.git("checkout", "-q", "-b", "feature")
    repo.set_line("app.py", 1, "# feature work")
    repo.commit("feature", "Feature", ALICE)
    _insert(repo, 2, ["retries = 5", "backoff = exponential(base=2)"])
    out = _remember(recorder, text="Five retries for the feature.", file="app.py", lines=[3, 4])
    assert out["pending"]
    repo.git("stash", "-q")
    repo.git("checkout", "-q", "main")
    _insert(repo, 1, ["retries = 5", "backoff = exponential(base=2)"])
    repo.commit("main", "Same text on main", BOB)
    assert _texts(service, repo, 2) == []
    assert _texts(service, repo, 3) == []
    project = ProjectId(out["project"])  # type: ignore[arg-type]
    assert service.store.pending_files(project, service.checkouts.identities()[0]) == {"app.py"}


def test_expired_lines_are_not_resolved_by_a_lookup(
    service: LookupService, repo: FixtureRepo, store_dsn: str
) -> None:
    recorder = Recorder(service)
    _insert(repo, 5, ["cache = LRU(4096)", "cache.warm(keys)"])
    out = _remember(recorder, text="4096 entries hold a day of keys.", file="app.py", lines=[6, 7])
    with psycopg.connect(store_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pending_anchor SET expires_at = now() - interval '1 second' WHERE project = %s",
            (out["project"],),
        )
    repo.commit("cache", "Cache", BOB)
    assert _texts(service, repo, 6) == []
    assert _texts(service, repo, 7) == []


@pytest.mark.parametrize("file", [".git/config", ".GIT/HEAD", "sub/.git/x", "secret.env"])
def test_files_git_never_commits_are_refused(
    service: LookupService, repo: FixtureRepo, file: str
) -> None:
    repo.write(".gitignore", "*.env\n")
    repo.write("secret.env", "PASSWORD=hunter2\n")
    with pytest.raises(LookupInputError) as caught:
        Recorder(service).remember(RememberRequest.parse({"text": "x", "file": file, "line": 1}))
    assert caught.value.field == "file"


def test_a_file_under_a_linked_directory_is_not_read(
    service: LookupService, repo: FixtureRepo, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("secret = 1\n")
    (repo.root / "linkdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(LookupInputError) as caught:
        Recorder(service).remember(
            RememberRequest.parse({"text": "x", "file": "linkdir/x.py", "line": 1})
        )
    assert caught.value.field == "file"


def test_a_store_without_pending_anchors_says_to_migrate(
    repo: FixtureRepo, project: ProjectId, tmp_path: Path
) -> None:
    """A store at schema 5: a lookup never fails on the missing table (it answers, or says
    the store needs migrating); remembering uncommitted lines says to migrate and writes
    nothing."""
    from .conftest import create_database, drop_database

    name, dsn = create_database("pending_old_schema")
    try:
        with psycopg.connect(dsn) as conn:
            migrate(conn)
            conn.execute("DROP TABLE pending_anchor")
            conn.execute("DELETE FROM poimen_schema_version WHERE version = 6")
        with Store(dsn) as old:
            service = build_service(
                old,
                [repo.root],
                project,
                cache_path=tmp_path / "b.db",
                shared_blames=False,
                pending=pending_resolver(old),
            )
            recorder = Recorder(service)
            said = ""
            try:
                answer = service.hover(HoverRequest(file=str(repo.root / "app.py"), line=3))
            except StoreUnavailable as exc:
                answer, said = None, str(exc)
            assert answer is None
            assert said == "" or "mem db migrate" in said
            _insert(repo, 1, ["fresh = line()"])
            with pytest.raises(StoreUnavailable, match="mem db migrate"):
                recorder.remember(
                    RememberRequest.parse({"text": "new", "file": "app.py", "line": 2})
                )
            with psycopg.connect(dsn) as conn:
                row = conn.execute("SELECT count(*) FROM memory_node").fetchone()
            assert row == (0,)
    finally:
        drop_database(name)
