"""``mem blame``: the blame the server computes, through its caches and checkpoints, and
``--verify`` against ``git blame --porcelain``; and the incremental blame on this project's
own history, every file at every commit that touched it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from poimen_memory.cli import main
from poimen_memory.domain import CommitSha
from poimen_memory.gitio import Blame, BlameCache, BlameLine, Blamer, GitRepo
from poimen_memory.gitio.blame import differences

from .gitrepo import BOB, CAROL, FixtureRepo, kong_repo

FILE = "src/kong/buffer.rs"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def kong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FixtureRepo:
    monkeypatch.setenv("POIMEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("POIMEN_DSN", raising=False)
    return kong_repo(tmp_path / "kong")


def porcelain(repo: FixtureRepo, path: str, rev: str = "HEAD") -> list[tuple[str, str, int]]:
    """git blame --porcelain, read here independently of gitio's parser."""
    out = repo.git("blame", "--porcelain", "--root", rev, "--", path)
    lines, files = [], {}
    current = None
    for line in out.splitlines():
        head = line.split(" ")
        if len(head) >= 3 and len(head[0]) == 40 and current is None:
            current = (head[0], int(head[1]))
        elif line.startswith("filename "):
            assert current is not None
            files[current[0]] = line[len("filename ") :]
        elif line.startswith("\t"):
            assert current is not None
            lines.append((current[0], files[current[0]], current[1]))
            current = None
    return lines


def blame_json(
    capsys: pytest.CaptureFixture[str], repo: FixtureRepo, *extra: str
) -> tuple[int, dict[str, object]]:
    code = main(["blame", FILE, "--repo", str(repo.root), "--json", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out)


def as_tuples(body: dict[str, object]) -> list[tuple[str, str, int]]:
    lines = body["lines"]
    assert isinstance(lines, list)
    return [(x["commit"], x["orig_path"], x["orig_line"]) for x in lines]


def test_mem_blame_json_is_git_blame_then_comes_from_the_cache(
    kong: FixtureRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    code, body = blame_json(capsys, kong, "--verify")
    assert code == 0
    assert body["source"] == "git"
    assert body["verified"] is True
    assert body["differences"] == []
    assert body["file"] == FILE
    assert body["commit"] == kong.git("rev-parse", "HEAD").strip()
    assert as_tuples(body) == porcelain(kong, FILE)
    code, again = blame_json(capsys, kong)
    assert code == 0
    assert again["source"] == "cache"
    assert as_tuples(again) == as_tuples(body)


def test_mem_blame_after_new_commits_is_incremental_and_verified(
    kong: FixtureRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    blame_json(capsys, kong)
    for n, who in ((10, BOB), (42, CAROL), (3, BOB)):
        kong.set_line(FILE, n, f"// changed line {n}")
        kong.commit(f"c{n}", f"change {n}", who)
    lines = kong.lines(FILE)
    kong.write(FILE, "\n".join(["// top", *lines[:20], *lines[25:]]) + "\n")
    kong.commit("move", "insert and delete", CAROL)
    code, body = blame_json(capsys, kong, "--verify")
    assert code == 0, body["differences"]
    assert body["source"] == "incremental"
    assert body["verified"] is True
    assert as_tuples(body) == porcelain(kong, FILE)


def test_mem_blame_at_a_past_revision(
    kong: FixtureRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    code, body = blame_json(capsys, kong, "--at", "HEAD~1", "--verify")
    assert code == 0
    assert body["verified"] is True
    assert body["commit"] == kong.git("rev-parse", "HEAD~1").strip()
    assert as_tuples(body) == porcelain(kong, FILE, "HEAD~1")


def test_mem_blame_text_output(kong: FixtureRepo, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["blame", FILE, "--repo", str(kong.root), "--verify"])
    out, _ = capsys.readouterr()
    assert code == 0
    *rows, summary = out.splitlines()
    want = porcelain(kong, FILE)
    assert len(rows) == len(want)
    text = kong.lines(FILE)
    for n, (row, (sha, path, orig)) in enumerate(zip(rows, want, strict=True), start=1):
        assert row.startswith(f"{sha[:8]} {path}:{orig} ")
        assert row.endswith(f"{n}) {text[n - 1]}")
    assert "identical to git blame" in summary


def test_mem_blame_verify_reports_every_line_that_differs(
    kong: FixtureRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """--verify really compares: a cache entry made wrong on purpose is caught line by line."""
    blame_json(capsys, kong)
    repo = GitRepo.discover(kong.root)
    cache = BlameCache(Path(kong.root.parent / "cache" / "blame.sqlite3"))
    blamer = Blamer(repo, cache)
    good = blamer.blame_file(FILE)
    other = next(iter(good.commits))
    wrong = [
        BlameLine(x.line, other, x.orig_path, x.orig_line + (1 if x.line in (5, 9) else 0))
        for x in good.lines
    ]
    cache.put(blamer.key(FILE, good.rev), Blame(FILE, good.rev, tuple(wrong), good.commits))
    cache.close()
    code, body = blame_json(capsys, kong, "--verify")
    assert code == 1
    assert body["verified"] is False
    differing = body["differences"]
    assert isinstance(differing, list)
    expected = {x.line for x in good.lines if x.commit != other} | {5, 9}
    assert {d["line"] for d in differing} == expected
    code = main(["blame", FILE, "--repo", str(kong.root), "--verify"])
    out = capsys.readouterr().out
    assert code == 1
    assert "line 5 differs: mem" in out
    assert out.splitlines()[-1].endswith("lines differ from git blame")


def test_mem_blame_errors_are_one_line(
    kong: FixtureRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["blame", FILE, "--repo", str(kong.root), "--at", "no-such-rev"])
    err = capsys.readouterr().err
    assert code == 1
    assert "no-such-rev" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    code = main(["blame", FILE, "--repo", str(kong.root), "--at=--output=/tmp/x"])
    err = capsys.readouterr().err
    assert code in (1, 2)
    assert "looks like an option" in err
    code = main(["blame", "missing.rs", "--repo", str(kong.root)])
    err = capsys.readouterr().err
    assert code == 1
    assert "missing.rs" in err
    assert "Traceback" not in err


def _history_is_complete(root: Path) -> bool:
    done = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"],
        cwd=root, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode == 0 and done.stdout.strip() == "false"


@pytest.mark.skipif(not _history_is_complete(ROOT), reason="needs this project's full history")
def test_incremental_blame_on_this_projects_history(tmp_path: Path) -> None:
    """Every file of this repository, at every commit that touched it, oldest first: the
    blame computed from the previous one's cached blame is git's, line for line."""
    repo = GitRepo.discover(ROOT)
    blamer = Blamer(repo, BlameCache(tmp_path / "c.db"))
    head = repo.head()
    files = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", head.value],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    compared = 0
    for path in files:
        commits = subprocess.run(
            ["git", "rev-list", "--reverse", head.value, "--", path],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        for sha in commits:
            commit = CommitSha(sha)
            if (commit, path) not in repo.existing([(commit, path)]):
                continue  # the commit deleted it
            if repo.is_binary(repo.blob(commit, path)):
                continue
            found, source = blamer.blame_known(path, commit)
            truth = repo.blame(path, commit)
            assert differences(found, truth) == [], (path, sha, source)
            compared += source == "incremental"
    assert compared >= 100
