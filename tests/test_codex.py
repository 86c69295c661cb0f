"""Codex CLI sessions: rollouts the Codex CLI wrote itself (tests/fixtures/codex, made by its
make_rollouts.py) read, ingested into the real Postgres over a real git repository, and
looked up by line; and the hook Codex runs (`mem hooks run codex`) fed the payload Codex sent.

The rollouts name their work tree /tmp/codex-rollouts/work; each test puts its own repository
in that place (the path rewritten in a copy), with the file the session started from committed
before it and the session's changes committed after it, as a developer would."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from poimen_memory import hooks
from poimen_memory.cli import main
from poimen_memory.domain import ProjectId
from poimen_memory.hooks import read_log
from poimen_memory.ingest.codex import parse_codex
from poimen_memory.ingest.jsonl import MAX_LINE_BYTES
from poimen_memory.ingest.model import TextAtHead
from poimen_memory.ingest.pipeline import Format, detect_format

from .gitrepo import FixtureRepo

FIXTURES = Path(__file__).parent / "fixtures" / "codex"
WORK = "/tmp/codex-rollouts/work"
GREET = 'def greet(name):\n    return "hello " + name\n\n\ndef part():\n    return "bye"\n'
# greet.py as the patch-and-shell session left it (both prompts' patches applied).
GREET_AFTER = (
    'def greet(name):\n    greeting = "Hello, " + name.strip()\n    return greeting + "!"\n\n\n'
    'def part():\n    farewell = "Goodbye"\n    return farewell\n'
)
# greet.py as the code-mode session left it (only greet() patched).
GREET_AFTER_CODE = (
    'def greet(name):\n    greeting = "Hello, " + name.strip()\n    return greeting + "!"\n\n\n'
    'def part():\n    return "bye"\n'
)
NOTES = "# Notes\n\ngreet() trims the name and ends with an exclamation mark.\n"
# The line the session's failed patch tried to write; a later commit writes it by hand.
NEVER = '\n\ndef other(name):\n    return "never written"\n'
FIRST_PROMPT = "Tidy greet() and write a note about it."
SECOND_PROMPT = "Now make part() say Goodbye."
SESSIONS = {"patch-and-shell": GREET_AFTER, "code-mode": GREET_AFTER_CODE}


@pytest.fixture
def in_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of mem's own (caches, hook log, config) under tmp_path."""
    home = tmp_path / "home"
    for key in [k for k in os.environ if k.startswith("POIMEN_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("POIMEN_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("POIMEN_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("POIMEN_CONFIG", str(home / "config.toml"))
    return home


def times(name: str) -> tuple[int, int]:
    """The first and last timestamps of a rollout, as epoch seconds."""
    lines = (FIXTURES / f"{name}.jsonl").read_text("utf-8").splitlines()
    stamps = [json.loads(line)["timestamp"] for line in lines]
    seconds = [int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()) for s in stamps]
    return min(seconds), max(seconds)


def rollout(name: str, root: Path, into: Path) -> Path:
    """A copy of the rollout ``name`` whose work tree is ``root``, where Codex keeps it."""
    target = into / "codex" / "sessions" / "2026" / "12" / "01" / f"rollout-{name}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    text = (FIXTURES / f"{name}.jsonl").read_text("utf-8")
    target.write_text(text.replace(WORK, str(root)), "utf-8")
    return target


def work_tree(tmp_path: Path, name: str) -> FixtureRepo:
    """The repository the session worked in: greet.py committed a day before the session."""
    repo = FixtureRepo.create(tmp_path / "app")
    repo.clock = times(name)[0] - 86_400
    repo.write("greet.py", GREET)
    repo.commit("before", "greet", ("Dev", "dev@test"))
    return repo


def commit_after(repo: FixtureRepo, name: str, greet: str) -> None:
    """The developer commits the session's changes an hour after it (and, by hand, the line
    the session's failed patch tried to write)."""
    repo.write("greet.py", greet + NEVER)
    repo.write("notes.md", NOTES)
    repo.clock = times(name)[1]
    repo.commit("after", "the session's changes", ("Dev", "dev@test"))


def mem(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def texts_on(
    capsys: pytest.CaptureFixture[str], dsn: str, repo: FixtureRepo, project: str, where: str
) -> list[str]:
    """The texts of the nodes a lookup of ``where`` (path:line) finds."""
    code, out, err = mem(
        capsys, "by-git", where, "--repo", str(repo.root), "--project", project, "--dsn", dsn,
        "--json",
    )  # fmt: skip
    assert code == 0, err
    return [node["text"] for node in json.loads(out)["nodes"]]


# -- reading the rollouts -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_codex_rollouts_are_detected(name: str) -> None:
    assert detect_format(FIXTURES / f"{name}.jsonl") is Format.CODEX
    claude = Path(__file__).parent / "fixtures" / "claude_code" / "session.jsonl"
    assert detect_format(claude) is Format.CLAUDE_CODE


def edits_of(drafts: list[Any]) -> list[TextAtHead]:
    return [a for d in drafts for a in d.anchors if isinstance(a, TextAtHead)]


def test_the_patch_and_shell_rollout_reads_as_two_queries_with_their_patches(
    tmp_path: Path,
) -> None:
    root = tmp_path / "app"
    parsed = parse_codex(rollout("patch-and-shell", root, tmp_path), ProjectId("p"), root)
    assert parsed.bad == []
    l1 = [d for d in parsed.drafts if d.node.level.value == "L1"]
    assert [d.node.text for d in l1] == [
        "greet() now trims the name and ends with an exclamation mark; notes.md says so.",
        "part() now says Goodbye.",
    ]
    first, second = (
        [d for d in parsed.drafts if d.node.level.value == "L0" and d.node.query_id == q.node.query_id]
        for q in l1
    )  # fmt: skip
    assert first[0].node.text.startswith(FIRST_PROMPT)
    assert second[0].node.text.startswith(SECOND_PROMPT)
    # Codex's own context (environment, instructions) is no prompt.
    assert not any("<environment_context>" in d.node.text for d in parsed.drafts)
    # The failed patch (its output: "apply_patch verification failed") wrote nothing.
    assert parsed.noop_edits == 1
    assert not any("never written" in e.text for e in edits_of(parsed.drafts))
    assert {(e.file, e.added) for e in edits_of(first)} == {
        ("greet.py", (('    greeting = "Hello, " + name.strip()', '    return greeting + "!"'),)),
        ("notes.md", ()),
    }
    (notes,) = [e for e in edits_of(first) if e.file == "notes.md"]
    assert notes.text == NOTES  # an added file: all of its lines
    # The patch run through the shell (exec_command with a heredoc) is an edit too.
    assert [(e.file, e.added) for e in edits_of(second)] == [
        ("greet.py", (('    farewell = "Goodbye"', "    return farewell"),))
    ]


def test_the_code_mode_rollout_takes_the_patch_from_the_exec_scripts_change(
    tmp_path: Path,
) -> None:
    root = tmp_path / "app"
    parsed = parse_codex(rollout("code-mode", root, tmp_path), ProjectId("p"), root)
    assert parsed.bad == []
    assert {e.file for e in edits_of(parsed.drafts)} == {"greet.py", "notes.md"}
    # The first exec script's patch failed: Codex recorded no change for it.
    assert not any("never written" in e.text for e in edits_of(parsed.drafts))


# -- ingest and lookup ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_ingest_places_the_memory_on_the_patched_lines_and_nowhere_else(
    name: str,
    tmp_path: Path,
    store_dsn: str,
    in_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = work_tree(tmp_path, name)
    commit_after(repo, name, SESSIONS[name])
    source = rollout(name, repo.root, tmp_path)
    project = f"codex-{uuid.uuid4().hex[:8]}"
    code, out, err = mem(
        capsys, "--dsn", store_dsn, "ingest", str(source), "--repo", str(repo.root),
        "--project", project, "--json",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["skipped"] == []
    assert summary["anchors"] > 0

    def found(where: str) -> list[str]:
        return texts_on(capsys, store_dsn, repo, project, where)

    for line in ("greet.py:2", "greet.py:3", "notes.md:1", "notes.md:3"):
        assert any(t.startswith(FIRST_PROMPT) for t in found(line)), line
    # The context line the patch kept, and the lines it did not touch, are older than it.
    assert found("greet.py:1") == []
    # The line the failed patch would have written, committed by hand: not the session's.
    never = repo.lines("greet.py").index('    return "never written"') + 1
    assert found(f"greet.py:{never}") == []
    if name == "patch-and-shell":
        for line in ("greet.py:7", "greet.py:8"):
            texts = found(line)
            assert any(t.startswith(SECOND_PROMPT) for t in texts), (line, texts)
            assert not any(t.startswith(FIRST_PROMPT) for t in texts), (line, texts)
    else:
        assert found("greet.py:7") == []  # part() was never patched in this session


def test_a_huge_line_is_refused_unread_and_the_rest_ingested_with_skip_bad(
    tmp_path: Path, store_dsn: str, in_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "patch-and-shell"
    repo = work_tree(tmp_path, name)
    commit_after(repo, name, GREET_AFTER)
    source = rollout(name, repo.root, tmp_path)
    lines = source.read_text("utf-8").split("\n")
    huge = {"timestamp": "2026-12-01T17:02:06.000Z", "type": "response_item",
            "payload": {"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "x" * (MAX_LINE_BYTES + 1)}]}}  # fmt: skip
    lines.insert(3, json.dumps(huge))
    source.write_text("\n".join(lines), "utf-8")
    project = f"codex-{uuid.uuid4().hex[:8]}"
    argv = ["--dsn", store_dsn, "ingest", str(source), "--repo", str(repo.root),
            "--project", project]  # fmt: skip
    code, _, err = mem(capsys, *argv)
    assert code == 2
    assert f"{source}:4: line too long (over {MAX_LINE_BYTES} bytes)" in err
    code, out, err = mem(capsys, *argv, "--skip-bad", "--json")
    assert code == 0, err
    assert json.loads(out)["skipped"] == [
        f"{source}:4: line too long (over {MAX_LINE_BYTES} bytes)"
    ]
    assert any(
        t.startswith(FIRST_PROMPT) for t in texts_on(capsys, store_dsn, repo, project, "greet.py:2")
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda p: {**p, "payload": {**p["payload"], "content": 42}},
         "payload.content: expected a list of content items"),
        (lambda p: {**p, "timestamp": "yesterday"}, "timestamp"),
        (lambda p: {**p, "payload": "message"}, "payload: expected an object"),
    ],
)  # fmt: skip
def test_a_malformed_line_is_a_bad_record_naming_its_field(
    change: Any, reason: str, tmp_path: Path, store_dsn: str, in_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    name = "patch-and-shell"
    repo = work_tree(tmp_path, name)
    commit_after(repo, name, GREET_AFTER)
    source = rollout(name, repo.root, tmp_path)
    lines = source.read_text("utf-8").split("\n")
    # The assistant's last message of the second prompt.
    number = max(
        i for i, line in enumerate(lines)
        if '"role":"assistant"' in line and "part() now says Goodbye." in line
    )  # fmt: skip
    lines[number] = json.dumps(change(json.loads(lines[number])))
    source.write_text("\n".join(lines), "utf-8")
    project = f"codex-{uuid.uuid4().hex[:8]}"
    argv = ["--dsn", store_dsn, "ingest", str(source), "--repo", str(repo.root),
            "--project", project]  # fmt: skip
    code, _, err = mem(capsys, *argv)
    assert code == 2
    assert f"{source}:{number + 1}: {reason}" in err, err
    assert "Traceback" not in err
    code, out, err = mem(capsys, *argv, "--skip-bad", "--json")
    assert code == 0, err
    assert len(json.loads(out)["skipped"]) == 1
    assert any(
        t.startswith(FIRST_PROMPT) for t in texts_on(capsys, store_dsn, repo, project, "greet.py:2")
    )


# -- the hook ---------------------------------------------------------------------------------


def test_the_codex_hook_ingests_the_session_and_the_lines_committed_after_it_show_it(
    tmp_path: Path,
    store_dsn: str,
    in_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The everyday flow through the installed hook: `mem hooks install codex` with no flags,
    Codex stops and runs the command it wrote (a shell, the payload on stdin) while the edits
    are not committed yet; the developer commits them afterwards; a lookup of those lines
    finds the session."""
    name = "patch-and-shell"
    repo = work_tree(tmp_path, name)
    repo.write("greet.py", GREET_AFTER)  # what the session left in the work tree
    repo.write("notes.md", NOTES)
    source = rollout(name, repo.root, tmp_path)
    # The rollout was recorded once; its edits must still be waiting whenever this runs.
    monkeypatch.setenv("POIMEN_PENDING_DAYS", "3650")
    monkeypatch.setenv("POIMEN_DSN", store_dsn)
    monkeypatch.setenv("CODEX_HOME", str(in_home / ".codex"))
    monkeypatch.chdir(repo.root)
    assert main(["hooks", "install", "codex"]) == 0, capsys.readouterr()
    capsys.readouterr()
    installed = hooks.installed_commands(in_home / ".codex" / "hooks.json", "codex")
    (command,) = installed["Stop"]

    body = json.loads((FIXTURES / f"{name}.stop-payload.json").read_text("utf-8"))
    assert body["hook_event_name"] == "Stop"
    body |= {"transcript_path": str(source), "cwd": str(repo.root)}
    done = subprocess.run(
        command, shell=True, input=json.dumps(body), cwd=repo.root, capture_output=True,
        text=True, timeout=30, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    deadline = time.monotonic() + 60
    while not (ran := [r for r in read_log(50) if r.get("session") == body["session_id"]]):
        assert time.monotonic() < deadline, read_log(50)
        time.sleep(0.1)
    (entry,) = ran
    assert entry["outcome"] == "ok", entry
    assert entry["nodes"] > 0
    assert entry["pending_edits"] > 0  # nothing was committed when Codex stopped
    assert entry["transcript"] == str(source)
    project = entry["project"]  # derived from the repository: no project given anywhere

    repo.clock = times(name)[1]
    repo.commit("after", "the session's changes", ("Dev", "dev@test"))
    for line in ("greet.py:2", "greet.py:3", "notes.md:3"):
        texts = texts_on(capsys, store_dsn, repo, project, line)
        assert any(t.startswith(FIRST_PROMPT) for t in texts), (line, texts)
    texts = texts_on(capsys, store_dsn, repo, project, "greet.py:7")
    assert any(t.startswith(SECOND_PROMPT) for t in texts), texts
    assert texts_on(capsys, store_dsn, repo, project, "greet.py:1") == []


def test_the_codex_hook_logs_a_payload_without_a_transcript(
    in_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Codex sends ``"transcript_path": null`` for a session it keeps no rollout of."""
    body = json.loads((FIXTURES / "code-mode.stop-payload.json").read_text("utf-8"))
    body["transcript_path"] = None
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(body).encode())))
    assert main(["hooks", "run", "codex", "--wait"]) == 0
    assert capsys.readouterr() == ("", "")
    (entry,) = read_log(50)
    assert (entry["outcome"], entry["message"]) == ("error", "payload has no transcript_path")


def test_odd_patch_and_exit_texts_cost_little_and_never_raise() -> None:
    from poimen_memory.ingest.codex import _find_patch, _output_succeeded

    started = time.monotonic()
    assert _find_patch("*** Begin Patch\n" * 50_000) is None  # no end: one pass, not 50k
    assert time.monotonic() - started < 1.0
    patch = "*** Begin Patch\n*** Add File: a.py\n+x = 1\n*** End Patch"
    assert _find_patch(f"apply_patch <<'EOF'\n{patch}\nEOF") == patch
    assert _output_succeeded("Exit code: " + "1" * 5000) is False
    assert _output_succeeded("Exit code: 0\nWall time: 0.1 seconds\nSuccess.") is True
