"""`mem ingest` on what a first day brings, through the real command on a real repository and
Postgres: a Claude Code 2.1 transcript read while its session is still writing it (a torn last
line), bad records found at different stages listed in line order, and edits that changed
nothing counted as such."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from poimen_memory.domain import ProjectId

from .gitrepo import ALICE, CAROL, FixtureRepo, numbered

APP = "src/app.py"
SESSION_ID = "3f0c9a7e-2b4d-4e8a-9c61-5d2e7f1b8a40"
VERSION = "2.1.14"


def mem(tmp_path: Path, dsn: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "POIMEN_DSN": dsn,
        "POIMEN_CONFIG": str(tmp_path / "no-config.toml"),
        "POIMEN_CACHE_DIR": str(tmp_path / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def ingest(
    tmp_path: Path, store_dsn: str, src: str, repo: FixtureRepo, project: ProjectId, *more: str
) -> subprocess.CompletedProcess[str]:
    """`mem ingest SRC --repo REPO --project PROJECT MORE...`."""
    return mem(
        tmp_path, store_dsn, "ingest", src, "--repo", str(repo.root), "--project", project.value,
        *more,
    )  # fmt: skip


def stamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class Transcript:
    """Claude Code 2.1 entries, as the CLI writes them, for a session in ``repo``."""

    def __init__(self, repo: FixtureRepo, start: int) -> None:
        self.repo = repo
        self.clock = start
        self.entries: list[dict[str, Any]] = []
        self.parent: str | None = None

    def _base(self, kind: str, uid: str) -> dict[str, Any]:
        self.clock += 5
        entry = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": str(self.repo.root),
            "sessionId": SESSION_ID,
            "version": VERSION,
            "gitBranch": "main",
            "type": kind,
            "uuid": uid,
            "timestamp": stamp(self.clock),
        }
        self.parent = uid
        return entry

    def queued(self, text: str) -> None:
        for operation in ("enqueue", "dequeue"):
            self.clock += 1
            entry = {
                "type": "queue-operation",
                "operation": operation,
                "timestamp": stamp(self.clock),
                "sessionId": SESSION_ID,
            }
            if operation == "enqueue":
                entry["content"] = text
            self.entries.append(entry)

    def snapshot(self, message: str, update: bool = False) -> None:
        backups = {APP: {"backupFileName": None, "version": 1, "backupTime": stamp(self.clock)}}
        self.entries.append(
            {
                "type": "file-history-snapshot",
                "messageId": message,
                "snapshot": {
                    "messageId": message,
                    "trackedFileBackups": backups if update else {},
                    "timestamp": stamp(self.clock),
                },
                "isSnapshotUpdate": update,
            }
        )

    def prompt(self, uid: str, text: str) -> None:
        entry = self._base("user", uid)
        entry |= {
            "message": {"role": "user", "content": text},
            "thinkingMetadata": {"level": "none", "disabled": True, "triggers": []},
            "permissionMode": "acceptEdits",
        }
        self.entries.append(entry)

    def attachment(self, uid: str) -> None:
        entry = self._base("attachment", uid)
        entry["attachment"] = {"type": "todo_reminder", "content": [], "itemCount": 0}
        self.entries.append(entry)

    def assistant(self, uid: str, *blocks: dict[str, Any]) -> None:
        entry = self._base("assistant", uid)
        entry |= {
            "message": {
                "model": "claude-opus-4-5-20251101",
                "id": f"msg_{uid}",
                "type": "message",
                "role": "assistant",
                "content": list(blocks),
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 9, "output_tokens": 120},
            },
            "requestId": f"req_{uid}",
        }
        self.entries.append(entry)

    def result(
        self, uid: str, tool_id: str, text: str, outcome: object, error: bool = False
    ) -> None:
        entry = self._base("user", uid)
        block: dict[str, Any] = {"tool_use_id": tool_id, "type": "tool_result", "content": text}
        if error:
            block["is_error"] = True
        entry |= {"message": {"role": "user", "content": [block]}, "toolUseResult": outcome}
        self.entries.append(entry)

    def lines(self) -> list[str]:
        return [json.dumps(e) for e in self.entries]


def edit(tool_id: str, old: str, new: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": tool_id,
        "name": "Edit",
        "input": {"file_path": "", "old_string": old, "new_string": new, "replace_all": False},
    }


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


RETRIES = "RETRIES = int(os.environ.get('APP_RETRIES', '3'))"


@pytest.fixture
def repo(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "app", "git@github.com:org/app.git")
    repo.write(APP, numbered("# app", 30))
    repo.commit("initial", "Initial app", CAROL)
    return repo


def session(repo: FixtureRepo) -> Transcript:
    """A session that makes line 12 of src/app.py read the retries from the environment; the
    change is committed an hour later."""
    t = Transcript(repo, repo.clock + 600)
    # 2.1 opens with a file-history snapshot, here before a prompt typed while it started.
    t.snapshot("p1")
    t.queued("Make the retry count configurable through APP_RETRIES.")
    t.prompt("p1", "Make the retry count configurable through APP_RETRIES.")
    t.attachment("att1")
    call = edit("toolu_01Edit", "# app line 12", RETRIES)
    call["input"]["file_path"] = str(repo.root / APP)
    t.assistant("a1", text("Reading it from the environment, default 3."), call)
    t.snapshot("a1", update=True)
    patch = [
        {
            "oldStart": 12,
            "oldLines": 1,
            "newStart": 12,
            "newLines": 1,
            "lines": ["-# app line 12", f"+{RETRIES}"],
        }
    ]
    t.result(
        "r1",
        "toolu_01Edit",
        f"The file {repo.root / APP} has been updated.",
        {
            "filePath": str(repo.root / APP),
            "oldString": "# app line 12",
            "newString": RETRIES,
            "originalFile": numbered("# app", 30),
            "structuredPatch": patch,
            "userModified": False,
            "replaceAll": False,
        },
    )
    t.assistant("a2", text("Done: APP_RETRIES sets the retry count (default 3)."))
    repo.set_line(APP, 12, RETRIES)
    repo.commit("agent", "Configurable retries", ALICE)
    return t


def by_git(tmp_path: Path, dsn: str, repo: FixtureRepo, project: ProjectId, line: int) -> str:
    done = mem(
        tmp_path,
        dsn,
        "by-git",
        f"{APP}:{line}",
        "--repo",
        str(repo.root),
        "--project",
        project.value,
        "--json",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- a torn last line ----------------------------------------------------------------------


def test_a_torn_last_line_is_skipped_with_a_note(
    tmp_path: Path, repo: FixtureRepo, store_dsn: str, project: ProjectId
) -> None:
    t = session(repo)
    lines = t.lines()
    # The session is writing its next entry: half of it is on disk, with no newline yet.
    t.assistant("a3", text("Anything else?"))
    torn = t.lines()[-1]
    src = tmp_path / f"{SESSION_ID}.jsonl"
    src.write_text("".join(f"{line}\n" for line in lines) + torn[: len(torn) // 2])
    done = ingest(tmp_path, store_dsn, str(src), repo, project, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    last = f"{src}:{len(lines) + 1}"
    assert summary["incomplete_last_lines"] == [last]
    assert summary["skipped"] == []
    assert f"mem: note: {last}: incomplete last line skipped" in done.stderr
    assert summary["nodes"] == {"L0": 1, "L1": 1, "L2": 0}
    assert (summary["anchors"], summary["unanchored_edits"], summary["noop_edits"]) == (1, 0, 0)
    # The edited line hovers with the session's memory; its neighbours do not.
    shown = by_git(tmp_path, store_dsn, repo, project, 12)
    assert "Reading it from the environment" in shown
    assert repo.commits["agent"] in shown
    assert "Reading it from the environment" not in by_git(tmp_path, store_dsn, repo, project, 11)
    # A second read, once the line is whole, adds the rest and changes nothing else.
    src.write_text("".join(f"{line}\n" for line in t.lines()))
    again = json.loads(ingest(tmp_path, store_dsn, str(src), repo, project, "--json").stdout)
    assert again["incomplete_last_lines"] == []
    assert again["nodes"] == {"L0": 1, "L1": 1, "L2": 0}


def test_a_malformed_line_in_the_middle_still_rejects(
    tmp_path: Path, repo: FixtureRepo, store_dsn: str, project: ProjectId
) -> None:
    lines = session(repo).lines()
    lines[5] = lines[5][: len(lines[5]) // 2]  # a line cut short, with lines after it
    src = tmp_path / f"{SESSION_ID}.jsonl"
    src.write_text("".join(f"{line}\n" for line in lines))
    done = ingest(tmp_path, store_dsn, str(src), repo, project)
    assert done.returncode == 2, done.stderr
    assert f"{src}:6: not valid JSON" in done.stderr
    assert "incomplete last line" not in done.stderr
    assert "Reading it from the environment" not in by_git(tmp_path, store_dsn, repo, project, 12)


def test_a_torn_last_line_of_generic_jsonl(
    tmp_path: Path, repo: FixtureRepo, store_dsn: str, project: ProjectId
) -> None:
    node = {
        "type": "node",
        "level": "L0",
        "query_id": "q",
        "text": "Retries come from APP_RETRIES.",
        "anchors": [{"file": APP, "line": 12}],
    }
    session(repo)  # for the commit
    src = tmp_path / "notes.jsonl"
    src.write_text(json.dumps(node) + '\n{"type": "node", "level": "L0", "te')
    done = ingest(tmp_path, store_dsn, str(src), repo, project, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["incomplete_last_lines"] == [f"{src}:2"]
    assert summary["nodes"]["L0"] == 1


# -- bad records in line order -------------------------------------------------------------


def test_bad_records_are_listed_in_line_order(
    tmp_path: Path, repo: FixtureRepo, store_dsn: str, project: ProjectId
) -> None:
    # Line 1 is bad when edges are planned, line 2 when git places its anchor, line 3 when the
    # file is parsed: each found at a different stage, in the reverse order.
    src = tmp_path / "bad.jsonl"
    src.write_text(
        json.dumps(
            {
                "type": "node",
                "level": "L0",
                "query_id": "q",
                "text": "orphan",
                "parents": ["nowhere"],
            }
        )
        + "\n"
        + json.dumps(
            {
                "type": "node",
                "level": "L0",
                "query_id": "q",
                "text": "unknown commit",
                "anchors": [{"file": APP, "line": 3, "commit": "deadbeef"}],
            }
        )
        + "\n"
        + "{not json\n"
        + json.dumps({"type": "node", "level": "L1", "query_id": "q", "text": "fine"})
        + "\n"
    )
    other = tmp_path / "also-bad.jsonl"
    other.write_text('{"type": "node", "level": "L9", "query_id": "q", "text": "x"}\n')
    paths = (str(src), str(other))  # in this order on the command line
    done = mem(
        tmp_path, store_dsn, "ingest", *paths, "--repo", str(repo.root), "--project", project.value
    )
    assert done.returncode == 2, done.stderr
    listed = [line.strip() for line in done.stderr.splitlines()[1:]]
    assert [line.split(": ", 1)[0] for line in listed] == [
        f"{src}:1",
        f"{src}:2",
        f"{src}:3",
        f"{other}:1",
    ], done.stderr


# -- edits that changed nothing ------------------------------------------------------------


def test_edits_that_changed_nothing_are_counted_as_such(
    tmp_path: Path, repo: FixtureRepo, store_dsn: str, project: ProjectId
) -> None:
    t = session(repo)
    path = str(repo.root / APP)
    # The same text twice: the tool refuses it, as Claude Code does.
    same = edit("toolu_02Same", "# app line 20", "# app line 20")
    same["input"]["file_path"] = path
    t.prompt("p2", "Tidy line 20.")
    t.assistant("a3", same)
    t.result(
        "r3",
        "toolu_02Same",
        "<tool_use_error>No changes to make: old_string and new_string are exactly the "
        "same.</tool_use_error>",
        "Error: No changes to make: old_string and new_string are exactly the same.",
        error=True,
    )
    # An edit whose old text is not there: refused, so its new text was never written.
    missing = edit("toolu_03Missing", "# app line 99", "# app line 21")
    missing["input"]["file_path"] = path
    t.assistant("a4", missing)
    t.result(
        "r4",
        "toolu_03Missing",
        "<tool_use_error>String to replace not found in file.\nString: # app line 99"
        "</tool_use_error>",
        "Error: String to replace not found in file.",
        error=True,
    )
    # A Write of the content the file already has: an empty patch.
    content = (repo.root / APP).read_text()
    write = {
        "type": "tool_use",
        "id": "toolu_04Write",
        "name": "Write",
        "input": {"file_path": path, "content": content},
    }
    t.assistant("a5", write)
    t.result(
        "r5",
        "toolu_04Write",
        f"The file {path} has been updated.",
        {
            "type": "update",
            "filePath": path,
            "content": content,
            "structuredPatch": [],
            "originalFile": content,
        },
    )
    t.assistant("a6", text("Line 20 was fine as it was."))
    src = tmp_path / f"{SESSION_ID}.jsonl"
    src.write_text("".join(f"{line}\n" for line in t.lines()))
    done = ingest(tmp_path, store_dsn, str(src), repo, project, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["noop_edits"], summary["unanchored_edits"], summary["anchors"]) == (3, 0, 1)
    shown = ingest(tmp_path, store_dsn, str(src), repo, project).stdout
    assert "edits that changed nothing (no lines to anchor): 3" in shown
    assert "left unanchored" not in shown
