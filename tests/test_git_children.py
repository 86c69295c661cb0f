"""No git of ours outlives the process that started it (a server's background blame whose
git computes for seconds before it writes a byte is killed when the server ends)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .processes import running


def _slow_git(tmp_path: Path) -> tuple[Path, Path]:
    """A git that notes its pid, then computes (sleeps) for a minute before any output."""
    pid_file = tmp_path / "git.pid"
    shim = tmp_path / "git"
    shim.write_text(f'#!/bin/sh\necho $$ > "{pid_file}"\nexec sleep 60\n')
    shim.chmod(0o755)
    return shim, pid_file


def _wait_for(pid_file: Path) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if pid_file.exists() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        time.sleep(0.02)
    raise AssertionError("the git shim never started")


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not running(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("how", ["run", "stream"])
@pytest.mark.parametrize("ending", ["exit", "os._exit"])
@pytest.mark.parametrize("registered", ["at once", "late"])
def test_a_git_still_running_in_a_background_thread_ends_with_the_process(
    tmp_path: Path, how: str, ending: str, registered: str
) -> None:
    """``late``: the thread that started git is slow to note it (``Popen`` returns half a
    second after git started, as under load the thread may not run again before the process
    ends): still killed."""
    shim, pid_file = _slow_git(tmp_path)
    leave = "sys.exit(0)" if ending == "exit" else "stop_git(); os._exit(0)"
    program = textwrap.dedent(
        f"""
        import os, sys, threading, time
        from pathlib import Path
        from poimen_memory.gitio import GitRunner, stop_git
        from poimen_memory.gitio import runner as module

        if {registered!r} == "late":
            class SlowToReturn(module.subprocess.Popen):
                def __init__(self, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    time.sleep(0.5)

            module.subprocess.Popen = SlowToReturn

        runner = GitRunner(git={str(shim)!r})

        def work():
            if {how!r} == "run":
                runner.run(Path.cwd(), ["blame", "--porcelain", "HEAD", "--", "big.c"])
            else:
                with runner.stream(Path.cwd(), ["blame", "--incremental", "HEAD"]) as proc:
                    proc.stdout.read()

        threading.Thread(target=work, daemon=True).start()
        while not Path({str(pid_file)!r}).exists():
            time.sleep(0.01)
        {leave}
        """
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, timeout=60)
    assert done.returncode == 0
    git_pid = _wait_for(pid_file)
    try:
        assert _gone(git_pid), "git kept running after the process that started it ended"
    finally:
        if running(git_pid):
            os.kill(git_pid, 9)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_git_started_after_the_ending_began_is_killed_at_once(tmp_path: Path) -> None:
    """Once stop_git ran (the process is ending), a git another thread starts is killed as
    soon as it is noted: at exit, nothing would stop it later."""
    shim, _ = _slow_git(tmp_path)
    program = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from poimen_memory.gitio import GitRunner, stop_git
        from poimen_memory.gitio.errors import GitFailed

        stop_git()
        try:
            GitRunner(git={str(shim)!r}).run(Path.cwd(), ["blame", "HEAD", "--", "big.c"])
        except GitFailed:
            sys.exit(0)
        sys.exit(3)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, timeout=60)
    assert done.returncode == 0  # it ended at once, not after the shim's minute
