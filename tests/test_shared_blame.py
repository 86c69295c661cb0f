"""The blame cache shared through the store: a teammate's first blame of a file costs one
query, never a wrong answer (rows are checked against the reader's own repository), and a
store that is down or older costs nothing but the speed-up."""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest

from poimen_memory.domain import CommitSha, ProjectId, RepoId, SharedBlame, SharedBlameLine
from poimen_memory.gitio import Blame, Blamer, GitError, GitRepo
from poimen_memory.gitio.blame import differences
from poimen_memory.gitio.shared import encode
from poimen_memory.lookup import Checkouts, HoverRequest, build_service, new_checkouts
from poimen_memory.lookup.shared_blames import SharedBlameGate, StoreSharedBlames
from poimen_memory.store import Store

from .conftest import create_database, drop_database
from .gitrepo import ALICE, BOB, FixtureRepo, clone, kong_repo
from .scenes import APP, Scene, at, base, insert, memory, put
from .test_shared_blame_store import one_line_of

LEASES = "Leases are pinned to the tenant's region."

FILE = "src/kong/buffer.rs"


@pytest.fixture
def origin(tmp_path: Path) -> FixtureRepo:
    return kong_repo(tmp_path / "origin", remote=None)


def checkouts_for(tmp_path: Path, name: str, store: Store, project: ProjectId) -> Checkouts:
    known = new_checkouts(cache_path=tmp_path / f"{name}-cache.db")
    known.share_through(store, lambda _: project)
    return known


def no_git_blame(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> Blame:
        raise AssertionError("git blame ran")

    monkeypatch.setattr(repo, "blame", refuse)


def _parts(row: SharedBlame, blob: str, line: int) -> list[SharedBlameLine]:
    """What the store's blame_line gives for ``row``, a row of the blob ``blob``."""
    return [one_line_of(row, line)] if row.blob_id == blob else []


def test_a_teammates_first_blame_comes_from_the_shared_cache(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    mine = clone(str(origin.root), tmp_path / "mine")
    theirs = clone(str(origin.root), tmp_path / "theirs")
    a = checkouts_for(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / FILE)
    _first, source = blamer_a.blame_known(rel)
    assert source == "git"
    a.flush()
    b = checkouts_for(tmp_path, "b", store, project)
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    truth = blamer_b.repo.blame(rel_b, blamer_b.repo.head())
    no_git_blame(blamer_b.repo, monkeypatch)
    found, source = blamer_b.blame_known(rel_b)
    assert source == "shared"
    assert differences(found, truth) == []
    assert found.commits.keys() == truth.commits.keys()
    # A single line (a cold hover) too, from the local cache the shared row filled.
    assert blamer_b.origin(rel_b, 42) == truth.origin(42)
    status = store.status()
    assert status.blame_files >= 1
    assert status.blame_runs >= 1


def test_a_teammate_further_ahead_starts_from_the_shared_blame(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    mine = clone(str(origin.root), tmp_path / "mine")
    a = checkouts_for(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / FILE)
    blamer_a.blame_file(rel)
    a.flush()
    for n in (5, 50):
        origin.set_line(FILE, n, f"// later change {n}")
        origin.commit(f"later{n}", f"later {n}", BOB)
    theirs = clone(str(origin.root), tmp_path / "theirs")
    b = checkouts_for(tmp_path, "b", store, project)
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    truth = blamer_b.repo.blame(rel_b, blamer_b.repo.head())
    no_git_blame(blamer_b.repo, monkeypatch)
    found, source = blamer_b.blame_known(rel_b)
    assert source == "incremental"
    assert differences(found, truth) == []


def _shared_row_for(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId
) -> tuple[StoreSharedBlames, FixtureRepo, str]:
    mine = clone(str(origin.root), tmp_path / "mine")
    a = checkouts_for(tmp_path, "a", store, project)
    identity, blamer_a, rel = a.locate(mine.root / FILE)
    blamer_a.blame_file(rel)
    a.flush()
    gate = SharedBlameGate(store)
    return StoreSharedBlames(gate, lambda: project, identity), mine, rel


@pytest.mark.parametrize("forgery", ["blob", "commit", "runs"])
def test_a_row_the_readers_repository_does_not_vouch_for_is_not_used(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId, forgery: str
) -> None:
    shared, mine, rel = _shared_row_for(tmp_path, origin, store, project)
    repo = GitRepo.discover(mine.root)
    last = repo.last_commit(rel, repo.head())
    fingerprint = repo.shared_blame_fingerprint()
    row = shared.get(rel, last.value, fingerprint)
    assert row is not None
    if forgery == "blob":  # another file's content under the same key
        row = replace(row, blob_id="0" * 40)
    elif forgery == "commit":  # lines blamed on a commit this clone has never seen
        stranger = "1234567890" * 4
        row = replace(
            row,
            commits=(*row.commits, (stranger, "M", "m@x", 0, "s", False)),
            runs=((stranger, rel, 1, 1), *((c, p, s, n) for c, p, s, n in row.runs[1:]),
                  *(((row.runs[0][0], row.runs[0][1], row.runs[0][2] + 1,
                      row.runs[0][3] - 1),) if row.runs[0][3] > 1 else ())),
        )  # fmt: skip
    else:  # runs that do not add up to the file
        row = replace(row, line_count=row.line_count + 3)
    shared.gate.store.put_blame(
        project,
        shared.repo,
        __import__("poimen_memory.store", fromlist=["SharedBlame"]).SharedBlame(
            path=row.path, commit=row.commit, fingerprint=row.fingerprint, blob_id=row.blob_id,
            line_count=row.line_count, commits=row.commits, runs=row.runs,
        ),
    ) if forgery != "runs" else None  # fmt: skip
    b = new_checkouts(cache_path=tmp_path / "b-cache.db")
    theirs = clone(str(origin.root), tmp_path / "theirs")
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    if forgery == "runs":
        # The store refuses such a row; a reader given one anyway refuses it too.
        blamer_b.shared = type("Fake", (), {
            "get": lambda self, *a: row, "commits_with": lambda self, *a: set(),
            "line": lambda self, path, fp, blob, n: _parts(row, blob, n),
            "has_path": lambda self, *a: True, "put": lambda self, r: None})()  # fmt: skip
    else:
        blamer_b.shared = StoreSharedBlames(SharedBlameGate(store), lambda: project, shared.repo)
    found, source = blamer_b.blame_known(rel_b)
    assert source == "git"
    assert differences(found, blamer_b.repo.blame(rel_b, blamer_b.repo.head())) == []


def test_settings_that_change_blame_keep_rows_apart(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId
) -> None:
    _, mine, _rel = _shared_row_for(tmp_path, origin, store, project)
    theirs = clone(str(origin.root), tmp_path / "theirs")
    (theirs.root / ".mailmap").write_text("Someone Else <else@x> <bob@org.test>\n")
    b = checkouts_for(tmp_path, "b", store, project)
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    assert (
        blamer_b.repo.shared_blame_fingerprint()
        != GitRepo.discover(mine.root).shared_blame_fingerprint()
    )
    _, source = blamer_b.blame_known(rel_b)
    assert source == "git"
    # Two clones with the same settings in different directories share one fingerprint.
    other = clone(str(origin.root), tmp_path / "elsewhere" / "deep")
    assert (
        GitRepo.discover(other.root).shared_blame_fingerprint()
        == GitRepo.discover(mine.root).shared_blame_fingerprint()
    )


def test_rows_are_scoped_to_project_and_repository(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId
) -> None:
    shared, mine, rel = _shared_row_for(tmp_path, origin, store, project)
    repo = GitRepo.discover(mine.root)
    last = repo.last_commit(rel, repo.head()).value
    fingerprint = repo.shared_blame_fingerprint()
    assert shared.get(rel, last, fingerprint) is not None
    elsewhere = StoreSharedBlames(shared.gate, lambda: ProjectId("other-project"), shared.repo)
    assert elsewhere.get(rel, last, fingerprint) is None
    assert elsewhere.commits_with(rel, fingerprint, [last]) == set()
    fork = StoreSharedBlames(shared.gate, lambda: project, RepoId("github.com/someone/fork"))
    assert fork.get(rel, last, fingerprint) is None
    assert fork.commits_with(rel, fingerprint, [last]) == set()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_with_the_store_down_blame_works_and_asks_once(tmp_path: Path, origin: FixtureRepo) -> None:
    down = Store(f"postgresql://u@127.0.0.1:{_closed_port()}/x", timeout=1, lazy=True)
    known = new_checkouts(cache_path=tmp_path / "cache.db")
    known.share_through(down, lambda _: ProjectId("p"))
    _, blamer, rel = known.locate(origin.root / FILE)
    started = time.monotonic()
    found, source = blamer.blame_known(rel)
    assert source == "git"
    assert differences(found, blamer.repo.blame(rel, blamer.repo.head())) == []
    origin.set_line(FILE, 7, "// seven")
    origin.commit("seven", "seven", BOB)
    blamer.invalidate()
    _again, source = blamer.blame_known(rel)
    assert source == "incremental"  # the local cache still serves as a checkpoint
    assert time.monotonic() - started < 10
    gate = known._gate
    assert gate is not None
    assert not gate.open()


def test_an_older_store_without_the_tables_is_left_alone(
    tmp_path: Path, origin: FixtureRepo
) -> None:
    name, dsn = create_database("unmigrated")
    try:
        _older_store(tmp_path, origin, dsn)
    finally:
        drop_database(name)


def _older_store(tmp_path: Path, origin: FixtureRepo, dsn: str) -> None:
    with Store(dsn) as unmigrated:
        known = new_checkouts(cache_path=tmp_path / "cache.db")
        known.share_through(unmigrated, lambda _: ProjectId("p"))
        _, blamer, rel = known.locate(origin.root / FILE)
        found, source = blamer.blame_known(rel)
        known.flush()
        assert source == "git"
        assert found.lines
        gate = known._gate
        assert gate is not None
        assert not gate.open()


def test_no_sharing_when_turned_off(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId
) -> None:
    known = new_checkouts(cache_path=tmp_path / "cache.db")  # no share_through
    _, blamer, rel = known.locate(origin.root / FILE)
    assert blamer.shared is None
    blamer.blame_file(rel)
    repo = blamer.repo
    last = repo.last_commit(rel, repo.head()).value
    assert store.blames_at(project, repo.identity(), rel, repo.shared_blame_fingerprint(),
                           [last]) == set()  # fmt: skip
    with pytest.raises(GitError):
        repo.last_commit("no/such/file", CommitSha(last))


def _teammate(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Blamer, str, Blame]:  # fmt: skip
    """A teammate's clone whose file someone has blamed and shared: its blamer (git blame
    forbidden), the file, and git's blame of it."""
    mine = clone(str(origin.root), tmp_path / "mine")
    a = checkouts_for(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / FILE)
    blamer_a.blame_file(rel)
    a.flush()
    theirs = clone(str(origin.root), tmp_path / "theirs")
    b = checkouts_for(tmp_path, "b", store, project)
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    truth = blamer_b.repo.blame(rel_b, blamer_b.repo.head())
    no_git_blame(blamer_b.repo, monkeypatch)
    return blamer_b, rel_b, truth


def test_a_teammates_first_hover_reads_one_line_of_the_shared_row(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A cold hover takes its line from the shared row (blob and the line's commit checked),
    with no git blame; the whole row is checked and cached behind it."""
    blamer_b, rel_b, truth = _teammate(tmp_path, origin, store, project, monkeypatch)
    for line in (1, 42, len(truth.lines)):
        assert blamer_b.origin(rel_b, line) == truth.origin(line)
    assert blamer_b.origin(rel_b, len(truth.lines) + 1) is None
    deadline = time.monotonic() + 10
    while blamer_b.sources["shared"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert blamer_b.sources["shared"] >= 1  # the whole row, checked, reached the cache


def test_a_teammates_first_hover_reads_only_its_line_s_run_before_answering(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The first hover in a fresh clone reads one run of the shared row (by the file's blob)
    and answers from it once vouched for; the whole row is read only afterwards, in the
    background, and then serves the next lines."""
    blamer_b, rel_b, truth = _teammate(tmp_path, origin, store, project, monkeypatch)
    shared = blamer_b.shared
    assert shared is not None
    calls: list[str] = []
    for name in ("get", "line"):
        real = getattr(shared, name)
        monkeypatch.setattr(
            shared, name, lambda *a, _real=real, _name=name: (calls.append(_name), _real(*a))[1]
        )
    line = len(truth.lines) // 2
    assert blamer_b.origin(rel_b, line) == truth.origin(line)
    assert calls == ["line"]
    deadline = time.monotonic() + 10
    while blamer_b.sources["shared"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls == ["line", "get"]  # the whole row, checked behind the answer
    assert blamer_b.sources["shared"] == 1
    assert blamer_b.origin(rel_b, 1) == truth.origin(1)
    assert calls == ["line", "get"]


def test_a_hover_line_whose_commit_this_clone_lacks_is_blamed_by_git(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId
) -> None:
    shared, mine, rel = _shared_row_for(tmp_path, origin, store, project)
    repo = GitRepo.discover(mine.root)
    last = repo.last_commit(rel, repo.head())
    row = shared.get(rel, last.value, repo.shared_blame_fingerprint())
    assert row is not None
    stranger = "fedcba9876" * 4
    first = row.runs[0]
    forged = replace(
        row,
        commits=(*row.commits, (stranger, "M", "m@x", 0, "s", False)),
        runs=((stranger, rel, 1, 1), (first[0], first[1], first[2] + 1, first[3] - 1),
              *row.runs[1:]) if first[3] > 1 else ((stranger, rel, 1, 1), *row.runs[1:]),
    )  # fmt: skip
    theirs = clone(str(origin.root), tmp_path / "theirs")
    b = new_checkouts(cache_path=tmp_path / "b-cache.db")
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    blamer_b.shared = type("Fake", (), {
        "get": lambda self, *a: forged, "commits_with": lambda self, *a: set(),
        "line": lambda self, path, fp, blob, n: _parts(forged, blob, n),
        "has_path": lambda self, *a: True, "put": lambda self, r: None})()  # fmt: skip
    truth = blamer_b.repo.blame(rel_b, blamer_b.repo.head())
    assert blamer_b.origin(rel_b, 1) == truth.origin(1)


def test_a_file_no_one_has_blamed_is_blamed_without_walking_its_history(
    tmp_path: Path, origin: FixtureRepo, store: Store, project: ProjectId
) -> None:
    """With the shared cache on and no blame of the file anywhere (here or in the store),
    a whole-file blame and a cold hover run git blame alone: no walk of the file's history
    for a checkpoint that cannot exist. Once the file is shared, another clone walks."""
    mine = clone(str(origin.root), tmp_path / "mine")
    log = tmp_path / "git-calls.log"
    shim = tmp_path / "shim-git"
    shim.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec git "$@"\n')
    shim.chmod(0o755)

    def walks() -> list[str]:
        """The calls since the last look that walk history for checkpoints (``rev-list
        --max-count=N``; the cache key's ``rev-list -1`` is not one)."""
        calls = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return [c for c in calls if " rev-list " in f" {c} " and "--max-count=" in c]

    a = checkouts_for(tmp_path, "a", store, project)
    _, blamer_a, rel = a.locate(mine.root / FILE)
    blamer_a.repo.runner.git = str(shim)
    assert blamer_a.origin(rel, 3) is not None
    assert walks() == []
    _, source = blamer_a.blame_known(rel)
    assert source == "git"
    assert walks() == []
    a.flush()
    theirs = clone(str(origin.root), tmp_path / "theirs")
    b = checkouts_for(tmp_path, "b", store, project)
    _, blamer_b, rel_b = b.locate(theirs.root / FILE)
    blamer_b.repo.runner.git = str(shim)
    assert blamer_b.origin(rel_b, 3) is not None
    assert walks() != []  # a blame of the file is known: worth a walk


def test_a_shared_row_s_line_the_repository_does_not_vouch_for_never_shows_its_memories(
    scene: Scene,
) -> None:
    """A row that maps a line onto another commit's line holding a memory: the hover looks
    that memory up while the line is checked (to answer sooner), yet shows the line's own
    origin's memories, never the row's."""
    repo = scene.repo
    put(repo, APP, base("q"))
    initial = repo.commit("initial", "Initial app", BOB)
    insert(repo, APP, 4, ["    let lease = pool.lease(tenant)?;", "    lease.pin(region);"])
    leased = repo.commit("A", "Lease per tenant", ALICE)
    scene.ingest([memory(LEASES, at(APP, 5, 6))])
    git = GitRepo.discover(repo.root)
    head = git.head()
    truth = git.blame(APP, head)
    one = truth.origin(1)
    assert one is not None
    assert one.commit.value == initial
    row = encode(truth, git.shared_blame_fingerprint(), git.blob_id(head, APP) or "")
    first = row.runs[0]
    assert first[0] == initial
    assert first[3] > 1
    forged = replace(
        row, runs=((leased, APP, 5, 1), (first[0], first[1], first[2] + 1, first[3] - 1),
                   *row.runs[1:]),
    )  # fmt: skip
    scene.store.put_blame(scene.project, git.identity(), forged)
    service = build_service(
        scene.store, [repo.root], scene.project, cache_path=scene.tmp / "fresh-cache.db"
    )
    found = service.hover(HoverRequest(file=str(repo.root / APP), line=1))
    assert found is None or LEASES not in {m.node.text for m in found.memories}
    shown = service.hover(HoverRequest(file=str(repo.root / APP), line=5))
    assert shown is not None
    assert {m.node.text for m in shown.memories} == {LEASES}
    # Line 5's origin is where the row put line 1: the lookup made for line 1 while the row
    # was checked is not remembered as that origin's answer (it says line 1, and a memory
    # found there by its text would be line 1's text).
    assert {m.lines for m in shown.memories if m.node.text == LEASES} == {(5,)}
