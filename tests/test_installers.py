"""The installers beyond Claude Code's settings files: the opt-in git post-commit hook (real
git commits in a real repository, the real store), Codex's hooks files, and what `mem doctor`
reports of them all."""

from __future__ import annotations

import json
import shlex
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from poimen_memory import hooks

from . import test_hooks
from .gitrepo import FixtureRepo
from .serving import silent_port
from .test_hooks import FALLBACK, MEM, Run

# The fixtures of the hooks' tests: a home of its own, and mem run in it.
home = test_hooks.home
env = test_hooks.env
in_home = test_hooks.in_home
mem = test_hooks.mem
cli = test_hooks.cli

CHAINED = "post-commit.poimen-chained"
OLD_HOOK = (
    b'#!/bin/sh\necho "ran $# $(cat)" >> "$(git rev-parse --git-dir)/../chained.out"\nexit 3\n'
)


@pytest.fixture
def repo(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "app")
    repo.write("app.py", "".join(f"line_{n} = {n}\n" for n in range(1, 21)))
    repo.commit("initial", "Initial", ("Fixture", "fixture@test"))
    return repo


def git_commit(repo: FixtureRepo, env: dict[str, str], message: str) -> tuple[int, float, str]:
    """`git commit -a` as a user runs it (hooks on): exit status, seconds, stderr."""
    started = time.monotonic()
    done = subprocess.run(
        ["git", "-c", "user.name=Dev", "-c", "user.email=dev@test", "commit", "-qam", message],
        cwd=repo.root, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode, time.monotonic() - started, done.stderr


def post_commit_runs(timeout: float, count: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        runs = [r for r in hooks.read_log(50) if r.get("event") == "post-commit"]
        if len(runs) >= count:
            return runs
        assert time.monotonic() < deadline, hooks.read_log(50)
        time.sleep(0.1)


def pending_count(dsn: str, project: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pending_anchor WHERE project = %s", (project,)
        ).fetchone()
    assert row is not None
    return int(row[0])


# -- the git post-commit hook -------------------------------------------------------------------


def test_post_commit_hook_places_pending_anchors_keeps_the_old_hook_and_uninstalls_exactly(
    cli: Run, mem: Run, env: dict[str, str], repo: FixtureRepo, store_dsn: str
) -> None:
    hook = repo.root / ".git" / "hooks" / "post-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_bytes(OLD_HOOK)
    hook.chmod(0o750)
    project = f"pc-{uuid.uuid4().hex[:8]}"
    common = ["--project", project, "--dsn", store_dsn]

    done = cli("hooks", "install", "claude-code", "--git-post-commit", *common, cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert f"the hook that was there runs after it, from {hook.parent / CHAINED}" in done.stdout
    assert (hook.parent / CHAINED).read_bytes() == OLD_HOOK
    assert hooks.is_our_git_hook(hook)

    # An agent remembers a line before it is committed: a pending anchor.
    repo.write("app.py", repo.root.joinpath("app.py").read_text() + "timeout = 90\n")
    done = mem("remember", "app.py:21", "Matches the gateway timeout.", *common, cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert pending_count(store_dsn, project) == 1

    code, _, stderr = git_commit(repo, env, "Gateway timeout")
    assert code == 0, stderr
    assert stderr == ""  # nothing of ours on the user's terminal
    assert (repo.root / "chained.out").read_text() == "ran 0 \n"  # the old hook ran, too
    (run,) = post_commit_runs(timeout=60)
    assert run["outcome"] == "ok", run
    assert run["anchors"] == 1
    assert pending_count(store_dsn, project) == 0
    found = mem("by-git", "app.py:21", "--json", *common, cwd=repo.root)
    texts = [n["text"] for n in json.loads(found.stdout)["nodes"]]
    assert texts == ["Matches the gateway timeout."]

    # Our hook ends as the old one did: its exit status, its arguments and stdin passed on.
    ran = subprocess.run(
        [str(hook), "a1"], cwd=repo.root, env=env, input="in", capture_output=True, text=True,
        timeout=30, check=False,
    )  # fmt: skip
    assert ran.returncode == 3
    assert (repo.root / "chained.out").read_text().endswith("ran 1 in\n")

    again = cli("hooks", "install", "claude-code", "--git-post-commit", *common, cwd=repo.root)
    assert "git post-commit hook is already in" in again.stdout
    assert (hook.parent / CHAINED).read_bytes() == OLD_HOOK

    done = cli("hooks", "uninstall", "claude-code", "--git-post-commit", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert f"the hook it ran after is back in {hook}" in done.stdout
    assert hook.read_bytes() == OLD_HOOK  # byte for byte, mode too
    assert stat.S_IMODE(hook.stat().st_mode) == 0o750
    assert not (hook.parent / CHAINED).exists()


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A port that accepts connections and never answers: a store that hangs."""
    with silent_port() as port:
        yield port


def test_post_commit_hook_never_slows_or_fails_the_commit(
    cli: Run, env: dict[str, str], repo: FixtureRepo, black_hole: int
) -> None:
    """The run is detached: with a store that hangs for seconds, the commit still returns at
    once, succeeds, prints nothing; the run's failure is a line in the log, later."""
    dsn = f"postgresql://u@127.0.0.1:{black_hole}/x?connect_timeout=4"
    done = cli("hooks", "install", "claude-code", "--git-post-commit", "--dsn", dsn,
               cwd=repo.root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    repo.write("app.py", "changed\n")
    code, took, stderr = git_commit(repo, env, "Change")
    assert (code, stderr) == (0, "")
    assert took < 2.0, took
    assert not [r for r in hooks.read_log(50) if r.get("event") == "post-commit"]
    (run,) = post_commit_runs(timeout=60)
    assert run["outcome"] == "error", run
    assert "Traceback" not in json.dumps(run)


def test_post_commit_hook_refuses_a_dsn_password(cli: Run, repo: FixtureRepo) -> None:
    """A password in --dsn would sit in a file anyone can read and in the process list."""
    dsn = "postgresql://u:s3cret@127.0.0.1:5432/x"
    done = cli("hooks", "install", "claude-code", "--git-post-commit", "--dsn", dsn,
               cwd=repo.root)  # fmt: skip
    assert done.returncode == 2
    assert "--dsn: its password would be written into the git hook" in done.stderr
    assert "s3cret" not in done.stderr
    assert not (repo.root / ".git" / "hooks" / "post-commit").exists()
    assert not (repo.root / ".claude").exists()  # nothing half-written


def test_post_commit_hook_goes_only_where_it_is_not_committed_nor_shared(
    cli: Run, repo: FixtureRepo, tmp_path: Path
) -> None:
    shared = tmp_path / "shared-hooks"
    repo.git("config", "core.hooksPath", str(shared))
    done = cli("hooks", "install", "claude-code", "--git-post-commit", cwd=repo.root)
    assert done.returncode == 2
    assert "outside this repository" in done.stderr
    assert not shared.exists()
    assert not (repo.root / ".claude").exists()  # nothing half-written

    repo.git("config", "core.hooksPath", ".githooks")  # a committed directory
    done = cli("hooks", "install", "claude-code", "--git-post-commit", cwd=repo.root)
    assert "the hook would be committed" in done.stderr
    assert not (repo.root / ".githooks").exists()

    repo.write(".husky/_/.gitignore", "*\n")  # husky's own directory: git ignores it
    repo.git("config", "core.hooksPath", ".husky/_")
    done = cli("hooks", "install", "claude-code", "--git-post-commit", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert hooks.is_our_git_hook(repo.root / ".husky" / "_" / "post-commit")
    done = cli("hooks", "uninstall", "claude-code", "--git-post-commit", cwd=repo.root)
    assert not (repo.root / ".husky" / "_" / "post-commit").exists()


# -- Codex --------------------------------------------------------------------------------------


def test_codex_hooks_user_scope_by_default_project_scope_from_path(
    cli: Run, home: Path, repo: FixtureRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_home = home / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    (codex_home).mkdir()
    (codex_home / "config.toml").write_text('model = "o4"\n[features]\nhooks = false\n')
    done = cli("hooks", "install", "codex", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    path = codex_home / "hooks.json"
    data = json.loads(path.read_text())
    expected = f"{shlex.quote(MEM)} hooks run codex{FALLBACK}"
    for event in ("Stop", "SubagentStop"):
        assert data["hooks"][event] == [
            {"hooks": [{"type": "command", "command": expected, "timeout": 30}]}
        ]
    assert set(data) == {"hooks"}  # Codex refuses other top-level keys in hooks.json
    assert "sets [features] hooks = false" in done.stdout
    assert "open /hooks in Codex" in done.stdout
    assert not hooks.is_hook_command(expected)  # a Claude Code hook it is not
    assert hooks.is_hook_command(expected, "codex")

    done = cli("hooks", "install", "codex", "--scope", "project", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    project_file = repo.root / ".codex" / "hooks.json"
    (command,) = [
        h["command"] for g in json.loads(project_file.read_text())["hooks"]["Stop"]
        for h in g["hooks"]
    ]  # fmt: skip
    assert command == f"mem hooks run codex{FALLBACK}"
    one_line_local = cli("hooks", "install", "codex", "--scope", "local", cwd=repo.root)
    assert one_line_local.returncode == 2
    assert "codex has no local scope" in one_line_local.stderr

    status = json.loads(cli("hooks", "status", "codex", "--json", cwd=repo.root).stdout)
    assert status["agents"]["codex"]["user"]["events"] == ["Stop", "SubagentStop"]
    assert status["agents"]["codex"]["project"]["installed"] is True

    for scope in ("user", "project"):
        done = cli("hooks", "uninstall", "codex", "--scope", scope, cwd=repo.root)
        assert done.returncode == 0, done.stderr
    assert json.loads(path.read_text()) == {}
    assert json.loads(project_file.read_text()) == {}


# -- mem doctor ---------------------------------------------------------------------------------


def test_doctor_lists_what_is_installed_and_whether_it_runs_here(
    cli: Run, repo: FixtureRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    for argv in (
        ["hooks", "install", "claude-code", "--git-post-commit"],
        ["hooks", "install", "claude-code", "--scope", "project"],
        ["mcp", "install", "claude-code", "--scope", "user"],
    ):
        done = cli(*argv, cwd=repo.root)
        assert done.returncode == 0, done.stderr
    # Another machine's local settings: a mem that is not here.
    local = repo.root / ".claude" / "settings.local.json"
    local.write_text(local.read_text().replace(MEM, "/opt/gone/bin/mem"))

    report = json.loads(cli("doctor", "--json", cwd=repo.root).stdout)
    found = {(e["agent"], e["kind"], e["scope"]): e for e in report["installed"]}
    assert set(found) == {
        ("claude-code", "hooks", "local"),
        ("claude-code", "hooks", "project"),
        ("claude-code", "mcp", "user"),
        ("git", "post-commit", "repository"),
    }
    assert found[("claude-code", "hooks", "local")]["runs_here"] is False
    assert found[("claude-code", "hooks", "local")]["problem"] == "/opt/gone/bin/mem does not exist"
    assert found[("claude-code", "hooks", "project")]["runs_here"] is True
    assert found[("claude-code", "mcp", "user")]["command"] == f"{MEM} mcp"
    assert found[("git", "post-commit", "repository")]["command"] == f"{MEM} hooks post-commit"

    text = cli("doctor", cwd=repo.root).stdout
    assert "would not run here: /opt/gone/bin/mem does not exist" in text
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    report = json.loads(cli("doctor", "--json", cwd=repo.root).stdout)
    project = next(e for e in report["installed"] if e["scope"] == "project")
    assert project["problem"] == "mem is not on PATH"
