"""A repository's own files and the files its configuration names are read with bounds: a FIFO
or a link to /dev/zero inside .git, or named by diff.orderFile, core.attributesFile,
core.excludesFile, an include of config.worktree or an ``onbranch:`` include, gives a clear
error naming the repository and the file, or the right answer, within seconds; never a hang
or gigabytes. Every git process runs under a memory bound. The flows are the real ``mem``
processes (address space capped, peak memory measured) on real repositories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ..gitrepo import FixtureRepo, kong_repo
from .conftest import Faults
from .hostile import _MEASURE, BUFFER, PEAK_BOUND, memories

QUICK_S = 20  # git's own timeout is 60 s: a flow that waited on a FIFO takes that long
PROCESS_TIMEOUT_S = 45  # a regression fails here instead of hanging the suite


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[str, int]:
    """``argv`` to completion in a session of its own: past PROCESS_TIMEOUT_S the whole
    session is killed (a grandchild stuck on a FIFO included) and the test fails."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=PROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{argv[-3:]} still running after {PROCESS_TIMEOUT_S}s")
    return out, proc.returncode


def _repo(tmp_path: Path) -> FixtureRepo:
    return kong_repo(tmp_path / "kong", remote=f"git@github.com:bounded/{uuid.uuid4().hex[:8]}.git")


def _special(tmp_path: Path, kind: str) -> Path:
    if kind == "dev-zero":
        return Path("/dev/zero")
    fifo = tmp_path / f"fifo-{uuid.uuid4().hex[:6]}"
    os.mkfifo(fifo)
    return fifo


def _place(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if target == Path("/dev/zero"):
        path.symlink_to(target)
    else:
        os.mkfifo(path)


class _Run:
    """``mem`` in the work tree: address space capped (2 GiB), timed, its peak (git's
    included) measured."""

    def __init__(self, faults: Faults, repo: FixtureRepo) -> None:
        self.faults, self.repo = faults, repo
        self.project = f"bounded-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> tuple[str, int, float, int]:
        peak = self.repo.root.parent / f"peak-{uuid.uuid4().hex[:8]}"
        started = time.monotonic()
        shown, code = _run(
            [
                *(sys.executable, "-c", _MEASURE, str(peak)),
                *(sys.executable, "-m", "poimen_memory.cli", *args),
                *("--repo", str(self.repo.root), "--project", self.project),
            ],
            {**self.faults.env, "POIMEN_CACHE_DIR": str(self.repo.root.parent / "cache")},
            self.repo.root,
        )
        seconds = time.monotonic() - started
        used = int(peak.read_text() or 0) if peak.exists() else 0
        return shown, code, seconds, used

    def ingest(self) -> tuple[str, int, float, int]:
        source = self.repo.root.parent / f"memories-{uuid.uuid4().hex[:6]}.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in memories(self.repo)))
        return self("ingest", str(source))


def _quick_and_small(seconds: float, peak: int) -> None:
    assert seconds < QUICK_S, f"took {seconds:.0f}s"
    assert peak < PEAK_BOUND, f"peak resident {peak >> 20} MB"


# -- 1. the repository's own files ------------------------------------------------------------


@pytest.mark.parametrize(
    ("place", "kind"),
    [
        ("objects/info/alternates", "dev-zero"),
        ("objects/info/alternates", "fifo"),
        ("info/grafts", "dev-zero"),
        ("commondir", "dev-zero"),
        ("commondir", "fifo"),
        ("packed-refs", "dev-zero"),
        ("refs/heads/main", "dev-zero"),
        ("info/exclude", "fifo"),
    ],
)
def test_a_file_inside_git_that_is_no_small_file_refuses_the_repository(
    faults: Faults, tmp_path: Path, place: str, kind: str
) -> None:
    repo = _repo(tmp_path)
    _place(repo.root / ".git" / place, _special(tmp_path, kind))
    run = _Run(faults, repo)
    flows = [("by-git", f"{BUFFER}:42", "--json")]
    if place in ("info/exclude", "commondir"):  # remember asks git check-ignore
        flows.append(("remember", f"{BUFFER}:42", "A note."))
    for args in flows:
        shown, code, seconds, peak = run(*args)
        _quick_and_small(seconds, peak)
        assert code != 0, shown
        assert f"the repository at {repo.root}: {repo.root / '.git' / place}" in shown, shown
        assert "not read" in shown
        assert "Traceback" not in shown
        assert "no commits yet" not in shown


@pytest.mark.parametrize("place", ["commondir", "gitdir", "HEAD"])
def test_a_linked_work_trees_own_file_that_is_a_fifo_refuses_it(
    faults: Faults, tmp_path: Path, place: str
) -> None:
    main = _repo(tmp_path)
    linked = FixtureRepo(tmp_path / "linked", commits=dict(main.commits))
    main.git("worktree", "add", "-q", "-b", "linked", str(linked.root))
    admin = main.root / ".git" / "worktrees" / "linked"
    _place(admin / place, _special(tmp_path, "fifo"))
    shown, code, seconds, peak = _Run(faults, linked)("by-git", f"{BUFFER}:42", "--json")
    _quick_and_small(seconds, peak)
    assert code != 0, shown
    assert f"the repository at {linked.root}: {admin / place} is not a regular file" in shown


# -- 2. files the configuration names ---------------------------------------------------------


def test_diff_order_file_at_dev_zero_is_not_read(faults: Faults, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    repo.git("config", "diff.orderFile", "/dev/zero")
    run = _Run(faults, repo)
    shown, code, seconds, peak = run.ingest()  # git log -p, and the checkpoint blame
    _quick_and_small(seconds, peak)
    assert code == 0, shown
    shown, code, seconds, peak = run("by-git", f"{BUFFER}:42", "--json")
    _quick_and_small(seconds, peak)
    assert code == 0, shown
    assert "Raised BODY_BUFFER" in shown


@pytest.mark.parametrize("option", ["core.attributesFile", "core.excludesFile"])
def test_an_attributes_or_excludes_file_that_is_a_fifo_does_not_block_remember(
    faults: Faults, tmp_path: Path, option: str
) -> None:
    repo = _repo(tmp_path)
    repo.git("config", option, str(_special(tmp_path, "fifo")))
    run = _Run(faults, repo)
    shown, code, seconds, peak = run("remember", f"{BUFFER}:42", "The buffer holds one body.")
    _quick_and_small(seconds, peak)
    assert code == 0, shown
    shown, code, seconds, _ = run("by-git", f"{BUFFER}:42", "--json")
    assert code == 0, shown
    assert "The buffer holds one body." in shown
    assert seconds < QUICK_S


def test_an_excludes_file_that_is_small_still_counts(faults: Faults, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    excludes = tmp_path / "my-ignores"
    excludes.write_text("*.rs\n")
    repo.git("config", "core.excludesFile", str(excludes))
    repo.write("src/kong/extra.rs", "fn extra() {}\n")
    shown, code, _, _ = _Run(faults, repo)("remember", "src/kong/extra.rs:1", "Not committed.")
    assert code != 0
    assert "is ignored by git" in shown


@pytest.mark.parametrize("how", ["config.worktree", "onbranch"])
def test_an_include_git_would_read_that_is_a_fifo_refuses_the_configuration(
    faults: Faults, tmp_path: Path, how: str
) -> None:
    repo = _repo(tmp_path)
    fifo = _special(tmp_path, "fifo")
    if how == "config.worktree":
        repo.git("config", "core.repositoryformatversion", "1")
        repo.git("config", "extensions.worktreeConfig", "true")
        (repo.root / ".git" / "config.worktree").write_text(f"[include]\n\tpath = {fifo}\n")
    else:  # git matches feature/** here; a plain glob match of "feature/" would not
        repo.git("checkout", "-q", "-b", "feature/bounded")
        repo.git("config", "includeIf.onbranch:feature/.path", str(fifo))
    run = _Run(faults, repo)
    for args in (("by-git", f"{BUFFER}:42", "--json"), ("remember", f"{BUFFER}:42", "A note.")):
        shown, code, seconds, peak = run(*args)
        _quick_and_small(seconds, peak)
        assert code != 0, shown
        assert f"git configuration: {fifo} is not a regular file" in shown, shown
        assert "Traceback" not in shown


# -- 3. every git under a memory bound --------------------------------------------------------

_BOUNDED = """
import sys
from pathlib import Path
from poimen_memory.gitio import runner
runner.MEMORY_LIMIT = 256 << 20
try:
    runner.GitRunner().run(Path(sys.argv[1]), ["rev-list", "--all"])
except runner.GitFailed as exc:
    print(exc)
"""


def test_every_git_runs_under_a_memory_bound(faults: Faults, tmp_path: Path) -> None:
    # The discovery check is not in the way here: git itself reads the alternates file.
    repo = _repo(tmp_path)
    _place(repo.root / ".git" / "objects" / "info" / "alternates", Path("/dev/zero"))
    peak = tmp_path / "peak"
    measure = _MEASURE.replace(str(2 << 30), str(1 << 30))  # the test's own cap: 1 GiB
    started = time.monotonic()
    shown, _ = _run(
        [sys.executable, "-c", measure, str(peak), sys.executable, "-c", _BOUNDED, str(repo.root)],
        faults.env,
    )
    assert time.monotonic() - started < QUICK_S
    assert f"out of memory (git may use 256 MiB) in the repository at {repo.root}" in shown, shown
    assert int(peak.read_text()) < 300 << 20  # git's peak: its bound, not the test's 1 GiB


_HEAD_LATER = """
import os, sys
from pathlib import Path
from poimen_memory.gitio import GitError, GitRepo
repo = GitRepo.discover(sys.argv[1])
print("head", repo.head().value)
ref = Path(sys.argv[1]) / ".git" / "refs" / "heads" / "main"
ref.unlink()
ref.symlink_to(sys.argv[2])
repo.invalidate()
try:
    print("head", repo.head().value)
except GitError as exc:
    print(exc)
"""


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_a_ref_that_turns_into_no_small_file_after_discovery_is_refused(
    faults: Faults, tmp_path: Path, kind: str
) -> None:
    # HEAD is read in process (no git per hover): a ref replaced later is checked as well.
    repo = _repo(tmp_path)
    head = repo.git("rev-parse", "HEAD").strip()  # not after: the test's git has no bounds
    target = _special(tmp_path, kind)
    measure = _MEASURE.replace(str(2 << 30), str(1 << 30))
    peak = tmp_path / "peak"
    started = time.monotonic()
    shown, _ = _run(
        [
            *(sys.executable, "-c", measure, str(peak), sys.executable, "-c", _HEAD_LATER),
            *(str(repo.root), str(target)),
        ],
        faults.env,
    )
    assert time.monotonic() - started < QUICK_S
    ref = repo.root / ".git" / "refs" / "heads" / "main"
    lines = shown.splitlines()
    assert lines[0] == f"head {head}", shown
    assert lines[1] == f"the repository at {repo.root}: {ref} is not a regular file " + (
        "(a FIFO, a device or a directory); not read"
    ), shown


def _address_space_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max address space"):
            return line.split()[3]
    return ""


def _children() -> list[tuple[int, bytes]]:
    """(pid, command line) of this process's children."""
    found = []
    for name in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[1] == str(os.getpid()):
                found.append((int(name), Path(f"/proc/{name}/cmdline").read_bytes()))
        except (OSError, IndexError, ValueError):
            continue  # not a process, or one that ended meanwhile
    return found


def test_the_persistent_object_readers_run_under_the_memory_bound(tmp_path: Path) -> None:
    # GitPython's cat-file processes live as long as the repository: bounded all the same.
    from poimen_memory.gitio import GitRepo
    from poimen_memory.gitio.runner import MEMORY_LIMIT

    repo = _repo(tmp_path)
    found = GitRepo.discover(repo.root)
    try:
        head = found.head()
        assert found.resolve_commits([head.value[:8]])[head.value[:8]] == head
        readers = [pid for pid, argv in _children() if b"cat-file" in argv]
        assert readers
        assert {_address_space_limit(pid) for pid in readers} == {str(MEMORY_LIMIT)}
    finally:
        found.close()
