"""Claude Code hooks and MCP registration: `mem hooks install/uninstall/status/run` and
`mem mcp install` on real settings files, a real git repository, a real Claude Code transcript
and the real Postgres; the installed hook command is run as Claude Code runs it, through a shell
with the event's JSON on stdin."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from poimen_memory import hooks
from poimen_memory.cli import main

from .gitrepo import FixtureRepo, kong_repo

SESSION = Path(__file__).parent / "fixtures" / "claude_code" / "session.jsonl"
MEM = str(Path(sys.executable).parent / "mem")  # the console script beside python
MODULE = [sys.executable, "-m", "poimen_memory.cli"]
# What an installed command does when mem cannot run: a note on stderr, exit 1 (never 2).
FALLBACK = (
    " || ! echo 'poimen-memory: the session was not captured: mem failed or is not on PATH "
    "(see mem doctor)' >&2"
)
EVENTS = ("Stop", "SubagentStop", "SessionEnd")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home of its own: HOME, the XDG directories and mem's own directories under tmp_path."""
    root = tmp_path / "home"
    root.mkdir()
    return root


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("POIMEN_", "CLAUDE_"))}
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
def in_home(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The same environment for commands run in this process."""
    for key in [k for k in os.environ if k.startswith(("POIMEN_", "CLAUDE_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key not in os.environ or os.environ[key] != value:
            monkeypatch.setenv(key, value)
    return env


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def mem(env: dict[str, str]) -> Run:
    """Run `mem` (the console script, or another invocation given as ``exe``) in ``cwd``."""

    def run(
        *args: str, cwd: Path, exe: list[str] | None = None, stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*(exe or [MEM]), *args],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    return run


@pytest.fixture
def cli(
    in_home: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Run:
    """Run `mem` in this process (quicker), in ``cwd``, in the same environment."""

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return run


@pytest.fixture
def repo(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "app")
    repo.write("README.md", "app\n")
    repo.commit("initial", "Initial", ("Fixture", "fixture@test"))
    return repo


def settings_of(root: Path) -> Path:
    """The local scope's settings file (the default scope)."""
    return root / ".claude" / "settings.local.json"


def our_commands(data: dict[str, Any], event: str) -> list[str]:
    return [
        hook["command"]
        for group in data.get("hooks", {}).get(event, [])
        for hook in group["hooks"]
        if hooks.is_hook_command(hook["command"])
    ]


def one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode in (1, 2), done
    assert done.stdout == ""
    assert done.stderr.startswith("mem: error: ")
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in done.stderr


# -- recognising our hook -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        ("/usr/local/bin/mem hooks run claude-code", True),
        ("'/opt/my tools/bin/mem' hooks run claude-code --project app --dsn 'host=db'", True),
        ("/venv/bin/python -m poimen_memory.cli hooks run claude-code", True),
        ("/usr/local/bin/mem hooks run claude-code || true", True),  # as installed before
        ("mem hooks run claude-code" + FALLBACK, True),
        ("my-wrapper --note 'hooks run claude-code'", False),  # one word, not three
        ("npx agent-relay hooks run claude-code --notify slack", False),  # another tool
        ("/usr/bin/env mem hooks run claude-code", False),
        ("grep hooks run claude-code.log", False),
        ("mem hooks status claude-code", False),
        ("echo 'unbalanced", False),
    ],
)
def test_our_hook_is_recognised_by_its_words(command: str, ours: bool) -> None:
    assert hooks.is_hook_command(command) is ours


# -- install / uninstall --------------------------------------------------------------------------


def test_install_creates_the_settings_file(mem: Run, repo: FixtureRepo) -> None:
    (repo.root / "src").mkdir()
    done = mem("hooks", "install", "claude-code", cwd=repo.root / "src")  # the work tree's root
    assert done.returncode == 0, done.stderr
    data = json.loads(settings_of(repo.root).read_text())
    expected = f"{shlex.quote(MEM)} hooks run claude-code{FALLBACK}"
    for event in EVENTS:
        assert data["hooks"][event] == [
            {"hooks": [{"type": "command", "command": expected, "timeout": 30}]}
        ]
    assert Path(MEM).is_absolute()
    assert done.stdout.startswith(f"installed the claude-code hook in {settings_of(repo.root)}")


OTHERS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"], "deny": []},
    "hooks": {
        "Stop": [
            {
                "hooks": [
                    {"type": "command", "command": "notify-send 'Claude stopped'"},
                    {"type": "command", "command": "my-wrapper --note 'hooks run claude-code'"},
                ]
            }
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "grep hooks run x"}]}
        ],
    },
    "env": {"FOO": "bär"},
}


def test_install_keeps_everything_else_and_uninstall_removes_exactly_ours(
    cli: Run, repo: FixtureRepo
) -> None:
    path = settings_of(repo.root)
    path.parent.mkdir()
    original = json.dumps(OTHERS, indent=2, ensure_ascii=False) + "\n"
    path.write_text(original, encoding="utf-8")

    done = cli("hooks", "install", "claude-code", "--project", "app", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    installed = path.read_text(encoding="utf-8")
    data = json.loads(installed)
    assert {k: v for k, v in data.items() if k != "hooks"} == {
        k: v for k, v in OTHERS.items() if k != "hooks"
    }
    assert data["hooks"]["PreToolUse"] == OTHERS["hooks"]["PreToolUse"]
    assert data["hooks"]["Stop"][0] == OTHERS["hooks"]["Stop"][0]  # the other Stop hooks first
    command = f"{shlex.quote(MEM)} hooks run claude-code --project app{FALLBACK}"
    assert our_commands(data, "Stop") == our_commands(data, "SessionEnd") == [command]
    assert our_commands(data, "SubagentStop") == [command]
    assert len(data["hooks"]["Stop"]) == 2

    again = cli("hooks", "install", "claude-code", "--project", "app", cwd=repo.root)
    assert again.returncode == 0, again.stderr
    assert "already installed" in again.stdout
    assert "nothing changed" in again.stdout
    assert path.read_text(encoding="utf-8") == installed

    done = cli("hooks", "uninstall", "claude-code", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("removed the claude-code hook")
    assert path.read_text(encoding="utf-8") == original  # byte for byte
    again = cli("hooks", "uninstall", "claude-code", cwd=repo.root)
    assert (again.returncode, "nothing changed" in again.stdout) == (0, True)
    assert path.read_text(encoding="utf-8") == original


def test_uninstall_removes_the_containers_it_emptied(cli: Run, repo: FixtureRepo) -> None:
    path = settings_of(repo.root)
    path.parent.mkdir()
    path.write_text('{\n    "model": "opus"\n}\n')  # four spaces: kept
    assert cli("hooks", "install", "claude-code", cwd=repo.root).returncode == 0
    assert '\n    "hooks": {\n        "Stop"' in path.read_text()
    assert cli("hooks", "uninstall", "claude-code", cwd=repo.root).returncode == 0
    assert path.read_text() == '{\n    "model": "opus"\n}\n'


def test_reinstall_updates_our_command_only(cli: Run, repo: FixtureRepo) -> None:
    assert cli("hooks", "install", "claude-code", cwd=repo.root).returncode == 0
    done = cli("hooks", "install", "claude-code", "--project", "other", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("updated the claude-code hook")
    data = json.loads(settings_of(repo.root).read_text())
    assert our_commands(data, "Stop") == [
        f"{shlex.quote(MEM)} hooks run claude-code --project other{FALLBACK}"
    ]
    assert len(data["hooks"]["Stop"]) == 1


def test_dry_run_writes_nothing(cli: Run, repo: FixtureRepo) -> None:
    done = cli("hooks", "install", "claude-code", "--dry-run", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert not (repo.root / ".claude").exists()
    assert '+            "command": ' in done.stdout
    assert "dry run: nothing written" in done.stdout

    assert cli("hooks", "install", "claude-code", cwd=repo.root).returncode == 0
    before = settings_of(repo.root).read_bytes()
    done = cli("hooks", "uninstall", "claude-code", "--dry-run", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert '-            "command": ' in done.stdout
    assert settings_of(repo.root).read_bytes() == before


@pytest.mark.parametrize("text", ["{not json", '["a list"]', '"text"'])
@pytest.mark.parametrize("action", ["install", "uninstall"])
def test_a_settings_file_that_is_no_json_object_is_refused(
    cli: Run, repo: FixtureRepo, text: str, action: str
) -> None:
    path = settings_of(repo.root)
    path.parent.mkdir()
    path.write_text(text)
    done = cli("hooks", action, "claude-code", cwd=repo.root)
    one_line_error(done, str(path))
    assert path.read_text() == text
    status = cli("hooks", "status", "--json", cwd=repo.root)
    assert status.returncode == 0, status.stderr
    assert str(path) in json.loads(status.stdout)["agents"]["claude-code"]["local"]["error"]


def test_a_hooks_table_of_the_wrong_shape_is_refused(cli: Run, repo: FixtureRepo) -> None:
    path = settings_of(repo.root)
    path.parent.mkdir()
    path.write_text('{"hooks": {"Stop": {"command": "x"}}}')
    one_line_error(cli("hooks", "install", "claude-code", cwd=repo.root), str(path), "hooks.Stop")
    assert path.read_text() == '{"hooks": {"Stop": {"command": "x"}}}'


def test_user_scope_writes_under_home(cli: Run, home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    done = cli("hooks", "install", "claude-code", "--scope", "user", cwd=outside)
    assert done.returncode == 0, done.stderr
    data = json.loads((home / ".claude" / "settings.json").read_text())
    assert our_commands(data, "Stop") == [f"{shlex.quote(MEM)} hooks run claude-code{FALLBACK}"]
    assert not (outside / ".claude").exists()
    status = json.loads(cli("hooks", "status", "--json", cwd=outside).stdout)
    scopes = status["agents"]["claude-code"]
    assert scopes["user"]["installed"] is True
    assert scopes["user"]["path"] == str(home / ".claude" / "settings.json")
    assert "not inside a git work tree" in scopes["project"]["error"]
    assert "not inside a git work tree" in scopes["local"]["error"]
    # The local and project scopes need a work tree.
    one_line_error(cli("hooks", "install", "claude-code", cwd=outside), "--repo")
    assert cli("hooks", "uninstall", "claude-code", "--scope", "user", cwd=outside).returncode == 0
    assert json.loads((home / ".claude" / "settings.json").read_text()) == {}


def test_install_writes_a_project_only_when_this_command_or_its_environment_names_one(
    cli: Run, in_home: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The installer decides the project by the one rule; a project from the config file or the
    repository is decided again by each run (by the same rule), so it is not written."""
    kong = kong_repo(tmp_path / "checkout", remote="https://github.com/acme/widgets.git")
    base = f"{shlex.quote(MEM)} hooks run claude-code"

    def installed() -> str:
        (command,) = our_commands(json.loads(settings_of(kong.root).read_text()), "Stop")
        return command

    done = cli("hooks", "install", "claude-code", cwd=kong.root)
    assert done.returncode == 0, done.stderr
    assert installed() == f"{base}{FALLBACK}"
    assert (
        "memories go to project widgets (from repository github.com/acme/widgets; decided again "
        "at each run" in done.stdout
    )

    Path(in_home["POIMEN_CONFIG"]).write_text('project = "team"\n')
    done = cli("hooks", "install", "claude-code", cwd=kong.root)
    assert "nothing changed" in done.stdout
    assert installed() == f"{base}{FALLBACK}"
    assert f"project team (from config file {in_home['POIMEN_CONFIG']};" in done.stdout

    monkeypatch.setenv("POIMEN_PROJECT", "mine")
    done = cli("hooks", "install", "claude-code", cwd=kong.root)
    assert installed() == f"{base} --project mine{FALLBACK}"
    assert "project mine (from POIMEN_PROJECT; in the command)" in done.stdout

    done = cli("hooks", "install", "claude-code", "--project", "app", cwd=kong.root)
    assert installed() == f"{base} --project app{FALLBACK}"
    assert "project app (from --project; in the command)" in done.stdout

    monkeypatch.delenv("POIMEN_PROJECT")
    Path(in_home["POIMEN_CONFIG"]).unlink()
    done = cli("hooks", "install", "claude-code", "--scope", "user", cwd=kong.root)
    assert done.returncode == 0, done.stderr
    assert "memories go to each session's project" in done.stdout  # no one repository here

    done = cli("mcp", "install", "claude-code", "--scope", "project", cwd=kong.root)
    assert done.returncode == 0, done.stderr
    entry = json.loads((kong.root / ".mcp.json").read_text())["mcpServers"]["poimen-memory"]
    assert "--project" not in entry["args"]
    assert "project widgets (from repository github.com/acme/widgets;" in done.stdout


def test_install_refuses_a_bad_project_setting(
    cli: Run, in_home: dict[str, str], monkeypatch: pytest.MonkeyPatch, repo: FixtureRepo
) -> None:
    monkeypatch.setenv("POIMEN_PROJECT", "not a project!")
    one_line_error(cli("hooks", "install", "claude-code", cwd=repo.root), "POIMEN_PROJECT")
    assert not settings_of(repo.root).exists()


def test_hooks_without_an_action_is_bad_input(cli: Run, tmp_path: Path) -> None:
    one_line_error(cli("hooks", cwd=tmp_path), "mem hooks --help")


# -- the hook at work -----------------------------------------------------------------------------


def payload(transcript: Path, cwd: Path, event: str = "Stop") -> str:
    body = {
        "session_id": f"s-{uuid.uuid4().hex[:8]}",
        "transcript_path": str(transcript),
        "cwd": str(cwd),
        "hook_event_name": event,
        "stop_hook_active": False,
    }
    if event == "SessionEnd":
        body["reason"] = "prompt_input_exit"
    return json.dumps(body)


def run_installed(command: str, body: str, cwd: Path, env: dict[str, str]) -> float:
    """Run a hook command as Claude Code does (a shell, the payload on stdin); its duration."""
    started = time.monotonic()
    done = subprocess.run(
        command,
        shell=True,
        input=body,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    return time.monotonic() - started


def wait_for_run(session: str, timeout: float = 40) -> dict[str, Any]:
    """The logged outcome of a session's run (the log as `mem hooks status` reads it)."""
    deadline = time.monotonic() + timeout
    while True:
        runs = [r for r in hooks.read_log(50) if r.get("session") == session]
        if runs:
            return dict(runs[-1])
        assert time.monotonic() < deadline, f"no run of {session} logged: {hooks.read_log(50)}"
        time.sleep(0.1)


def node_count(dsn: str, project: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memory_node WHERE project = %s", (project,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_installed_hook_ingests_the_session_in_the_background(
    cli: Run, mem: Run, env: dict[str, str], tmp_path: Path, store_dsn: str
) -> None:
    kong = kong_repo(tmp_path / "kong")
    transcript = tmp_path / "claude" / "projects" / "-kong" / "5b1f2c9e.jsonl"
    transcript.parent.mkdir(parents=True)
    shutil.copy(SESSION, transcript)
    project = f"hook-{uuid.uuid4().hex[:8]}"
    done = cli(
        "hooks", "install", "claude-code", "--project", project, "--dsn", store_dsn, cwd=kong.root
    )
    assert done.returncode == 0, done.stderr
    (command,) = our_commands(json.loads(settings_of(kong.root).read_text()), "Stop")

    body = payload(transcript, kong.root)
    session = json.loads(body)["session_id"]
    # A run of this transcript is under way (its lock is held): the hook must not wait for it.
    running = hooks.transcript_locks(transcript)[1]
    running.parent.mkdir(parents=True, exist_ok=True)
    with running.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        run_installed(command, body, kong.root, env)  # returns (30 s at most) ...
        assert not [r for r in hooks.read_log(50) if r.get("session") == session]  # ... first
    first = wait_for_run(session)
    assert first["outcome"] == "ok", first
    assert (first["nodes"], first["new_nodes"], first["anchors"]) == (6, 6, 2)
    assert first["project"] == project
    assert first["project_source"] == "--project"  # the hook's own, handed to its worker
    assert first["transcript"] == str(transcript)
    assert node_count(store_dsn, project) == 6

    found = cli(
        "by-git", "src/kong/buffer.rs:42", "--repo", str(kong.root), "--project", project,
        "--dsn", store_dsn, "--json", cwd=kong.root,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    texts = [node["text"] for node in json.loads(found.stdout)["nodes"]]
    assert any("Uploads over 8MB fail" in text for text in texts), texts

    # The module form of mem installs a command of that form; it runs too, and adds nothing.
    done = mem(
        "hooks", "install", "claude-code", "--project", project, "--dsn", store_dsn,
        cwd=kong.root, exe=MODULE,
    )  # fmt: skip
    assert done.stdout.startswith("updated the claude-code hook"), done
    (command,) = our_commands(json.loads(settings_of(kong.root).read_text()), "SessionEnd")
    assert shlex.split(command)[:6] == [*MODULE, "hooks", "run", "claude-code"]
    body = payload(transcript, kong.root / "src", event="SessionEnd")
    run_installed(command, body, kong.root, env)
    second = wait_for_run(json.loads(body)["session_id"])
    assert second["outcome"] == "ok", second
    assert (second["nodes"], second["new_nodes"], second["new_anchors"]) == (6, 0, 0)
    assert second["event"] == "SessionEnd"
    assert second["reason"] == "prompt_input_exit"
    assert node_count(store_dsn, project) == 6

    status = cli("hooks", "status", cwd=kong.root)
    assert status.returncode == 0, status.stderr
    assert "installed (Stop, SubagentStop, SessionEnd)" in status.stdout
    assert f"6 nodes (0 new), 2 anchors (0 new) into project {project}" in status.stdout


def test_wait_mode_takes_the_project_from_the_repository(
    in_home: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    store_dsn: str,
) -> None:
    kong = kong_repo(tmp_path / "kong", remote=f"git@github.com:org/kong-{uuid.uuid4().hex[:6]}")
    body = payload(SESSION, kong.root)
    stdin = io.TextIOWrapper(io.BytesIO(body.encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    locks = hooks.transcript_locks(SESSION)[0].parent
    locks.mkdir(parents=True)
    (stale := locks / "0123.waiting").touch()  # of a session a week old: pruned
    os.utime(stale, (time.time() - 8 * 24 * 3600,) * 2)
    assert main(["hooks", "run", "claude-code", "--wait", "--dsn", store_dsn]) == 0
    assert not stale.exists()
    assert hooks.transcript_locks(SESSION)[1].exists()
    assert capsys.readouterr().out == ""
    (entry,) = hooks.read_log()
    assert entry["outcome"] == "ok", entry
    assert entry["project"] == entry["repo"].rsplit("/", 1)[-1]  # github.com/org/kong-...
    assert entry["project_source"] == f"repository {entry['repo']}"
    assert f"into project {entry['project']} (from repository {entry['repo']})" in entry["message"]
    assert node_count(store_dsn, entry["project"]) == 6


def test_lock_files_are_pruned_at_most_once_a_day(tmp_path: Path) -> None:
    """Stale lock files go on the first run; the next runs of the day do not look again (a
    glob of every lock file on each run adds up); once the marker is a day old, they do."""
    from poimen_memory.hooks.state import PRUNE_EVERY_S, prune_locks

    locks = tmp_path / "locks"
    locks.mkdir()
    week_ago = time.time() - 8 * 24 * 3600

    def stale(name: str) -> Path:
        (path := locks / name).touch()
        os.utime(path, (week_ago, week_ago))
        return path

    first = stale("a.waiting")
    prune_locks(locks)
    assert not first.exists()
    second = stale("b.running")
    prune_locks(locks)
    assert second.exists()  # looked at less than a day ago
    earlier = time.time() - PRUNE_EVERY_S - 60
    os.utime(locks / "pruned", (earlier, earlier))
    prune_locks(locks)
    assert not second.exists()
    assert (locks / "pruned").exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("case", ["missing transcript", "bad json", "store down", "no repo"])
def test_failures_exit_0_print_nothing_and_are_logged(
    cli: Run, mem: Run, repo: FixtureRepo, tmp_path: Path, case: str
) -> None:
    transcript = tmp_path / "session.jsonl"
    shutil.copy(SESSION, transcript)
    plain = tmp_path / "plain"
    plain.mkdir()
    body, options = payload(transcript, repo.root), []
    if case == "missing transcript":
        body = payload(tmp_path / "gone.jsonl", repo.root)
    elif case == "bad json":
        body = '{"transcript_path": '
    elif case == "store down":
        options = ["--dsn", f"postgresql://u:s3cret-pw@127.0.0.1:{_closed_port()}/x"]
    else:
        body = payload(transcript, plain)
    started = time.monotonic()
    done = mem("hooks", "run", "claude-code", *options, cwd=repo.root, stdin=body)
    assert (done.returncode, done.stdout) == (0, "")
    assert time.monotonic() - started < 10
    if case in ("store down", "no repo"):  # found by the worker in the background
        entry = wait_for_run(json.loads(body)["session_id"])
    else:
        status = cli("hooks", "status", "--json", cwd=repo.root)
        (entry,) = json.loads(status.stdout)["runs"]
    expected = {
        "missing transcript": ("error", "transcript_path: no such file"),
        "bad json": ("error", "payload is not JSON"),
        "store down": ("error", "StoreUnavailable"),
        "no repo": ("skipped", "not inside a git work tree"),
    }[case]
    assert entry["outcome"] == expected[0], entry
    assert expected[1] in entry["message"], entry
    assert "s3cret-pw" not in json.dumps(entry)
    status = cli("hooks", "status", cwd=repo.root)
    assert status.returncode == 0
    shown = [line for line in status.stdout.splitlines() if f" {expected[0]} " in line]
    assert shown, status.stdout
    assert expected[1] in shown[-1]


def test_a_run_already_waiting_for_the_transcript_takes_the_next_event(
    in_home: dict[str, str], mem: Run, repo: FixtureRepo, tmp_path: Path
) -> None:
    transcript = tmp_path / "session.jsonl"
    shutil.copy(SESSION, transcript)
    waiting, running = hooks.transcript_locks(transcript)
    running.parent.mkdir(parents=True, exist_ok=True)
    down = ["--dsn", f"postgresql://u@127.0.0.1:{_closed_port()}/x"]
    with running.open("a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # an ingest of this transcript is under way
        first_body = payload(transcript, repo.root)
        first = subprocess.Popen(
            [MEM, "hooks", "run", "claude-code", "--wait", *down],
            stdin=subprocess.PIPE,
            cwd=repo.root,
            env=in_home,
            text=True,
        )
        assert first.stdin is not None
        first.stdin.write(first_body)
        first.stdin.close()
        deadline = time.monotonic() + 20
        while not _is_locked(waiting):  # the first run now waits for its turn
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second_body = payload(transcript, repo.root)
        done = mem("hooks", "run", "claude-code", "--wait", *down, cwd=repo.root, stdin=second_body)
        assert (done.returncode, done.stdout) == (0, "")
        second = wait_for_run(json.loads(second_body)["session_id"])
        assert second["outcome"] == "skipped"
        assert "waiting" in second["message"]
        assert first.poll() is None  # still waiting
    assert first.wait(timeout=30) == 0
    entry = wait_for_run(json.loads(first_body)["session_id"])
    assert entry["outcome"] == "error"  # it ran, and found the store down


def _is_locked(path: Path) -> bool:
    if not path.exists():
        return False
    with path.open("a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_the_log_is_bounded(in_home: dict[str, str]) -> None:
    log = hooks.log_path()
    log.parent.mkdir(parents=True)
    old = json.dumps({"outcome": "ok", "message": "old"})
    log.write_text("x" * 1_100_000 + "\nstray output of a worker\n" + old + "\n")
    hooks.run_hook(b"", project=None, dsn=None, wait=True)
    assert log.stat().st_size < 1000
    assert log.with_name(log.name + ".1").stat().st_size > 1_000_000
    entries = hooks.read_log(3)
    assert [e["outcome"] for e in entries] == ["output", "ok", "error"]
    assert "no payload on stdin" in entries[-1]["message"]


# -- mcp install / uninstall --------------------------------------------------------------------


def test_mcp_install_project_scope_merges_into_mcp_json_with_mem_from_path(
    cli: Run, mem: Run, repo: FixtureRepo
) -> None:
    path = repo.root / ".mcp.json"
    other = {"mcpServers": {"github": {"command": "gh-mcp", "args": []}}, "note": "team"}
    original = json.dumps(other, indent=2) + "\n"
    path.write_text(original)

    dry = cli("mcp", "install", "claude-code", "--scope", "project", "--dry-run", cwd=repo.root)
    assert dry.returncode == 0, dry.stderr
    assert '+    "poimen-memory": {' in dry.stdout
    assert path.read_text() == original

    done = cli("mcp", "install", "claude-code", "--scope", "project", "--project", "app",
               cwd=repo.root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("added the MCP server poimen-memory")
    data = json.loads(path.read_text())
    assert data["note"] == "team"
    assert data["mcpServers"]["github"] == other["mcpServers"]["github"]
    # A committed file: `mem` from each machine's PATH, and no work tree of this machine.
    assert data["mcpServers"]["poimen-memory"] == {
        "type": "stdio",
        "command": "mem",
        "args": ["mcp", "--project", "app"],
    }
    written = path.read_text()
    again = cli("mcp", "install", "claude-code", "--scope", "project", "--project", "app",
                cwd=repo.root)  # fmt: skip
    assert (again.returncode, "nothing changed" in again.stdout) == (0, True)
    assert path.read_text() == written

    # Our entry with other arguments, and an env the user added: brought up to date, env kept.
    data["mcpServers"]["poimen-memory"]["env"] = {"POIMEN_DSN": "host=db"}
    path.write_text(json.dumps(data, indent=2) + "\n")
    done = mem("mcp", "install", "claude-code", "--scope", "project", cwd=repo.root, exe=MODULE)
    assert done.stdout.startswith("updated the MCP server poimen-memory"), done
    entry = json.loads(path.read_text())["mcpServers"]["poimen-memory"]
    assert (entry["command"], entry["args"]) == ("mem", ["mcp"])  # never the interpreter's path
    assert entry["env"] == {"POIMEN_DSN": "host=db"}

    done = cli("mcp", "uninstall", "claude-code", "--scope", "project", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("removed the MCP server poimen-memory")
    assert json.loads(path.read_text()) == other
    again = cli("mcp", "uninstall", "claude-code", "--scope", "project", cwd=repo.root)
    assert (again.returncode, "nothing changed" in again.stdout) == (0, True)


def test_project_scope_refuses_without_mem_on_path(
    cli: Run, repo: FixtureRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A committed file must run `mem` from PATH: without mem there, nothing is written, and
    the message says how to fix it; the local scope (this machine's) still installs."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for argv in (["hooks", "install", "claude-code"], ["mcp", "install", "claude-code"],
                 ["hooks", "install", "codex"]):  # fmt: skip
        done = cli(*argv, "--scope", "project", cwd=repo.root)
        one_line_error(done, "`mem` is not on PATH", "pipx install poimen-memory", "--scope local")
    assert not (repo.root / ".claude").exists()
    assert not (repo.root / ".mcp.json").exists()
    assert not (repo.root / ".codex").exists()
    done = cli("hooks", "install", "claude-code", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    (command,) = our_commands(json.loads(settings_of(repo.root).read_text()), "Stop")
    assert shlex.split(command)[0] == MEM  # the absolute path: this machine's file


def test_project_scope_hook_runs_mem_from_path_and_a_missing_mem_is_shown_not_blocking(
    cli: Run, repo: FixtureRepo, env: dict[str, str], tmp_path: Path
) -> None:
    done = cli("hooks", "install", "claude-code", "--scope", "project", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    data = json.loads((repo.root / ".claude" / "settings.json").read_text())
    (command,) = our_commands(data, "Stop")
    assert command == f"mem hooks run claude-code{FALLBACK}"
    assert str(Path(MEM).parent) not in json.dumps(data)
    # A teammate's machine without mem: exit 1 (Claude Code's non-blocking error; 2 would
    # keep the agent from stopping) and one line saying why.
    ran = subprocess.run(
        command, shell=True, input=payload(tmp_path / "t.jsonl", repo.root), cwd=repo.root,
        env={**env, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=30,
        check=False,
    )  # fmt: skip
    assert ran.returncode == 1
    assert ran.stdout == ""
    assert ran.stderr.splitlines()[-1] == (
        "poimen-memory: the session was not captured: mem failed or is not on PATH (see mem doctor)"
    )


def test_mcp_install_local_scope_is_the_default_under_the_project_in_claude_json(
    cli: Run, home: Path, repo: FixtureRepo
) -> None:
    path = home / ".claude.json"
    root = str(repo.root.resolve())
    state = {
        "numStartups": 12,
        "projects": {root: {"allowedTools": [], "mcpServers": {"db": {"command": "db-mcp"}}},
                     "/elsewhere": {"mcpServers": {}}},
        "theme": "dark",
    }  # fmt: skip
    original = json.dumps(state)  # one line, as Claude Code writes it
    path.write_text(original)
    path.chmod(0o600)
    done = cli("mcp", "install", "claude-code", cwd=repo.root / ".")
    assert done.returncode == 0, done.stderr
    assert "`claude` is not on PATH" in done.stdout  # written directly, and said so
    data = json.loads(path.read_text())
    servers = data["projects"][root]["mcpServers"]
    assert servers["db"] == {"command": "db-mcp"}
    assert servers["poimen-memory"] == {"type": "stdio", "command": MEM, "args": ["mcp"]}
    assert {k: v for k, v in data.items() if k != "projects"} == {
        k: v for k, v in state.items() if k != "projects"
    }
    assert data["projects"]["/elsewhere"] == {"mcpServers": {}}
    assert path.stat().st_mode & 0o777 == 0o600
    assert not (repo.root / ".mcp.json").exists()
    done = cli("mcp", "uninstall", "claude-code", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert path.read_text() == original  # byte for byte


def test_mcp_install_user_scope_keeps_claude_json(cli: Run, home: Path, repo: FixtureRepo) -> None:
    path = home / ".claude.json"
    state = {"numStartups": 12, "projects": {"/x": {"mcpServers": {}}}, "theme": "dark"}
    path.write_text(json.dumps(state))  # one line, as written by another tool
    path.chmod(0o600)
    done = cli("mcp", "install", "claude-code", "--scope", "user", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    data = json.loads(path.read_text())
    assert {k: v for k, v in data.items() if k != "mcpServers"} == state
    # No work tree pinned: the server answers for the one each session runs it in.
    assert data["mcpServers"]["poimen-memory"]["args"] == ["mcp"]
    assert path.stat().st_mode & 0o777 == 0o600
    assert "\n" not in path.read_text().strip()
    assert not (repo.root / ".mcp.json").exists()
    done = cli("mcp", "uninstall", "claude-code", "--scope", "user", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert json.loads(path.read_text()) == state


def test_mcp_install_refuses_a_broken_file(cli: Run, repo: FixtureRepo) -> None:
    path = repo.root / ".mcp.json"
    path.write_text('{"mcpServers": ')
    one_line_error(
        cli("mcp", "install", "claude-code", "--scope", "project", cwd=repo.root), str(path)
    )
    assert path.read_text() == '{"mcpServers": '


FAKE_CLAUDE = """#!/bin/sh
# Stands in for Claude Code's CLI: records its arguments and directory, one JSON line a run.
exec "{python}" -c 'import json, os, sys; print(json.dumps([os.getcwd(), *sys.argv[1:]]))' \
  "$@" >>"{record}"
"""


@pytest.fixture
def claude_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_home: dict[str, str]
) -> Path:
    """A `claude` on PATH that records how it was run; the file it records to."""
    bin_dir = tmp_path / "claude-bin"
    bin_dir.mkdir()
    record = tmp_path / "claude-runs.jsonl"
    script = bin_dir / "claude"
    script.write_text(FAKE_CLAUDE.format(python=sys.executable, record=record))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{in_home['PATH']}")
    return record


def test_mcp_install_goes_through_claude_when_it_is_on_path(
    cli: Run, home: Path, repo: FixtureRepo, claude_on_path: Path
) -> None:
    """Claude Code writes its own ~/.claude.json (a running one would overwrite ours):
    `claude mcp add-json --scope S` / `claude mcp remove --scope S`, run in the project."""
    root = str(repo.root.resolve())
    done = cli("mcp", "install", "claude-code", "--project", "app", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    assert "through claude mcp add-json" in done.stdout
    entry = {"type": "stdio", "command": MEM, "args": ["mcp", "--project", "app"]}
    (run,) = [json.loads(line) for line in claude_on_path.read_text().splitlines()]
    assert run[:6] == [root, "mcp", "add-json", "--scope", "local", "poimen-memory"]
    assert json.loads(run[6]) == entry
    assert not (home / ".claude.json").exists()  # claude's to write, not ours

    # Ours already there with other arguments (and the user's env): removed, then added again
    # with the env kept.
    (home / ".claude.json").write_text(json.dumps(
        {"projects": {root: {"mcpServers": {"poimen-memory": {**entry, "args": ["mcp"],
                                                               "env": {"A": "1"}}}}}}
    ))  # fmt: skip
    claude_on_path.unlink()
    done = cli("mcp", "install", "claude-code", "--project", "app", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in claude_on_path.read_text().splitlines()]
    assert [r[1:5] for r in runs] == [["mcp", "remove", "--scope", "local"],
                                      ["mcp", "add-json", "--scope", "local"]]  # fmt: skip
    assert json.loads(runs[1][6]) == {**entry, "env": {"A": "1"}}

    claude_on_path.unlink()
    done = cli("mcp", "uninstall", "claude-code", cwd=repo.root)
    assert done.returncode == 0, done.stderr
    (run,) = [json.loads(line) for line in claude_on_path.read_text().splitlines()]
    assert run == [root, "mcp", "remove", "--scope", "local", "poimen-memory"]
