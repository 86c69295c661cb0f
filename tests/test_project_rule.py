"""The one project rule, as a new user lives it: a plain git repository with a remote and no
config file, `mem hooks install claude-code`, one Claude Code session ending; then every
surface (`mem by-git`, `mem mcp`, `mem lsp`) run in the work tree with no project given shows
that session's memory, and `mem doctor` says the project is `widgets`, from the repository.

Real parts throughout: git, the `mem` executable, the installed hook command run through a
shell with Claude Code's Stop payload on stdin, the test Postgres, the MCP SDK's client and
pytest-lsp. Below, ``decide_project``'s order on its own: an explicit value > ``--project`` >
``POIMEN_PROJECT`` > the config file > the repository's identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from mcp import Client, StdioServerParameters
from mcp.types import TextContent
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from poimen_memory import hooks
from poimen_memory.domain import ProjectId, RepoId
from poimen_memory.lookup import ProjectChoice, decide_project, new_checkouts, project_for
from poimen_memory.settings import load_settings

MEM = str(Path(sys.executable).parent / "mem")  # the console script beside python
REMOTE = "https://github.com/acme/widgets.git"
IDENTITY = "github.com/acme/widgets"
FILE = "src/widgets/pricing.py"
LINE = 4
PRICING = (
    '"""Prices of widgets."""\n'
    "\n"
    "UNIT_PRICE = 12.5\n"
    "BULK_DISCOUNT_CAP = 0.3  # orders over 100 units\n"
    "\n"
    "\n"
    "def price(units: int, discount: float) -> float:\n"
    "    return units * UNIT_PRICE * (1 - min(discount, BULK_DISCOUNT_CAP))\n"
)
PROMPT = "Bulk orders over one hundred units must never get more than a thirty percent discount."
SESSION = "3e0c1a7b-5d2f-4c8e-9b61-7a2d4f0e8c15"
REPLY = "Capped the bulk discount at thirty percent for orders over one hundred units."


# -- the scenario ---------------------------------------------------------------------------------


@dataclass
class Scenario:
    root: Path  # the work tree
    env: dict[str, str]  # the user's environment: no POIMEN_PROJECT, no config file
    dsn: str
    settings_file: Path  # Claude Code's .claude/settings.json the installer wrote
    run: dict[str, Any]  # the hook's logged run of the session

    def mem(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        """`mem ARGS` as the user types it in the work tree."""
        return subprocess.run(
            [MEM, *args],
            cwd=self.root,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )


def _git(root: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def _user_env(base: Path, dsn: str) -> dict[str, str]:
    """A new user's environment: a home of its own with a git identity, the store's DSN, no
    POIMEN_PROJECT, and POIMEN_CONFIG naming a file that does not exist."""
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Dana Newcomer\n\temail = dana@acme.test\n[commit]\n\tgpgsign = false\n"
    )
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("POIMEN_", "CLAUDE_", "GIT_"))}
    config = base / "no-such-dir" / "config.toml"
    assert not config.exists()
    return {
        **keep,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "POIMEN_CONFIG": str(config),
        "POIMEN_CACHE_DIR": str(base / "cache"),
        "POIMEN_DATA_DIR": str(base / "data"),
        "POIMEN_DSN": dsn,
    }


def _entry(kind: str, uuid_: str, parent: str | None, at: datetime, cwd: Path, message: Any) -> str:
    return json.dumps(
        {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": str(cwd),
            "sessionId": SESSION,
            "version": "1.0.83",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": uuid_,
            "timestamp": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
    )


def _transcript(path: Path, root: Path, started: datetime) -> None:
    """A Claude Code session in ``root``: the prompt, an Edit that wrote line LINE of FILE,
    its result, and the agent's reply (written before the user committed the file)."""
    target = str(root / FILE)
    old = "BULK_DISCOUNT_CAP = 0.5"
    new = "BULK_DISCOUNT_CAP = 0.3  # orders over 100 units"
    edit = {"file_path": target, "old_string": old, "new_string": new}
    assistant = {"type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
    call = {"type": "tool_use", "id": "toolu_01Cap", "name": "Edit", "input": edit}
    said = {"type": "text", "text": "The cap is on line 4 of the pricing module."}
    result = {"tool_use_id": "toolu_01Cap", "type": "tool_result",
              "content": f"The file {target} has been updated."}  # fmt: skip
    edited = {**assistant, "content": [said, call]}
    replied = {**assistant, "content": [{"type": "text", "text": REPLY}]}
    at = [started + timedelta(seconds=s) for s in (0, 8, 9, 15)]
    lines = [
        json.dumps({"type": "summary", "summary": "Cap bulk discounts", "leafUuid": "a-final"}),
        _entry("user", "u-prompt", None, at[0], root, {"role": "user", "content": PROMPT}),
        _entry("assistant", "a-edit", "u-prompt", at[1], root, {**edited, "id": "msg_01W1"}),
        _entry("user", "r-edit", "a-edit", at[2], root, {"role": "user", "content": [result]}),
        _entry("assistant", "a-final", "r-edit", at[3], root, {**replied, "id": "msg_01W2"}),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _wait_for_run(log: Path, session: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        runs = [r for r in hooks.read_log(50, path=log) if r.get("session") == session]
        if runs and runs[-1].get("outcome") != "output":
            return dict(runs[-1])
        assert time.monotonic() < deadline, f"no run of {session}: {hooks.read_log(50, path=log)}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> Scenario:
    base = tmp_path_factory.mktemp("project-rule")
    env = _user_env(base, store_dsn)
    root = base / "src" / "my-checkout"  # the directory's name is not the project's
    root.mkdir(parents=True)

    # A fresh repository with a remote; the session edits the file, then the user commits it.
    _git(root, env, "init", "-q", "-b", "main")
    _git(root, env, "remote", "add", "origin", REMOTE)
    (root / FILE).parent.mkdir(parents=True)
    (root / FILE).write_text(PRICING, encoding="utf-8")
    transcript = base / "home" / ".claude" / "projects" / "-src-my-checkout" / f"{SESSION}.jsonl"
    _transcript(transcript, root, datetime.now(UTC) - timedelta(minutes=20))
    _git(root, env, "add", FILE)
    _git(root, env, "commit", "-q", "-m", "Cap bulk discounts at 30%")

    # The user installs the hook, in the work tree, with nothing but the agent's name.
    first = Scenario(root, env, store_dsn, root / ".claude" / "settings.local.json", {})
    done = first.mem("hooks", "install", "claude-code")
    assert done.returncode == 0, done.stderr
    settings = json.loads(first.settings_file.read_text())
    (command,) = [
        hook["command"]
        for group in settings["hooks"]["Stop"]
        for hook in group["hooks"]
        if hooks.is_hook_command(hook["command"])
    ]

    # The session stops: Claude Code runs the command through a shell, the payload on stdin.
    payload = {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": str(root),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    ran = subprocess.run(
        command, shell=True, input=json.dumps(payload), cwd=root, env=env,
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, ""), ran.stderr
    status = first.mem("hooks", "status", "--json")
    assert status.returncode == 0, status.stderr
    run = _wait_for_run(Path(json.loads(status.stdout)["log"]), SESSION)
    assert run["outcome"] == "ok", run
    return Scenario(root, env, store_dsn, first.settings_file, run)


def _texts(body: dict[str, Any]) -> list[str]:
    return [str(node["text"]) for node in body["nodes"]]


def _shows_the_session(texts: list[str]) -> bool:
    return any(PROMPT in text or REPLY in text for text in texts)


# -- the scenario, surface by surface ------------------------------------------------------------


def test_project_rule_the_hook_files_the_session_under_the_repository_project(
    scenario: Scenario,
) -> None:
    settings = json.loads(scenario.settings_file.read_text())
    for event in hooks.EVENTS:
        commands = [h["command"] for g in settings["hooks"][event] for h in g["hooks"]]
        assert all("--project" not in command for command in commands), commands
    assert scenario.run["project"] == "widgets", scenario.run
    assert scenario.run["repo"] == IDENTITY
    assert scenario.run["project_source"] == f"repository {IDENTITY}", scenario.run
    assert scenario.run["anchors"] >= 1, scenario.run
    status = scenario.mem("hooks", "status")
    assert status.returncode == 0, status.stderr
    assert f"into project widgets (from repository {IDENTITY})" in status.stdout


def test_project_rule_by_git_without_a_project_shows_the_memory(scenario: Scenario) -> None:
    done = scenario.mem("by-git", f"{FILE}:{LINE}", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["repo"] == IDENTITY
    assert _shows_the_session(_texts(body)), body


async def test_project_rule_mcp_why_without_a_project_shows_the_memory(
    scenario: Scenario,
) -> None:
    params = StdioServerParameters(command=MEM, args=["mcp"], env=scenario.env, cwd=scenario.root)
    async with Client(params, read_timeout_seconds=60) as client:
        result = await client.call_tool("why", {"file": FILE, "line": LINE})
    (block,) = result.content
    assert isinstance(block, TextContent)
    assert not result.is_error, block.text
    assert result.structured_content is not None
    assert result.structured_content["repo"] == IDENTITY
    assert _shows_the_session(_texts(result.structured_content)), block.text
    assert PROMPT in block.text or REPLY in block.text


@pytest.fixture
def in_work_tree(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The language server is started the way an editor opened in the work tree starts it."""
    monkeypatch.chdir(scenario.root)
    return scenario.root


async def test_project_rule_lsp_hover_without_a_project_shows_the_memory(
    scenario: Scenario, in_work_tree: Path
) -> None:
    config = ClientServerConfig(server_command=[MEM, "lsp"], server_env=scenario.env)
    client = await config.start()
    assert isinstance(client, LanguageClient)
    try:
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=scenario.root.as_uri(),
                workspace_folders=[
                    types.WorkspaceFolder(uri=scenario.root.as_uri(), name="my-checkout")
                ],
                initialization_options={"poimenMemory": {"dsn": scenario.dsn}},  # no project
            )
        )
        uri = (scenario.root / FILE).as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri=uri, language_id="python", version=1, text=PRICING)
            )
        )
        result = await client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(LINE - 1, 0))
        )
        messages = [m.message for m in client.messages]
        assert result is not None, f"no hover on {FILE}:{LINE}; server said: {messages}"
        assert isinstance(result.contents, types.MarkupContent)
        text = result.contents.value
        assert PROMPT in text or REPLY in text, text
    finally:
        await client.shutdown_session()
        await client.stop()


def _names_the_project(value: Any) -> bool:
    """Whether a JSON document holds an object naming the project ``widgets`` with a
    ``source`` that says it came from the repository."""
    if isinstance(value, list):
        return any(_names_the_project(item) for item in value)
    if not isinstance(value, dict):
        return False
    names = {v for k in ("project", "name", "value", "id") if isinstance(v := value.get(k), str)}
    source = value.get("source", value.get("project_source"))
    if "widgets" in names and isinstance(source, str) and source.startswith("repository"):
        return True
    return any(_names_the_project(item) for item in value.values())


def test_project_rule_doctor_json_names_the_project_and_its_source(scenario: Scenario) -> None:
    done = scenario.mem("doctor", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert _names_the_project(report), report


def test_project_rule_doctor_prints_the_project_and_its_source(scenario: Scenario) -> None:
    done = scenario.mem("doctor")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "widgets" in line]
    assert any("repository" in line for line in lines), done.stdout


# -- decide_project on its own --------------------------------------------------------------------


@pytest.fixture
def no_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No POIMEN_PROJECT and no config file; returns where a config file would go."""
    for key in [k for k in os.environ if k.startswith("POIMEN_")]:
        monkeypatch.delenv(key)
    config = tmp_path / "config" / "config.toml"
    monkeypatch.setenv("POIMEN_CONFIG", str(config))
    return config


def _repo(root: Path, remote: str | None) -> Path:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    root.mkdir(parents=True)
    _git(root, env, "init", "-q", "-b", "main")
    _git(root, env, "config", "user.name", "Fixture")
    _git(root, env, "config", "user.email", "fixture@test")
    _git(root, env, "config", "commit.gpgsign", "false")
    if remote:
        _git(root, env, "remote", "add", "origin", remote)
    (root / "README.md").write_text("widgets\n")
    _git(root, env, "add", "README.md")
    _git(root, env, "commit", "-q", "-m", "Initial")
    return root


def _identity(path: Path, cache: Path) -> RepoId:
    """The identity of the work tree at ``path``, found the way every surface finds it."""
    identity, _ = new_checkouts(cache_path=cache / f"{uuid.uuid4().hex[:8]}.db").add(path)
    return identity


def test_project_rule_order_explicit_flag_environment_config_repository(
    no_settings: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(tmp_path / "checkout", REMOTE)
    repo = _identity(root, tmp_path)
    assert repo == RepoId(IDENTITY)

    def decide(flag: str | None = None, explicit: str | None = None) -> ProjectChoice:
        settings = load_settings({"project": flag})
        named = ProjectId(explicit) if explicit else None
        return decide_project(settings, repo=repo, explicit=named)

    # Nothing set: derived from the repository's identity.
    assert decide() == ProjectChoice(ProjectId("widgets"), f"repository {IDENTITY}")
    # The config file beats the repository.
    no_settings.parent.mkdir()
    no_settings.write_text('project = "from-config"\n')
    assert decide() == ProjectChoice(ProjectId("from-config"), f"config file {no_settings}")
    # POIMEN_PROJECT beats the config file.
    monkeypatch.setenv("POIMEN_PROJECT", "from-env")
    assert decide() == ProjectChoice(ProjectId("from-env"), "POIMEN_PROJECT")
    # --project beats POIMEN_PROJECT.
    assert decide(flag="from-flag") == ProjectChoice(ProjectId("from-flag"), "--project")
    # An explicit value (a request's project) beats them all.
    assert decide(flag="from-flag", explicit="asked") == ProjectChoice(
        ProjectId("asked"), "request"
    )
    named = decide_project(
        load_settings({"project": "from-flag"}),
        repo=repo,
        explicit=ProjectId("asked"),
        explicit_source="initializationOptions",
    )
    assert named == ProjectChoice(ProjectId("asked"), "initializationOptions")


def test_project_rule_explicit_beats_environment_without_a_repository(
    no_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POIMEN_PROJECT", "from-env")
    settings = load_settings()
    assert decide_project(settings).project == ProjectId("from-env")
    assert decide_project(settings, explicit=ProjectId("asked")).project == ProjectId("asked")
    monkeypatch.delenv("POIMEN_PROJECT")
    nothing = decide_project(load_settings())
    assert nothing.project is None
    assert nothing.source.startswith("none")


def test_project_rule_two_clones_of_one_remote_share_the_project(
    no_settings: Path, tmp_path: Path
) -> None:
    first = _repo(tmp_path / "work" / "widgets", REMOTE)
    second = _repo(tmp_path / "elsewhere" / "acme-checkout-2", REMOTE)
    ssh = _repo(tmp_path / "laptop" / "w", "git@github.com:acme/widgets.git")
    settings = load_settings()
    choices = {
        decide_project(settings, repo=_identity(path, tmp_path)) for path in (first, second, ssh)
    }
    assert choices == {ProjectChoice(ProjectId("widgets"), f"repository {IDENTITY}")}


def test_project_rule_a_repository_without_remote_has_a_stable_project(
    no_settings: Path, tmp_path: Path
) -> None:
    root = _repo(tmp_path / "scratch", None)
    settings = load_settings()
    once = decide_project(settings, repo=_identity(root, tmp_path))
    again = decide_project(load_settings(), repo=_identity(root / ".", tmp_path))
    assert once == again
    assert once.project is not None
    assert once.source.startswith("repository local/")
    identity = RepoId(once.source.removeprefix("repository "))
    assert once.project == project_for(identity)
    # The directory's name plays no part: the identity comes from the root commit.
    assert "scratch" not in once.project.value
