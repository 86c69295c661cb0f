"""Work run under ``errors.nonblocking()`` (how the language server answers a warm hover on its
event loop): it answers from memory exactly what a worker would, or raises WouldWait before it
waits on anything (git, the store, the disk cache, an answer not yet remembered) and before it
changes anything, so the worker that runs it again gives the full answer.

Real parts throughout: a git repository in ``tmp_path``, the test Postgres, the lookup service
and Recorder the LSP and MCP use.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from poimen_memory.domain import CommitSha, ProjectId
from poimen_memory.errors import WouldWait, may_wait, nonblocking
from poimen_memory.gitio import Blamer, GitRepo, GitRunner
from poimen_memory.gitio.cache import BlameCache, CacheKey
from poimen_memory.lookup import HoverRequest, LookupService, RememberRequest, build_service
from poimen_memory.lookup.memo import Memo
from poimen_memory.lsp import WAITS
from poimen_memory.lsp.server import PoimenServer
from poimen_memory.recording import Recorder
from poimen_memory.store import Store

from .gitrepo import ALICE, BOB, FixtureRepo, numbered
from .scenes import resolving_service

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
    return resolving_service(store, work, project, tmp_path)


def _remember(service: LookupService, **body: object) -> dict[str, Any]:
    request = RememberRequest.parse(body)
    out: dict[str, Any] = Recorder(service).remember(request).model_dump(mode="json")
    return out


def _hover(service: LookupService, repo: FixtureRepo, line: int, path: str = WORK) -> list[str]:
    found = service.hover(HoverRequest(file=str(repo.root / path), line=line))
    return [] if found is None else [m.node.text for m in found.memories]


def _background_blames_done() -> None:
    """Wait for the whole-file blames hovers start in the background (their git processes
    are not the ones a test counts)."""
    for thread in threading.enumerate():
        if thread.name == "poimen-blame":
            thread.join(30)


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
    for read in (
        lambda: again.has_path("repo", WORK, key.fingerprint),
        lambda: again.cached_commits("repo", WORK, key.fingerprint, [head]),
        lambda: again.head_file("repo", WORK, head),
    ):
        with nonblocking(), pytest.raises(WouldWait):
            read()
    assert again.line(key, 3) == blame.origin(3)
    assert again.get(key, head) is not None  # read into memory
    with nonblocking():
        assert again.line(key, 3) == blame.origin(3)


def test_the_blame_cache_is_not_waited_for_while_it_writes(
    work: FixtureRepo, tmp_path: Path
) -> None:
    """A blame in memory is read at once; while another thread holds the cache to write (here
    held up by another process's write to the file), a nonblocking reader gives up at once."""
    repo = GitRepo.discover(work.root)
    head, fingerprint = repo.head(), repo.blame_fingerprint()
    cache = BlameCache(tmp_path / "cache.db")
    kept, written = CacheKey("r", WORK, head, fingerprint), CacheKey("r", OTHER, head, fingerprint)
    cache.put(kept, repo.blame(WORK, head))
    other = sqlite3.connect(tmp_path / "cache.db", isolation_level=None, timeout=0)
    other.execute("BEGIN IMMEDIATE")  # another process writing the file
    writer = threading.Thread(target=cache.put, args=(written, repo.blame(OTHER, head)))
    try:
        writer.start()
        time.sleep(0.3)  # the writer holds the cache, waiting for the file
        started = time.monotonic()
        with nonblocking(), pytest.raises(WouldWait):
            cache.line(kept, 3)
        assert time.monotonic() - started < 0.5
    finally:
        other.execute("ROLLBACK")
        writer.join()
    expected = repo.blame(WORK, head).origin(3)
    with nonblocking():
        assert cache.line(kept, 3) == expected


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


def test_a_line_blamed_alone_is_not_kept_past_a_settings_change(work: FixtureRepo) -> None:
    """A line's origin remembered from ``git blame -L`` is the blame settings' answer: once
    ``.git-blame-ignore-revs`` names its commit, the line is blamed again (as the lenses are)."""
    first = work.commits["base"]
    work.set_line(WORK, 3, "// engine line three, reworded")
    moved = work.commit("reword", "Reword", BOB)
    work.set_line(WORK, 3, "// engine line three, reworded again")
    work.commit("again", "Reword again", BOB)
    repo = GitRepo.discover(work.root)
    blamer = Blamer(repo, BlameCache(None))
    head = repo.head()
    found = blamer.origin(WORK, 3, head)
    assert found is not None
    assert found.commit.value != first
    work.write(".git-blame-ignore-revs", f"{found.commit.value}\n")
    again = blamer.origin(WORK, 3, head)
    whole = blamer.blame_file(WORK, head).origin(3)
    assert again is not None
    assert whole is not None
    assert again.commit == whole.commit
    assert again.commit.value == moved


def test_a_file_of_a_repository_not_yet_found_waits(
    store: Store, work: FixtureRepo, project: ProjectId, tmp_path: Path
) -> None:
    found = build_service(store, [], project, cache_path=tmp_path / "b.db", shared_blames=False)
    found.checkouts.find_timeout = 2.0  # as the language server has it
    with nonblocking(), pytest.raises(WouldWait):
        _hover(found, work, 3)
    assert list(found.checkouts.identities()) == []  # not looked for on the loop
    assert _hover(found, work, 3) == []
    assert len(list(found.checkouts.identities())) == 1


def test_ref_files_and_blame_settings_read_again_wait(work: FixtureRepo) -> None:
    """HEAD and the blame settings are answered from memory while their files stay; once a
    commit moves HEAD, or a file the settings name changes, reading them again waits."""
    repo = GitRepo.discover(work.root)
    with nonblocking(), pytest.raises(WouldWait):
        repo.blame_fingerprint()  # the configuration not read yet
    head, fingerprint = repo.head(), repo.blame_fingerprint()
    with nonblocking():
        assert (repo.head(), repo.blame_fingerprint()) == (head, fingerprint)
    work.write(".git-blame-ignore-revs", f"{head.value}\n")
    with nonblocking(), pytest.raises(WouldWait):
        repo.blame_fingerprint()
    assert repo.blame_fingerprint() != fingerprint
    work.set_line(WORK, 2, "// moved on")
    work.commit("moved", "Move on", BOB)
    with nonblocking(), pytest.raises(WouldWait):
        repo.head()
    assert repo.head() != head


def test_no_blame_is_started_for_a_hover_that_waits(
    store: Store, work: FixtureRepo, project: ProjectId, tmp_path: Path
) -> None:
    """A buffer hovered before, with history, after HEAD moved (its text at HEAD unknown, and
    no blame cache on disk that could tell): the loop gives up before it would start a
    speculative ``git blame -L``."""
    (tmp_path / "a-file").write_text("")  # the cache cannot be made below it: memory only
    bare = build_service(
        store, [work.root], project, cache_path=tmp_path / "a-file" / "c.db", shared_blames=False
    )
    path = str(work.root / WORK)
    buffer = "\n".join(["// unsaved", *work.lines(WORK)]) + "\n"
    request = HoverRequest(file=path, line=4, text=buffer, history=1)
    bare.hover(request)
    work.write(OTHER, "// other, changed\n")
    work.commit("other", "Change the other file", BOB)
    runner = bare.checkouts.locate(path)[1].repo.runner
    bare.checkouts.locate(path)[1].repo.head()  # HEAD read again (that alone would wait)
    _background_blames_done()
    spawned = runner.spawned
    with nonblocking(), pytest.raises(WouldWait) as raised:
        bare.hover(request)
    assert raised.traceback[-2].name == "hover"  # given up in the hover itself
    time.sleep(0.3)
    assert runner.spawned == spawned


def test_an_unsaved_buffer_waits_until_it_is_mapped_and_then_answers_at_once(
    service: LookupService, work: FixtureRepo
) -> None:
    """A buffer whose text is new: the event loop starts no speculative blame and waits; once
    a worker has mapped it to HEAD, the same buffer is answered at once, as the worker did."""
    _remember(service, text=ARMED, file=WORK, lines=[7, 9])
    path = str(work.root / WORK)
    assert _hover(service, work, 8) == [ARMED]
    lines = work.lines(WORK)
    edited = "\n".join(["// a new first line", *lines]) + "\n"  # line 8 is now line 9
    request = HoverRequest(file=path, line=9, text=edited)
    with nonblocking(), pytest.raises(WouldWait):
        service.hover(request)
    answer = service.hover(request)
    assert answer is not None
    assert [m.node.text for m in answer.memories] == [ARMED]
    with nonblocking():
        again = service.hover(request)
    assert again is not None
    assert [m.node.text for m in again.memories] == [ARMED]


def test_the_server_answers_at_once_or_hands_the_work_on() -> None:
    server = PoimenServer()

    def fails() -> int:
        raise ValueError("reported by the worker that runs it again")

    assert server.at_once(lambda: 42) == 42
    assert server.at_once(lambda: may_wait()) is WAITS
    assert server.at_once(fails) is WAITS
    may_wait()  # the flag is gone once at_once returns
