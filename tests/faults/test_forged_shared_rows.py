"""A shared blame row edited in the store (every teammate's role may write it) so that a line
maps to another commit's line does not move memories in a teammate's clone: a row is used only
when each line's text at its origin is the text the line has now (the hover checks its own line,
the whole row is checked before it is cached), else the file is blamed here."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg

from poimen_memory.domain import ProjectId
from poimen_memory.gitio import GitRepo
from poimen_memory.gitio.blame import differences
from poimen_memory.lookup import (
    ByGitRequest,
    Checkouts,
    HoverRequest,
    LookupService,
    RememberRequest,
    build_service,
    new_checkouts,
)
from poimen_memory.recording import Recorder
from poimen_memory.store import Store

from ..gitrepo import ALICE, BOB, FixtureRepo, clone, kong_repo, numbered

FILE = "src/kong/buffer.rs"


def _checkouts(tmp_path: Path, name: str, store: Store, project: ProjectId) -> Checkouts:
    known = new_checkouts(cache_path=tmp_path / f"{name}-cache.db")
    known.share_through(store, lambda _: project)
    return known


def _forge(
    store_dsn: str,
    project: ProjectId,
    runs: list[tuple[str, str, int, int]],
    path: str = FILE,
    extra: str | None = None,
) -> None:
    """Rewrite the runs of the project's one shared blame in SQL, as a teammate could."""
    key = project.value
    with psycopg.connect(store_dsn, autocommit=False) as conn:
        file_id = conn.execute(
            "SELECT id FROM blame_file WHERE project = %s AND path = %s", (key, path)
        ).fetchone()
        assert file_id is not None
        conn.execute("DELETE FROM blame_run WHERE project = %s AND file_id = %s", (key, file_id[0]))
        at = 1
        for seq, (sha, path, start, length) in enumerate(runs):
            conn.execute(
                "INSERT INTO blame_run (project, file_id, seq, line_start, orig_commit,"
                " orig_path, orig_start, length) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (key, file_id[0], seq, at, sha, path, start, length),
            )
            at += length
        conn.execute(
            "UPDATE blame_file SET run_count = %s WHERE project = %s AND id = %s",
            (len(runs), key, file_id[0]),
        )
        if extra is not None:  # a commit the honest row does not name, with its metadata
            conn.execute(
                "UPDATE blame_file SET commits = commits || %s::jsonb"
                " WHERE project = %s AND id = %s",
                (
                    json.dumps([[extra, "Bob", "bob@example.com", 0, "Unrelated", False]]),
                    key,
                    file_id[0],
                ),
            )


def _runs(lines: list[tuple[str, str, int]]) -> list[tuple[str, str, int, int]]:
    runs: list[tuple[str, str, int, int]] = []
    for sha, path, start in lines:
        if runs and runs[-1][:2] == (sha, path) and runs[-1][2] + runs[-1][3] == start:
            runs[-1] = (sha, path, runs[-1][2], runs[-1][3] + 1)
        else:
            runs.append((sha, path, start, 1))
    return runs


def test_a_row_moving_a_line_onto_another_commits_line_is_not_used(
    tmp_path: Path, store: Store, store_dsn: str, project: ProjectId
) -> None:
    origin: FixtureRepo = kong_repo(tmp_path / "origin", remote=None)
    mine = clone(str(origin.root), tmp_path / "mine")
    a = _checkouts(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / FILE)
    truth = blamer_a.blame_file(rel)
    a.flush()
    text = (mine.root / FILE).read_bytes().split(b"\n")
    # Line `moved` is made to come from line `victim`'s origin: another commit, other text.
    moved = next(
        line for line in truth.lines
        if any(o.commit != line.commit for o in truth.lines) and text[line.line - 1].strip()
    )  # fmt: skip
    victim = next(
        o for o in truth.lines
        if o.commit != moved.commit and text[o.line - 1] != text[moved.line - 1]
    )  # fmt: skip
    lines = [(o.commit.value, o.orig_path, o.orig_line) for o in truth.lines]
    lines[moved.line - 1] = (victim.commit.value, victim.orig_path, victim.orig_line)
    _forge(store_dsn, project, _runs(lines))

    theirs = clone(str(origin.root), tmp_path / "theirs")
    b = _checkouts(tmp_path, "b", store, project)
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    # The hover (one line from the shared row) gets the line's true origin...
    assert blamer_b.origin(rel_b, moved.line) == truth.origin(moved.line)
    # ...and the refused row is not asked for (nor checked) again by this process.
    shared = blamer_b.shared
    assert shared is not None
    asked: list[str] = []
    real_get = shared.get

    def counting_get(path: str, commit: str, fingerprint: str) -> object:
        asked.append(path)
        return real_get(path, commit, fingerprint)

    shared.get = counting_get  # type: ignore[method-assign,assignment]
    assert blamer_b.origin(rel_b, moved.line + 1) == truth.origin(moved.line + 1)
    assert asked == []
    shared.get = real_get  # type: ignore[method-assign]
    # ...and so does a hover on a line the forger left alone, while the whole row, checked in
    # the background, never reaches the cache.
    other = next(o for o in truth.lines if o.line != moved.line)
    assert blamer_b.origin(rel_b, other.line) == truth.origin(other.line)
    time.sleep(1.0)
    assert blamer_b.sources["shared"] == 0
    cached = blamer_b.cached(rel_b, blamer_b.repo.head())
    assert cached is None or differences(cached, truth) == []
    # The whole file (a lookup by git, the lenses) is blamed here, not taken from the row.
    found, source = blamer_b.blame_known(rel_b)
    assert source != "shared"
    assert differences(found, truth) == []
    assert found.origin(moved.line) == truth.origin(moved.line)


def test_an_honest_row_is_still_used(tmp_path: Path, store: Store, project: ProjectId) -> None:
    origin: FixtureRepo = kong_repo(tmp_path / "origin", remote=None)
    mine = clone(str(origin.root), tmp_path / "mine")
    a = _checkouts(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / FILE)
    truth = blamer_a.blame_file(rel)
    a.flush()
    theirs = clone(str(origin.root), tmp_path / "theirs")
    b = _checkouts(tmp_path, "b", store, project)
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    found, source = blamer_b.blame_known(rel_b)
    assert source == "shared"
    assert differences(found, truth) == []
    assert GitRepo.discover(theirs.root).head() == blamer_b.repo.head()


def _texts(service: LookupService, root: Path, line: int) -> tuple[list[str], list[str]]:
    """The memories a hover and a lookup by git show on ``line`` of app.py."""
    hover = service.hover(HoverRequest(file=str(root / "app.py"), line=line))
    by_git = service.by_git(ByGitRequest.parse({"file": "app.py", "line": line, "repo": str(root)}))
    return (
        [] if hover is None else [m.node.text for m in hover.memories],
        [m.node.text for m in by_git.memories],
    )


def test_a_forged_row_does_not_move_a_memory_in_a_teammates_clone(
    tmp_path: Path, store: Store, store_dsn: str, project: ProjectId
) -> None:
    origin = FixtureRepo.create(tmp_path / "origin")
    origin.write("app.py", numbered("# app", 20))
    origin.commit("base", "Initial", ALICE)
    origin.set_line("app.py", 5, "retry = 3  # the flaky upstream")
    five = origin.commit("five", "Retry upstream", BOB)
    origin.set_line("app.py", 12, "timeout = 30  # the slow disk")
    twelve = origin.commit("twelve", "Wait for the disk", ALICE)
    mine = clone(str(origin.root), tmp_path / "mine")
    service_a = build_service(
        store, [mine.root], project, cache_path=tmp_path / "a-memories.db", shared_blames=False
    )
    recorder = Recorder(service_a)
    for line, text in ((5, "Upstream drops one call in ten."), (12, "The disk stalls for 20 s.")):
        recorder.remember(RememberRequest.parse({"text": text, "file": "app.py", "line": line}))
    # The row a teammate shares, then edited in SQL: line 12 comes from line 5 of `five`.
    a = _checkouts(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / "app.py")
    truth = blamer_a.blame_file(rel)
    a.flush()
    assert truth.origin(12) is not None
    assert truth.origin(12).commit.value == twelve
    lines = [(o.commit.value, o.orig_path, o.orig_line) for o in truth.lines]
    lines[12 - 1] = (five, "app.py", 5)
    _forge(store_dsn, project, _runs(lines), "app.py")

    theirs = clone(str(origin.root), tmp_path / "theirs")
    service_b = build_service(store, [theirs.root], project, cache_path=tmp_path / "b.db")
    assert _texts(service_b, theirs.root, 12) == (
        ["The disk stalls for 20 s."],
        ["The disk stalls for 20 s."],
    )
    assert _texts(service_b, theirs.root, 5) == (
        ["Upstream drops one call in ten."],
        ["Upstream drops one call in ten."],
    )


def test_a_row_naming_a_commit_that_did_not_change_the_file_is_not_used(
    tmp_path: Path, store: Store, store_dsn: str, project: ProjectId
) -> None:
    """The same text at the named line is not enough: a commit that left the file as its
    parent had it cannot be where git found a line (git passes the file to the parent)."""
    origin = FixtureRepo.create(tmp_path / "origin")
    origin.write("app.py", numbered("# app", 20))
    origin.commit("base", "Initial", ALICE)
    origin.set_line("app.py", 12, "timeout = 30  # the slow disk")
    origin.commit("twelve", "Wait for the disk", ALICE)
    origin.write("other.txt", "x\n")
    other = origin.commit("other", "Unrelated", BOB)
    mine = clone(str(origin.root), tmp_path / "mine")
    a = _checkouts(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / "app.py")
    truth = blamer_a.blame_file(rel)
    a.flush()
    lines = [(o.commit.value, o.orig_path, o.orig_line) for o in truth.lines]
    lines[12 - 1] = (other, "app.py", 12)  # `other` has this very text at line 12
    _forge(store_dsn, project, _runs(lines), "app.py", extra=other)

    theirs = clone(str(origin.root), tmp_path / "theirs")
    b = _checkouts(tmp_path, "b", store, project)
    _, blamer_b, rel_b = b.locate(theirs.root / "app.py")
    assert blamer_b.origin(rel_b, 12) == truth.origin(12)
    found, source = blamer_b.blame_known(rel_b)
    assert source != "shared"
    assert differences(found, truth) == []


def test_runs_claiming_lines_they_do_not_start_at_are_not_believed(
    tmp_path: Path, store: Store, store_dsn: str, project: ProjectId
) -> None:
    """A run's stored first line (what a hover's one-line read goes by) moved up by one, so
    that the line before it reads as the run's: no hover takes that mapping, and every line
    gets git's origin."""
    origin = FixtureRepo.create(tmp_path / "origin")
    origin.write("app.py", numbered("# app", 20))
    origin.commit("base", "Initial", ALICE)
    origin.set_line("app.py", 5, "retry = 3  # the flaky upstream")
    origin.commit("five", "Retry upstream", BOB)
    origin.set_line("app.py", 12, "timeout = 30  # the slow disk")
    origin.commit("twelve", "Wait for the disk", ALICE)
    mine = clone(str(origin.root), tmp_path / "mine")
    a = _checkouts(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / "app.py")
    truth = blamer_a.blame_file(rel)
    a.flush()
    with psycopg.connect(store_dsn) as conn:
        moved = conn.execute(
            "UPDATE blame_run SET line_start = line_start - 1"
            " WHERE project = %s AND seq IN (1, 3) RETURNING line_start",
            (project.value,),
        ).fetchall()
    assert sorted(s for (s,) in moved) == [4, 11]
    theirs = clone(str(origin.root), tmp_path / "theirs")
    for line in range(1, 21):  # each a first hover, in a clone of its own
        b = _checkouts(tmp_path, f"b{line}", store, project)
        _, blamer_b, rel_b = b.locate(theirs.root / "app.py")
        assert blamer_b.origin(rel_b, line) == truth.origin(line), line
