"""Every git we start runs with glibc's heap settings for long blames (``GLIBC_TUNABLES``):
a heap grown in larger steps and trimmed rarely. The user's own tunables come after ours (the
last one named wins in glibc), and the answers do not change."""

from __future__ import annotations

import os
import platform
import random
import subprocess
from pathlib import Path

import pytest

from poimen_memory.domain import CommitSha
from poimen_memory.gitio import GitRepo, GitRunner
from poimen_memory.gitio.runner import pinned_environment

OURS = "glibc.malloc.top_pad=16777216:glibc.malloc.trim_threshold=33554432"


def _logging_git(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "tunables.log"
    shim = tmp_path / "shim" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$GLIBC_TUNABLES" >> "{log}"\nexec git "$@"\n')
    shim.chmod(0o755)
    return shim, log


def test_a_git_run_or_streamed_gets_the_heap_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    shim, log = _logging_git(tmp_path)
    runner = GitRunner(git=str(shim))
    runner.run(tmp_path, ["--version"])
    with runner.stream(tmp_path, ["--version"]) as proc:
        assert proc.stdout is not None
        proc.stdout.read()
    assert log.read_text().splitlines() == [OURS, OURS]


def test_the_users_own_tunables_come_after_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0")
    shim, log = _logging_git(tmp_path)
    GitRunner(git=str(shim)).run(tmp_path, ["--version"])
    assert log.read_text().splitlines() == [f"{OURS}:glibc.malloc.trim_threshold=0"]


def _long_history(root: Path, versions: int, lines: int, changes: int) -> None:
    """A file of about ``lines`` lines, each of ``versions`` commits changing, adding or
    removing ``changes`` lines here and there (as real files change)."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    rng = random.Random(7)
    body = [f"line {n} of a file that a long blame reads again and again" for n in range(lines)]
    stream = []
    for v in range(versions):
        for c in range(changes):
            at, what = rng.randrange(len(body)), rng.random()
            if what < 0.6:
                body[at] = f"changed by {v}.{c}"
            elif what < 0.8:
                body.insert(at, f"added by {v}.{c}")
            else:
                del body[at]
        data = ("\n".join(body) + "\n").encode()
        stream.append(
            f"commit refs/heads/main\ncommitter A <a@example.com> {1_700_000_000 + v} +0000\n"
            f"data 2\nv{v % 10}\nM 100644 inline big.txt\ndata {len(data)}\n".encode()
            + data
            + b"\n"
        )
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=b"".join(stream), check=True)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=root, check=True)


def _faults(cmd: list[str], cwd: Path, env: dict[str, str] | None) -> tuple[int, bytes]:
    """The minor page faults of ``cmd`` alone (its own usage, reaped by pid) and its output."""
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    return usage.ru_minflt, out


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's tunables")
def test_a_long_blame_faults_far_less_and_answers_the_same(tmp_path: Path) -> None:
    """What the settings are for: git blame of a long-lived file no longer grows and trims
    its heap for each version it reads (page faults counted, not time: the same on any
    machine with glibc)."""
    root = tmp_path / "repo"
    _long_history(root, versions=200, lines=4000, changes=100)
    cmd = ["git", "blame", "--porcelain", "HEAD", "--", "big.txt"]
    plain_faults, plain = _faults(cmd, root, None)
    ours_faults, ours = _faults(cmd, root, {**os.environ, **pinned_environment(os.environ)})
    assert ours == plain
    assert ours_faults * 2 < plain_faults, (ours_faults, plain_faults)
    blame = GitRepo.discover(root).blame("big.txt", CommitSha(_head(root)))
    assert len(blame.lines) == len((root / "big.txt").read_text().splitlines())


def _head(root: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_gitpythons_long_lived_readers_keep_the_users_own_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cat-file reader lives for seconds: it does not get the heap settings for blames
    (it could hold 32 MiB it freed), only what the user set."""
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    root = tmp_path / "repo"
    _long_history(root, versions=2, lines=10, changes=1)
    shim, log = _logging_git(tmp_path)
    repo = GitRepo.discover(root, GitRunner(git=str(shim)))
    head = repo.head()
    assert repo.blob(head, "big.txt")  # read by GitPython's persistent cat-file
    repo.blame("big.txt", head)  # and a blame by ours
    seen = log.read_text().splitlines()
    assert "glibc.malloc.arena_max=2" in seen
    assert f"{OURS}:glibc.malloc.arena_max=2" in seen
