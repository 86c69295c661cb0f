"""gitio with an untrusted repository: no program the repository configures runs, no file is
read through a link or a FIFO, GitPython's git runs like ours, HEAD is exact and cheap."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from poimen_memory.domain import CommitSha
from poimen_memory.gitio import EmptyRepository, GitRepo, GitRunner, objects

from .gitrepo import BOB, FixtureRepo, kong_repo

BUFFER = "src/kong/buffer.rs"


@pytest.fixture
def kong(tmp_path: Path) -> FixtureRepo:
    return kong_repo(tmp_path / "kong")


def _shim(tmp_path: Path) -> tuple[Path, Path]:
    """A git that logs its environment's fixed variables and its arguments, then runs git."""
    log = tmp_path / "calls.log"
    shim = tmp_path / "shim" / "git"
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\n"
        f'echo "$GIT_TERMINAL_PROMPT $GIT_OPTIONAL_LOCKS $GIT_PAGER $LC_ALL | $*" >> "{log}"\n'
        'exec git "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return shim, log


def _fmt_commit(kong: FixtureRepo) -> str:
    kong.set_line(BUFFER, 42, "const BODY_BUFFER: usize = 16*MB;  // reformatted")
    return kong.commit("fmt", "Reformat", BOB)


# -- no program the repository configures ---------------------------------------------------


def test_blame_runs_no_textconv(tmp_path: Path, kong: FixtureRepo) -> None:
    marker = tmp_path / "textconv-ran"
    kong.write(".gitattributes", "*.rs diff=evil\n")
    kong.commit("attrs", "Attributes", BOB)
    kong.git("config", "diff.evil.textconv", f"touch {marker}; cat")
    repo = GitRepo.discover(kong.root)
    assert repo.blame(BUFFER, repo.head()).origin(42) is not None
    assert repo.blame(BUFFER, repo.head(), (42, 42)).origin(42) is not None
    assert not marker.exists()


def test_gitpython_runs_our_git_in_our_environment(tmp_path: Path, kong: FixtureRepo) -> None:
    shim, log = _shim(tmp_path)
    repo = GitRepo.discover(kong.root, GitRunner(git=str(shim)))
    head = repo.head()
    assert repo.blob(head, BUFFER).startswith(b"// buffer")
    assert repo.existing([(head, None)]) == {(head, None)}  # a commit: the contents reader
    assert repo.existing([(head, BUFFER)]) == {(head, BUFFER)}  # a file: the headers reader
    calls = [c for c in log.read_text().splitlines() if "cat-file" in c]
    assert len(calls) == 2  # the two persistent readers, each started once
    for call in calls:
        env, args = call.split(" | ")
        assert env == "0 0 cat C"
        assert args.startswith("-c core.quotePath=false -c log.showSignature=false cat-file")
    assert repo.runner.spawned == 2


# -- no link, no FIFO -----------------------------------------------------------------------


def test_linked_ignore_revs_file_is_not_used(tmp_path: Path, kong: FixtureRepo) -> None:
    fmt = _fmt_commit(kong)
    outside = tmp_path / "revs-outside.txt"
    outside.write_text(f"{fmt}\n")
    os.symlink(outside, kong.root / ".git-blame-ignore-revs")
    repo = GitRepo.discover(kong.root)
    args = repo.blame_args(repo.head(), BUFFER, None)
    assert not [a for a in args if a.startswith("--ignore-revs-file=")]
    origin = repo.blame(BUFFER, repo.head()).origin(42)
    assert origin is not None
    assert origin.commit.value == fmt  # the linked list was not honoured
    # The same file, not a link, is.
    (kong.root / ".git-blame-ignore-revs").unlink()
    kong.write(".git-blame-ignore-revs", f"{fmt}\n")
    fresh = GitRepo.discover(kong.root)
    origin = fresh.blame(BUFFER, fresh.head()).origin(42)
    assert origin is not None
    assert origin.commit.value == kong.commits["abc123"]


@pytest.mark.parametrize("kind", ["fifo", "configured-fifo", "configured-missing"])
def test_unreadable_ignore_revs_files_never_stall_blame(kong: FixtureRepo, kind: str) -> None:
    name = ".git-blame-ignore-revs" if kind == "fifo" else "revs.txt"
    if kind != "configured-missing":
        os.mkfifo(kong.root / name)
    if kind != "fifo":
        kong.git("config", "blame.ignoreRevsFile", name)
    repo = GitRepo.discover(kong.root, GitRunner(timeout=20))
    done: list[object] = []
    worker = threading.Thread(
        target=lambda: done.append(repo.blame(BUFFER, repo.head()).origin(42)), daemon=True
    )
    worker.start()
    worker.join(15)
    assert done, "blame waited on the FIFO"
    assert repo.blame_settings()  # the fingerprint read no FIFO either


def test_linked_mailmap_is_ignored_like_git_does(tmp_path: Path, kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    plain = repo.blame_fingerprint()
    outside = tmp_path / "outside.mailmap"
    outside.write_text((kong.root / ".mailmap").read_text())
    (kong.root / ".mailmap").unlink()
    absent = repo.blame_fingerprint()
    os.symlink(outside, kong.root / ".mailmap")
    assert repo.blame_fingerprint() == absent != plain
    line = repo.blame(BUFFER, repo.head()).origin(42)
    assert line is not None
    # git does not follow an in-tree .mailmap link either: the author stays unmapped.
    assert repo.blame(BUFFER, repo.head()).commits[line.commit].author_name == "alice"


# -- the object reader ----------------------------------------------------------------------


def test_reader_refuses_paths_that_would_stop_it(kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    head = repo.head()
    bad = ["../outside", "src/../README.md", "./README.md", "/etc/passwd", "a\nb", ""]
    found = repo.blobs([(head, p) for p in [*bad, "README.md"]])
    assert [found[(head, p)] for p in bad] == [None] * len(bad)
    assert found[(head, "README.md")] == b"kong\n"
    assert repo.existing([(head, p) for p in bad]) == set()


def test_reader_survives_a_killed_process(kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    head = repo.head()
    assert repo.blob(head, "README.md") == b"kong\n"
    repo.close()  # as if the process had died between two requests
    assert repo.blob(head, "README.md") == b"kong\n"
    assert repo._repo is not None
    command = repo._repo.git.cat_file_all  # fault injection: the reader's process dies
    command.proc.kill()
    command.proc.wait()
    assert repo.blob(head, "README.md") == b"kong\n"


def test_reader_processes_end_when_idle(kong: FixtureRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(objects, "IDLE_S", 0.2)
    repo = GitRepo.discover(kong.root)
    head = repo.head()
    assert repo.blob(head, "README.md") == b"kong\n"
    assert repo.existing([(head, "nope")]) == set()  # a "missing" answer counts as use too
    assert repo._repo is not None
    command = repo._repo.git
    deadline = time.monotonic() + 5
    while (command.cat_file_all or command.cat_file_header) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert command.cat_file_all is None
    assert command.cat_file_header is None
    assert repo.blob(head, "README.md") == b"kong\n"
    assert repo.runner.spawned == 3


def test_many_ambiguous_prefixes_never_stall_the_reader(kong: FixtureRepo) -> None:
    # Enough objects that some 4-digit prefixes are shared; git explains each ambiguity on
    # stderr, far more than a pipe holds over 1000 requests.
    files = [str(kong.write(f"blobs/{i}", f"blob {i}\n")) for i in range(1500)]
    names = kong.git("hash-object", "-w", "--", *files)
    prefixes: dict[str, int] = {}
    for name in names.split():
        prefixes[name[:4]] = prefixes.get(name[:4], 0) + 1
    shared = [p for p, n in prefixes.items() if n > 1]
    assert shared
    repo = GitRepo.discover(kong.root)
    answers: list[dict[str, CommitSha | None]] = []
    worker = threading.Thread(
        target=lambda: answers.extend(repo.resolve_commits([shared[0]]) for _ in range(1000)),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    assert len(answers) == 1000
    assert answers[-1] == {shared[0]: None}
    assert repo.resolve_commit(kong.commits["abc123"][:8]).value == kong.commits["abc123"]


# -- HEAD -----------------------------------------------------------------------------------


def _no_git(tmp_path: Path) -> GitRunner:
    return GitRunner(git=str(tmp_path / "no-such-git"))


def test_head_follows_commits_branches_and_packing_in_process(
    tmp_path: Path, kong: FixtureRepo
) -> None:
    repo = GitRepo.discover(kong.root)
    repo.runner = _no_git(tmp_path)  # any git process from here on would fail the test

    def git_head() -> str:
        return kong.git("rev-parse", "HEAD").strip()

    assert repo.head().value == git_head()
    kong.write("x.txt", "x\n")
    kong.commit("x", "Add x", BOB)
    assert repo.head().value == git_head() == kong.commits["x"]
    kong.git("checkout", "-q", "-b", "topic", kong.commits["abc123"])
    assert repo.head().value == kong.commits["abc123"]
    kong.git("pack-refs", "--all")
    assert repo.head().value == kong.commits["abc123"]
    kong.git("update-ref", "refs/heads/topic", kong.commits["def456"])
    assert repo.head().value == kong.commits["def456"]
    kong.git("checkout", "-q", "--detach", kong.commits["initial"])
    assert repo.head().value == kong.commits["initial"]
    kong.git("checkout", "-q", "main")
    assert repo.head().value == kong.commits["x"]
    kong.git("pack-refs", "--all")
    kong.write("y.txt", "y\n")
    assert repo.head().value == kong.commits["x"]
    kong.commit("y", "Add y", BOB)  # a loose ref again, in front of the packed one
    assert repo.head().value == kong.commits["y"]
    assert repo.runner.spawned == 0


def test_head_of_a_linked_work_tree(tmp_path: Path, kong: FixtureRepo) -> None:
    linked = tmp_path / "linked"
    kong.git("worktree", "add", "-q", "-b", "side", str(linked), kong.commits["def456"])
    main, side = GitRepo.discover(kong.root), GitRepo.discover(linked / "src")
    assert side.root == linked.resolve()
    assert side.common_dir == main.common_dir
    assert side.head().value == kong.commits["def456"]
    FixtureRepo(linked).git("commit", "-q", "--allow-empty", "-m", "side work")
    assert side.head().value == FixtureRepo(linked).git("rev-parse", "HEAD").strip()
    assert main.head().value == kong.commits["unrelated"]
    assert side.blob(side.head(), BUFFER) == main.blob(main.head(), BUFFER)


def test_an_unborn_branch_has_no_head(kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    repo.head()
    kong.git("checkout", "-q", "--orphan", "fresh")
    with pytest.raises(EmptyRepository):
        repo.head()
