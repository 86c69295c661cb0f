"""A cloned repository may commit ``.claude/settings.json``, ``.mcp.json`` or ``.codex/hooks.json``
as a symbolic link, or ``.claude`` itself as a link to a directory: ``mem hooks install`` and
``mem mcp install`` then refuse, naming the link, and write nothing anywhere. The user's own
files (``~/.claude/settings.json``) may still be links the user made, and are written where
they point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..gitrepo import FixtureRepo

MEM = str(Path(sys.executable).parent / "mem")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("POIMEN_", "CLAUDE_"))}
    keep.pop("CODEX_HOME", None)
    return {
        **keep,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "POIMEN_CACHE_DIR": str(home / "cache"),
        "POIMEN_DATA_DIR": str(home / "data"),
        "POIMEN_CONFIG": str(home / "config.toml"),
        # mem on PATH (the project scope runs it from there); no `claude`: files are written
        "PATH": os.pathsep.join([str(Path(MEM).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
    }


@pytest.fixture
def repo(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "clone")
    repo.write("README.md", "app\n")
    repo.commit("initial", "Initial", ("Fixture", "fixture@test"))
    return repo


def mem(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MEM, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=60
    )


def refused(done: subprocess.CompletedProcess[str], link: Path) -> None:
    assert done.returncode in (1, 2), done
    assert done.stderr.startswith("mem: error: "), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert str(link) in done.stderr, done.stderr
    assert "symbolic link" in done.stderr, done.stderr


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text() if p.is_file() else "<dir>"
        for p in sorted(folder.rglob("*"))
    }


INSTALLS = [
    pytest.param(("hooks", "install", "claude-code"), ".claude/settings.local.json", id="local"),
    pytest.param(
        ("hooks", "install", "claude-code", "--scope", "project"),
        ".claude/settings.json",
        id="project",
    ),
    pytest.param(
        ("mcp", "install", "claude-code", "--scope", "project"), ".mcp.json", id="mcp-project"
    ),
    pytest.param(
        ("hooks", "install", "codex", "--scope", "project"), ".codex/hooks.json", id="codex"
    ),
]


@pytest.mark.parametrize(("command", "name"), INSTALLS)
def test_a_committed_link_to_the_file_is_refused(
    env: dict[str, str], repo: FixtureRepo, tmp_path: Path, command: tuple[str, ...], name: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.json"
    victim.write_text('{"keep": true}\n')
    missing = outside / "made.json"
    for target in (victim, missing):
        link = repo.root / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        before = snapshot(outside)
        refused(mem(env, repo.root, *command), link)
        assert snapshot(outside) == before
        assert link.is_symlink()
        assert not missing.exists()
        # the dry run refuses as well, and says nothing of the file's content
        done = mem(env, repo.root, *command, "--dry-run")
        refused(done, link)
        assert "keep" not in done.stdout + done.stderr


@pytest.mark.parametrize(("command", "name"), [p for p in INSTALLS if "/" in str(p.values[1])])
def test_a_committed_link_to_the_directory_is_refused(
    env: dict[str, str], repo: FixtureRepo, tmp_path: Path, command: tuple[str, ...], name: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / Path(name).name).write_text('{"keep": true}\n')
    folder = repo.root / Path(name).parent
    folder.symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    refused(mem(env, repo.root, *command), folder)
    assert snapshot(outside) == before
    assert sorted(p.name for p in outside.iterdir()) == [Path(name).name]


def test_the_users_own_linked_settings_are_still_written_where_they_point(
    env: dict[str, str], tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "settings.json"
    real.write_text('{"theme": "dark"}\n')
    claude_dir = Path(env["HOME"]) / ".claude"
    claude_dir.mkdir()
    (claude_dir / "settings.json").symlink_to(real)
    done = mem(env, tmp_path, "hooks", "install", "claude-code", "--scope", "user")
    assert done.returncode == 0, done
    assert (claude_dir / "settings.json").is_symlink()
    data = json.loads(real.read_text())
    assert data["theme"] == "dark"
    assert "Stop" in data["hooks"]


def test_plain_files_in_the_work_tree_are_written_as_before(
    env: dict[str, str], repo: FixtureRepo
) -> None:
    settings = repo.root / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "x"}\n')
    settings.chmod(0o640)
    assert mem(env, repo.root, "hooks", "install", "claude-code").returncode == 0
    data = json.loads(settings.read_text())
    assert data["model"] == "x"
    assert "Stop" in data["hooks"]
    assert settings.stat().st_mode & 0o777 == 0o640
    assert (
        mem(env, repo.root, "mcp", "install", "claude-code", "--scope", "project").returncode == 0
    )
    assert "poimen-memory" in json.loads((repo.root / ".mcp.json").read_text())["mcpServers"]
    leftovers = [p.name for p in (repo.root / ".claude").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
