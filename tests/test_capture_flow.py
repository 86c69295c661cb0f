"""The loop as people live it: the agent edits and creates files, its session ends (the hook
installed with no flags runs with Claude Code's payload), the human commits later, and the
lines are hovered — by the CLI, the language server and MCP, with no project given.

Variants: the human changes a line before committing (that line has no memory), never commits
(nothing is placed, and the waiting lines expire), amends and rebases before pushing (placed),
a subagent made the edit (found, under the parent's query), the session ran in a subdirectory
or in a linked work tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from lsprotocol import types
from mcp import Client, StdioServerParameters
from mcp.types import TextContent
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from poimen_memory import hooks

from .claude_sessions import Session, hook_payload
from .gitrepo import FixtureRepo

MEM = [sys.executable, "-m", "poimen_memory.cli"]

APP = "".join(f"# app line {n}\n" for n in range(1, 21))
RETRY_LOOP = (
    "for attempt in range(RETRIES):\n"
    "    if send(request):\n"
    "        break\n"
    "    time.sleep(backoff(attempt))\n"
)
RETRY_PY = (
    "import os\n"
    "\n"
    "RETRIES = int(os.environ.get('APP_RETRIES', '3'))\n"
    "\n"
    "\n"
    "def backoff(attempt: int) -> float:\n"
    "    return min(30.0, 0.5 * 2 ** attempt)\n"
)
WHY_EDIT = "Retries on a failed send with exponential backoff, capped at 30 s."
WHY_NEW = "retry.py reads APP_RETRIES; the backoff doubles from half a second."


@dataclass
class Flow:
    repo: FixtureRepo
    home: Path
    env: dict[str, str]
    project: str

    def mem(self, *args: str, cwd: Path | None = None, check: bool = True) -> str:
        done = subprocess.run(
            [*MEM, *args],
            cwd=cwd or self.repo.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check:
            assert done.returncode == 0, done.stderr
        return done.stdout

    def session(self, cwd: Path | None = None, root: Path | None = None) -> Session:
        name = f"{uuid.uuid4()}.jsonl"
        transcript = self.home / ".claude" / "projects" / "-app" / name
        return Session(root or self.repo.root, transcript, cwd=cwd)

    def hook(self, event: str) -> str:
        """Our command for ``event``, as the installer wrote it (local scope: the default)."""
        for name in ("settings.local.json", "settings.json"):
            path = self.repo.root / ".claude" / name
            if not path.is_file():
                continue
            data = json.loads(path.read_text())
            for group in data.get("hooks", {}).get(event, []):
                for hook in group["hooks"]:
                    if hooks.is_hook_command(hook["command"]):
                        return str(hook["command"])
        raise AssertionError(f"no hook of ours for {event}")

    def end(self, session: Session, event: str = "Stop", **extra: Any) -> dict[str, Any]:
        """Run the installed hook as Claude Code does (a shell, the payload on stdin) and wait
        for its background run to be logged."""
        session.save()
        body = hook_payload(session, event, **extra)
        done = subprocess.run(
            self.hook(event),
            shell=True,
            input=body,
            cwd=session.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = [
                json.loads(line)
                for log in sorted((self.home / "cache" / "hooks").glob("*.log"))
                for line in log.read_text().splitlines()
                if line.startswith("{")
            ]
            runs = [r for r in runs if r.get("session") == session.session_id]
            if any(r.get("event") == event for r in runs):
                run = [r for r in runs if r.get("event") == event][-1]
                assert run["outcome"] == "ok", run
                return run
            time.sleep(0.1)
        raise AssertionError(f"no {event} run logged for {session.session_id}")

    def commit(self, message: str) -> str:
        self.repo.git("add", "-A")
        return self.repo.commit("human", message, ("Human", "human@example.com"))

    def texts(self, spec: str, cwd: Path | None = None) -> list[str]:
        """The memories `mem by-git FILE:LINE --json` finds, run in the work tree, no flags."""
        found = json.loads(self.mem("by-git", spec, "--json", cwd=cwd))
        return [n["text"] for n in found["nodes"]]

    def shown(self, spec: str, cwd: Path | None = None) -> str:
        return "\n".join(self.texts(spec, cwd))


@pytest.fixture
def flow(tmp_path: Path, store_dsn: str) -> Flow:
    name = f"app-{uuid.uuid4().hex[:8]}"
    repo = FixtureRepo.create(tmp_path / "app", f"git@github.com:org/{name}.git")
    repo.clock = int(time.time()) - 2 * 3600  # commits an hour apart: the human's next is now
    repo.write("app.py", APP)
    repo.commit("initial", "Initial", ("Fixture", "fixture@test"))
    home = tmp_path / "home"
    home.mkdir()
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("POIMEN_", "CLAUDE_"))}
    env = {
        **keep,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "POIMEN_CACHE_DIR": str(home / "cache"),
        "POIMEN_DATA_DIR": str(home / "data"),
        "POIMEN_CONFIG": str(home / "config.toml"),
        "POIMEN_DSN": store_dsn,  # the store, from the user's environment: no flag anywhere
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    f = Flow(repo, home, env, name)
    f.mem("hooks", "install", "claude-code")
    return f


def agent_edits_and_creates(flow: Flow, session: Session) -> None:
    session.prompt("Retry failed sends with backoff, configurable through APP_RETRIES.")
    session.edit("app.py", "# app line 10\n", "# app line 10\n" + RETRY_LOOP)
    session.write("retry.py", RETRY_PY)
    session.say(f"{WHY_EDIT} {WHY_NEW}")


def pending_rows(dsn: str, project: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pending_anchor WHERE project = %s AND expires_at > now()",
            (project,),
        ).fetchone()
    assert row is not None
    return int(row[0])


# -- the everyday order -----------------------------------------------------------------------


async def test_an_edit_and_a_new_file_committed_after_the_session_are_found_everywhere(
    flow: Flow, store_dsn: str
) -> None:
    session = flow.session()
    agent_edits_and_creates(flow, session)
    run = flow.end(session, "Stop")
    assert run["project"] == flow.project  # derived from the repository: no project given
    assert run["pending_edits"] == 2  # nothing was committed when the session stopped
    flow.end(session, "SessionEnd")
    assert pending_rows(store_dsn, flow.project) == 2

    flow.commit("Retry failed sends")  # the human, an hour later
    lines = (flow.repo.root / "app.py").read_text().splitlines()
    assert lines[10] == "for attempt in range(RETRIES):"
    # The CLI, in the work tree, no flags: the edit's lines and the new file's.
    for spec in ("app.py:11", "app.py:14", "retry.py:3", "retry.py:7"):
        assert WHY_EDIT in flow.shown(spec), spec
    # Precision: lines the session did not write show nothing.
    for spec in ("app.py:10", "app.py:1", "app.py:15"):
        assert flow.texts(spec) == [], spec
    assert pending_rows(store_dsn, flow.project) == 0  # settled by the lookups

    # The language server, started as an editor starts it (no project, no DSN in its
    # settings), shows it on hover.
    config = ClientServerConfig(server_command=[*MEM, "lsp"], server_env=flow.env)
    client = await config.start()
    assert isinstance(client, LanguageClient)
    try:
        root = flow.repo.root
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=root.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="app")],
            )
        )
        for rel, line in (("app.py", 12), ("retry.py", 6)):
            uri = (root / rel).as_uri()
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    types.TextDocumentItem(uri, "python", 1, (root / rel).read_text())
                )
            )
            hover = await client.text_document_hover_async(
                types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line - 1, 4))
            )
            assert hover is not None, (rel, line)
            assert isinstance(hover.contents, types.MarkupContent)
            assert "Retries on a failed send" in hover.contents.value
        plain = await client.text_document_hover_async(
            types.HoverParams(
                types.TextDocumentIdentifier((root / "app.py").as_uri()), types.Position(0, 2)
            )
        )
        assert plain is None or "Retries on a failed send" not in str(plain.contents)
    finally:
        await client.shutdown_session()
        await client.stop()

    # MCP, as the agent asks: the server `mem mcp install claude-code` (no flags) added,
    # started as Claude Code starts it (its command and args, in the project's directory).
    flow.mem("mcp", "install", "claude-code")
    config = json.loads((flow.home / ".claude.json").read_text())
    entry = config["projects"][str(flow.repo.root)]["mcpServers"]["poimen-memory"]
    params = StdioServerParameters(
        command=entry["command"],
        args=entry.get("args", []),
        env={**flow.env, **entry.get("env", {})},
        cwd=str(flow.repo.root),
    )
    async with Client(params, read_timeout_seconds=60) as mcp:
        for rel, line in (("app.py", 13), ("retry.py", 3)):
            result = await mcp.call_tool("why", {"file": rel, "line": line})
            assert not result.is_error, result
            (block,) = result.content
            assert isinstance(block, TextContent)
            assert "Retries on a failed send" in block.text


def test_a_line_the_human_changed_before_committing_has_no_memory(flow: Flow) -> None:
    session = flow.session()
    agent_edits_and_creates(flow, session)
    flow.end(session, "SessionEnd")
    # The human reviews: the backoff is changed, the rest is kept.
    path = flow.repo.root / "app.py"
    path.write_text(path.read_text().replace("backoff(attempt)", "min(5, attempt)"))
    retry = flow.repo.root / "retry.py"
    retry.write_text(retry.read_text().replace("0.5 * 2 ** attempt", "2 ** attempt"))
    flow.commit("Retry failed sends (reviewed)")
    for spec in ("app.py:11", "app.py:12", "app.py:13", "retry.py:3", "retry.py:6"):
        assert WHY_EDIT in flow.shown(spec), spec
    for spec in ("app.py:14", "retry.py:7"):
        assert flow.texts(spec) == [], spec


def test_edits_never_committed_place_nothing_and_expire(flow: Flow, store_dsn: str) -> None:
    flow.env["POIMEN_PENDING_DAYS"] = "1"
    session = flow.session()
    session.clock = time.time() - 86400 + 20  # made a day ago, less 20 s: they expire soon
    agent_edits_and_creates(flow, session)
    assert flow.end(session, "SessionEnd")["pending_edits"] == 2
    assert pending_rows(store_dsn, flow.project) == 2
    # Nothing is placed on what HEAD holds while the lines are not committed.
    assert flow.texts("app.py:11") == []
    with psycopg.connect(store_dsn) as conn:
        row = conn.execute(
            "SELECT max(expires_at) - now() FROM pending_anchor WHERE project = %s",
            (flow.project,),
        ).fetchone()
    assert row is not None
    time.sleep(max(0.0, row[0].total_seconds()) + 0.5)
    flow.commit("Retry failed sends, after the wait")
    assert flow.texts("app.py:11") == []
    assert flow.texts("retry.py:3") == []
    assert pending_rows(store_dsn, flow.project) == 0
    # A session older than pending_days when it is ingested waits for nothing.
    old = flow.session()
    old.clock = time.time() - 3 * 86400
    old.prompt("Add a banner")
    old.edit("app.py", "# app line 2\n", "# app line 2\nprint('banner: welcome')\n")
    old.say("A banner greets the user.")
    run = flow.end(old, "Stop")
    assert (run["pending_edits"], pending_rows(store_dsn, flow.project)) == (0, 0)
    flow.commit("Banner")
    assert flow.texts("app.py:3") == []


def test_installed_with_no_flags_no_committed_file_holds_a_path_of_this_machine(
    flow: Flow,
) -> None:
    flow.mem("mcp", "install", "claude-code")
    tracked = flow.repo.git("ls-files", "--others", "--cached", "--exclude-standard")
    mine = str(Path(sys.executable).parent)
    for rel in tracked.splitlines():
        text = (flow.repo.root / rel).read_text(errors="replace")
        assert mine not in text, rel
        assert str(flow.home) not in text, rel
    local = json.loads((flow.repo.root / ".claude" / "settings.local.json").read_text())
    assert local["hooks"]["Stop"], local
    assert flow.repo.git("check-ignore", ".claude/settings.local.json").strip()


def test_an_amended_and_rebased_commit_still_gets_the_memory(flow: Flow) -> None:
    session = flow.session()
    agent_edits_and_creates(flow, session)
    flow.end(session, "SessionEnd")
    flow.commit("wip")
    flow.repo.git("commit", "--amend", "-m", "Retry failed sends")  # before any lookup
    # Upstream moved on meanwhile: rebase onto it.
    first = flow.repo.git("rev-list", "--max-parents=0", "HEAD").strip()
    flow.repo.git("checkout", "-q", "-b", "upstream", first)
    flow.repo.write("NOTES.md", "upstream\n")
    flow.commit("Upstream notes")
    flow.repo.git("checkout", "-q", "main")
    flow.repo.git("rebase", "-q", "upstream")
    for spec in ("app.py:11", "retry.py:3"):
        assert WHY_EDIT in flow.shown(spec), spec
    # Amended again after the memory was placed: the rewrite is followed.
    flow.repo.git("commit", "--amend", "-m", "Retry failed sends, with backoff")
    assert WHY_EDIT in flow.shown("app.py:12")


def test_a_subagents_edit_is_found_under_the_parents_query(flow: Flow, store_dsn: str) -> None:
    parent = flow.session()
    asked = parent.prompt("Add retries to sending; delegate the helper module.")
    child = parent.subagent("write retry helper", "Create retry.py with a backoff helper.")
    child.write("retry.py", RETRY_PY)
    child.say(WHY_NEW)
    child.save()
    run = flow.end(
        parent,
        "SubagentStop",
        agent_id=child.agent_id,
        agent_transcript_path=str(child.transcript),
    )
    assert run["agent_transcript"] == str(child.transcript)
    assert run["pending_edits"] == 1
    parent.finish_task(child, "retry.py is in place.")
    parent.edit("app.py", "# app line 10\n", "# app line 10\n" + RETRY_LOOP)
    parent.say(WHY_EDIT)
    flow.end(parent, "Stop")
    flow.commit("Retry failed sends")
    assert WHY_NEW in flow.shown("retry.py:3")
    assert WHY_EDIT in flow.shown("app.py:11")
    with psycopg.connect(store_dsn) as conn:
        rows = conn.execute(
            "SELECT DISTINCT n.query_id, n.run_id FROM memory_node n JOIN git_anchor a"
            " ON a.project = n.project AND a.node_sha256 = n.sha256"
            " WHERE n.project = %s AND a.file = 'retry.py'",
            (flow.project,),
        ).fetchall()
    assert rows == [(asked, f"{parent.session_id}/agent-{child.agent_id}")]


def test_sessions_in_a_subdirectory_and_in_a_linked_work_tree(flow: Flow, tmp_path: Path) -> None:
    (flow.repo.root / "src").mkdir()
    flow.repo.write("src/util.py", "def util():\n    return 1\n")
    flow.commit("util")
    session = flow.session(cwd=flow.repo.root / "src")
    session.prompt("util should return 2")
    session.edit(
        "src/util.py", "    return 1\n", "    # two, since the 2026 protocol bump\n    return 2\n"
    )
    session.say("util returns 2 since the protocol bump.")
    flow.end(session, "Stop")
    flow.commit("util returns 2")
    assert "protocol bump" in flow.shown("util.py:2", cwd=flow.repo.root / "src")

    tree = tmp_path / "feature-tree"
    flow.repo.git("worktree", "add", "-q", "-b", "feature", str(tree))
    other = flow.session(root=tree)
    other.prompt("Feature: log each retry")
    other.edit("app.py", "# app line 5\n", "# app line 5\nlog.info('retrying')\n")
    other.say("Each retry is logged at info level.")
    flow.end(other, "Stop")
    subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(tree), "-c", "user.name=Human", "-c", "user.email=h@example.com",
         "commit", "-q", "-m", "log retries"],
        check=True,
    )  # fmt: skip
    assert "logged at info level" in flow.shown("app.py:6", cwd=tree)
    assert flow.texts("app.py:6") == []  # the main work tree does not have that commit


# -- each tool's entry, as Claude Code writes it ----------------------------------------------

LIB = "".join(f"value_{n} = {n}\n" for n in range(1, 13))
NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {},
         "outputs": [], "source": ["total = 1\n", "print(total)\n"]},
    ],
    "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
}  # fmt: skip


def test_each_edit_tool_claude_code_writes_is_anchored_as_it_changed_the_file(
    flow: Flow,
) -> None:
    flow.repo.write("lib.py", LIB)
    flow.repo.write("nb.ipynb", json.dumps(NOTEBOOK, indent=1) + "\n")
    flow.commit("lib and notebook")
    session = flow.session()
    session.prompt("Tidy lib.py and app.py; make the notebook's total 2.")
    new_lib = LIB.replace("value_3 = 3\n", "value_3 = 3  # the third, kept for v1 clients\n")
    session.write("lib.py", new_lib.replace("value_9 = 9\n", "value_9 = 90  # scaled by ten\n"))
    session.multi_edit(
        "app.py",
        [
            ("# app line 4\n", "# app line 4\nTIMEOUT_S = 12  # the proxy gives up at 15\n"),
            ("# app line 17\n", "# app line 17\nLIMIT = 64  # per tenant\n"),
        ],
    )
    session.failed_edit("app.py", "# no such line\n", "NEVER = 'written'\n")
    session.notebook_edit("nb.ipynb", "c1", "total = 2\nprint(total)\n")
    session.say("Each change keeps v1 clients working: timeouts under the proxy's 15 s.")
    run = flow.end(session, "Stop")
    assert run["pending_edits"] >= 3, run
    flow.commit("Tidy")
    why = "keeps v1 clients working"
    for spec in ("lib.py:3", "lib.py:9", "app.py:5", "app.py:19"):
        assert why in flow.shown(spec), spec
    # Lines the calls did not change, and the notebook (its cells are JSON strings, not the
    # lines the agent wrote): nothing.
    for spec in ("lib.py:6", "lib.py:1", "app.py:4", "app.py:18", "nb.ipynb:5"):
        assert flow.texts(spec) == [], spec


def test_the_local_settings_file_is_ignored_in_this_clone_only_and_never_through_a_link(
    flow: Flow, tmp_path: Path
) -> None:
    # The fixture's install (no flags) made git ignore the local settings here, uncommitted.
    exclude = flow.repo.root / ".git" / "info" / "exclude"
    assert "/.claude/settings.local.json" in exclude.read_text()
    assert flow.repo.git("status", "--porcelain").strip() == ""
    # A clone whose info/exclude is a link to a file elsewhere: that file is never written.
    other = FixtureRepo.create(tmp_path / "other", "git@github.com:org/other.git")
    other.write("a.txt", "a\n")
    other.commit("initial", "Initial", ("Fixture", "fixture@test"))
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    link = other.root / ".git" / "info" / "exclude"
    link.unlink(missing_ok=True)
    link.symlink_to(outside)
    said = flow.mem("hooks", "install", "claude-code", cwd=other.root)
    assert outside.read_text() == "keep\n"
    assert "git does not ignore" in said, said


def test_a_subagent_event_that_names_only_its_own_transcript(tmp_path: Path) -> None:
    agent = tmp_path / "s" / "subagents" / "agent-1.jsonl"
    agent.parent.mkdir(parents=True)
    agent.write_text("{}\n")
    body = {"hook_event_name": "SubagentStop", "cwd": str(tmp_path),
            "agent_transcript_path": str(agent)}  # fmt: skip
    payload = hooks.parse_payload(json.dumps(body))
    assert payload.transcripts() == [agent]
    with pytest.raises(hooks.HookInputError, match="agent_transcript_path: no such file"):
        hooks.parse_payload(json.dumps({**body, "agent_transcript_path": str(tmp_path / "x")}))


def test_an_edit_committed_in_parts_gets_each_part_when_it_is_committed(flow: Flow) -> None:
    session = flow.session()
    session.prompt("Name the first and the last line")
    session.multi_edit(
        "app.py",
        [
            ("# app line 2\n", "# app line 2\nFIRST = 'the opening line of the app'\n"),
            ("# app line 19\n", "# app line 19\nLAST = 'the closing line of the app'\n"),
        ],
    )
    session.say("FIRST and LAST name the app's opening and closing lines.")
    flow.end(session, "Stop")
    edited = (flow.repo.root / "app.py").read_text()
    # `git add -p`: only the first part goes into the first commit.
    first_only = edited.replace("LAST = 'the closing line of the app'\n", "")
    (flow.repo.root / "app.py").write_text(first_only)
    flow.commit("First line")
    assert "FIRST and LAST" in flow.shown("app.py:3")
    (flow.repo.root / "app.py").write_text(edited)
    flow.commit("Last line")
    assert "FIRST and LAST" in flow.shown("app.py:21")
    assert flow.texts("app.py:20") == []


# -- ingested after the commit ----------------------------------------------------------------


def ingest_after(flow: Flow, session: Session) -> dict[str, Any]:
    """`mem ingest` of the session, run after the human committed (no hook)."""
    src = session.save()
    return dict(json.loads(flow.mem("ingest", str(src), "--json")))


def test_an_edits_kept_context_is_not_its_lines(flow: Flow) -> None:
    """Two edits a few lines apart, committed together: each memory on its own added lines,
    never on the other's (the first edit's lines are context in the second's hunk)."""
    session = flow.session()
    session.prompt("Add the limits")
    session.edit("app.py", "# app line 8\n", "# app line 8\nLIMIT_A = 10  # first limit\n")
    session.say("LIMIT_A bounds the first stage.")
    session.prompt("And the second")
    session.edit("app.py", "# app line 10\n", "# app line 10\nLIMIT_B = 20  # second limit\n")
    session.say("LIMIT_B bounds the second stage.")
    flow.commit("Limits")
    summary = ingest_after(flow, session)
    assert summary["pending_edits"] == 0
    assert "LIMIT_A bounds" in flow.shown("app.py:9")
    assert "LIMIT_B bounds" not in flow.shown("app.py:9")
    assert "LIMIT_B bounds" in flow.shown("app.py:12")
    assert "LIMIT_A bounds" not in flow.shown("app.py:12")


def test_a_neighbour_changed_before_the_commit_still_places_the_added_lines(flow: Flow) -> None:
    session = flow.session()
    session.prompt("Add a timeout")
    session.edit("app.py", "# app line 8\n", "# app line 8\nTIMEOUT_S = 12  # the proxy's is 15\n")
    session.say("TIMEOUT_S stays under the proxy's 15 s.")
    path = flow.repo.root / "app.py"
    path.write_text(path.read_text().replace("# app line 7\n", "# app line seven\n"))
    flow.commit("Timeout")
    summary = ingest_after(flow, session)
    assert (summary["anchors"], summary["pending_edits"]) == (1, 0)
    assert "TIMEOUT_S stays" in flow.shown("app.py:9")
    assert flow.texts("app.py:7") == []


def test_a_timestamp_at_the_end_of_time_is_no_failure(flow: Flow) -> None:
    session = flow.session()
    session.clock = datetime(9999, 12, 31, 23, 0, tzinfo=UTC).timestamp()
    session.prompt("From the far future")
    session.edit("app.py", "# app line 3\n", "# app line 3\nFUTURE = 'never waits'\n")
    session.say("An edit from the end of time.")
    summary = ingest_after(flow, session)
    assert (summary["pending_edits"], summary["unanchored_edits"]) == (0, 1)


def test_a_subagent_transcript_named_by_a_relative_path(flow: Flow) -> None:
    parent = flow.session()
    parent.prompt("Delegate the helper")
    child = parent.subagent("helper", "Write helper.py")
    child.write("helper.py", "def helper():\n    return 'helped'\n")
    child.say("helper() says it helped.")
    parent.save()
    child.save()
    flow.commit("Helper")
    rel = child.transcript.relative_to(child.transcript.parent.parent)
    done = subprocess.run(
        [*MEM, "ingest", str(rel), "--repo", str(flow.repo.root), "--json"],
        cwd=child.transcript.parent.parent, env=flow.env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "helper() says" in flow.shown("helper.py:2")
