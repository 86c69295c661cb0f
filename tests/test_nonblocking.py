"""Work run under ``errors.nonblocking()`` (how the language server answers a warm hover on its
event loop): it answers from memory exactly what a worker would, or raises WouldWait before it
waits on anything (git, the store, the disk cache, an answer not yet remembered) and before it
changes anything, so the worker that runs it again gives the full answer.

Real parts throughout: a git repository in ``tmp_path``, the test Postgres, the lookup service
and Recorder the LSP and MCP use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from poimen_memory.domain import CommitSha, ProjectId
from poimen_memory.errors import WouldWait, nonblocking
from poimen_memory.gitio import GitRepo, GitRunner
from poimen_memory.gitio.cache import BlameCache, CacheKey
from poimen_memory.lookup import HoverRequest, LookupService, RememberRequest, build_service
from poimen_memory.lookup.memo import Memo
from poimen_memory.recording import Recorder, pending_resolver
from poimen_memory.store import Store

from .gitrepo import ALICE, BOB, FixtureRepo, numbered

WORK = "src/engine.rs"
OTHER = "src/other.rs"
ARMED = "Launch only when armed."


@pytest.fixture
def work(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "work", f"git@github.com:org/{tmp_path.name}.git")
    repo.write(WORK, numbered("// engine", 20))
    repo.write(OTHER, numbered("// other", 5))
    repo.commit("base", "Initial engine", ALICE)
    return repo


@pytest.fixture
def service(store: Store, work: FixtureRepo, project: ProjectId, tmp_path: Path) -> LookupService:
    """The service as the language server builds it: pending anchors resolved on lookup."""
    return build_service(
        store,
        [work.root],
        project,
        cache_path=tmp_path / "blame.db",
        shared_blames=False,
        pending=pending_resolver(store),
    )


def _remember(service: LookupService, **body: object) -> dict[str, Any]:
    request = RememberRequest.parse(body)
    out: dict[str, Any] = Recorder(service).remember(request).model_dump(mode="json")
    return out


def _hover(service: LookupService, repo: FixtureRepo, line: int, path: str = WORK) -> list[str]:
    found = service.hover(HoverRequest(file=str(repo.root / path), line=line))
    return [] if found is None else [m.node.text for m in found.memories]


def _at_once(service: LookupService, repo: FixtureRepo, line: int) -> list[str]:
    """The hover as the event loop answers it (WouldWait when it would wait)."""
    with nonblocking():
        return _hover(service, repo, line)


# -- each place that may wait refuses under nonblocking() ----------------------------------------


def test_a_git_process_is_not_started(work: FixtureRepo) -> None:
    runner = GitRunner()
    with nonblocking(), pytest.raises(WouldWait):
        runner.run(work.root, ["rev-parse", "HEAD"])
    with nonblocking(), pytest.raises(WouldWait), runner.stream(work.root, ["log"]):
        pass
    assert runner.spawned == 0
    assert runner.run(work.root, ["rev-parse", "HEAD"]).returncode == 0  # and outside it, runs
    assert runner.spawned == 1


def test_the_store_is_not_connected_to(store: Store, work: FixtureRepo, project: ProjectId) -> None:
    repo_id = GitRepo.discover(work.root).identity()
    with nonblocking(), pytest.raises(WouldWait):
        store.pending_files(project, repo_id)
    assert store.pending_files(project, repo_id) == set()


def test_objects_are_not_read_in_process(work: FixtureRepo) -> None:
    repo = GitRepo.discover(work.root)
    head = repo.head()  # from the ref files: no process, allowed
    with nonblocking(), pytest.raises(WouldWait):
        repo.blob(head, WORK)
    assert repo.blob(head, WORK).startswith(b"// engine")


def test_the_blame_cache_is_not_read_from_disk(work: FixtureRepo, tmp_path: Path) -> None:
    repo = GitRepo.discover(work.root)
    cache = BlameCache(tmp_path / "cache.db")
    head = repo.head()
    key = CacheKey("repo", WORK, head, repo.blame_fingerprint())
    blame = repo.blame(WORK, head)
    cache.put(key, blame)
    cache.close()
    again = BlameCache(tmp_path / "cache.db")  # a new process: nothing in memory
    with nonblocking(), pytest.raises(WouldWait):
        again.line(key, 3)
    with nonblocking(), pytest.raises(WouldWait):
        again.get(key, head)
    assert again.line(key, 3) == blame.origin(3)
    assert again.get(key, head) is not None  # read into memory
    with nonblocking():
        assert again.line(key, 3) == blame.origin(3)


def test_an_answer_not_remembered_is_not_computed() -> None:
    memo: Memo[str, int] = Memo(8)
    computed: list[str] = []

    def compute() -> int:
        computed.append("x")
        return 1

    with nonblocking(), pytest.raises(WouldWait):
        memo.get_or_compute("k", compute)
    assert computed == []
    assert memo.get_or_compute("k", compute) == 1
    with nonblocking():
        assert memo.get_or_compute("k", compute) == 1
    assert computed == ["x"]


# -- the hover: the worker's answer, or none at all -----------------------------------------------


def test_a_warm_hover_is_the_workers_answer(service: LookupService, work: FixtureRepo) -> None:
    out = _remember(service, text=ARMED, file=WORK, lines=[7, 9])
    assert out["anchored"], out
    with pytest.raises(WouldWait):
        _at_once(service, work, 8)  # cold: git and the store are needed
    assert _hover(service, work, 8) == [ARMED]
    assert _at_once(service, work, 8) == [ARMED]
    assert _at_once(service, work, 8) == [ARMED]


def test_head_moving_makes_the_warm_hover_wait(service: LookupService, work: FixtureRepo) -> None:
    _remember(service, text=ARMED, file=WORK, lines=[7, 9])
    assert _hover(service, work, 8) == [ARMED]
    assert _at_once(service, work, 8) == [ARMED]
    work.set_line(WORK, 8, "    launch(rocket);")  # line 8 now from a commit with no memory
    work.commit("launch", "Launch", BOB)
    with pytest.raises(WouldWait):
        _at_once(service, work, 8)
    assert _hover(service, work, 8) == []


def test_a_new_memory_makes_the_warm_hover_wait(service: LookupService, work: FixtureRepo) -> None:
    _remember(service, text=ARMED, file=WORK, lines=[7, 9])
    assert _hover(service, work, 8) == [ARMED]
    service.invalidate()  # what the server does when the store says memories arrived
    with pytest.raises(WouldWait):
        _at_once(service, work, 8)
    assert _hover(service, work, 8) == [ARMED]


def test_a_pending_line_committed_is_settled_by_the_worker(
    service: LookupService, work: FixtureRepo
) -> None:
    """Remembered before it was committed; once committed, the first hover of the file
    anchors it. A hover that would do that on the event loop waits instead, leaving it to
    be settled: the worker's hover shows the memory."""
    lines = work.lines(WORK)
    work.write(WORK, "\n".join([*lines[:5], "    if armed {", "    }", *lines[5:]]) + "\n")
    out = _remember(service, text=ARMED, file=WORK, lines=[6, 7])
    assert out["pending"], out
    work.commit("armed", "Launch when armed", BOB)
    assert _hover(service, work, 2, OTHER) == []  # the repository's pending files, read
    with pytest.raises(WouldWait):
        _at_once(service, work, 6)
    assert _hover(service, work, 6) == [ARMED]
    assert _at_once(service, work, 6) == [ARMED]


def test_outside_nonblocking_nothing_refuses(work: FixtureRepo) -> None:
    repo = GitRepo.discover(work.root)
    assert isinstance(repo.head(), CommitSha)
    assert repo.blob(repo.head(), OTHER).startswith(b"// other")
