"""No git option injection, no SQL injection, no reading outside the workspace."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from bench.lspclient import LspClient

from .conftest import PROJECT, Faults

PWNED = Path("/tmp/poimen-pwned")
OUTPUT = Path("/tmp/poimen-output-x")


@pytest.fixture(autouse=True)
def _clean() -> None:
    PWNED.unlink(missing_ok=True)
    OUTPUT.unlink(missing_ok=True)


def test_no_git_option_injection_anywhere(faults: Faults, server: LspClient) -> None:
    evil_commit = f"--upload-pack=touch {PWNED}"
    evil_path = f"--output={OUTPUT}"
    # LSP commands
    for command, argument in (
        ("mem.byCommit", {"commit_sha": evil_commit}),
        ("mem.byGit", {"file": evil_path, "line": 1, "repo": "github.com/org/poimen"}),
        (
            "mem.byGit",
            {
                "file": "src/kong/buffer.rs",
                "line": 1,
                "at": evil_commit,
                "repo": "github.com/org/poimen",
            },
        ),
        ("mem.byAuthor", {"author": evil_commit}),
        ("mem.query", {"query": evil_commit}),
    ):
        reply = server.wait(
            server.send("workspace/executeCommand", {"command": command, "arguments": [argument]})
        )
        assert "error" not in reply or reply["error"]["code"] == -32602, reply
    # CLI
    assert faults.mem("by-commit", evil_commit, "--project", PROJECT).returncode == 2
    assert faults.mem(
        "by-git", f"{evil_path}:1", "--repo", str(faults.kong.root), "--project", PROJECT
    ).returncode in (1, 2)
    # Ingest: anchors naming them are bad records, reported, nothing run.
    done = faults.ingest([
        {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "README.md", "line": 1, "commit": evil_commit}]},
        {"type": "node", "level": "L0", "query_id": "q", "text": "y", "anchors": [{"file": evil_path, "line": 1}]},
    ])  # fmt: skip
    assert done.returncode == 2
    assert "is not a commit id" in done.stderr
    assert not PWNED.exists()
    assert not OUTPUT.exists()


HOSTILE = [
    "Robert'); DROP TABLE memory_node;--",
    "back\\slash \\' \\\" and 'quotes' \"double\"",
    "%(project)s {chosen} $1 ? :name",
    "ünïcödé ✓ 緩衝區",
]


def test_no_sql_injection_through_text_fields(faults: Faults, server: LspClient) -> None:
    project = f"sqli-{uuid.uuid4().hex[:6]}"
    rows = [
        {"type": "node", "level": "L0", "query_id": f"q{i}", "text": text, "anchors": [{"file": "src/kong/buffer.rs", "line": 42}]}
        for i, text in enumerate(HOSTILE)
    ]  # fmt: skip
    done = faults.ingest(rows, project)
    assert done.returncode == 0, done.stderr
    with psycopg.connect(faults.dsn) as conn:
        stored = {
            r[0]
            for r in conn.execute("SELECT text FROM memory_node WHERE project = %s", (project,))
        }
        tables = {
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
    assert stored == set(HOSTILE)
    assert {"memory_node", "memory_edge", "git_anchor", "git_commit"} <= tables
    for text in HOSTILE:
        for command, argument in (
            ("mem.query", {"query": text, "project": project}),
            ("mem.byAuthor", {"author": text, "project": project}),
            (
                "mem.byGit",
                {
                    "file": text.replace("/", "_") or "x",
                    "line": 1,
                    "commit_sha": "abcd",
                    "repo": "github.com/org/poimen",
                    "project": project,
                },
            ),
        ):
            reply = server.wait(
                server.send(
                    "workspace/executeCommand", {"command": command, "arguments": [argument]}
                )
            )
            assert "error" not in reply or reply["error"]["code"] == -32602, reply
    # A NUL is refused with a clear message (Postgres text cannot hold it), nothing written.
    bad = faults.ingest(
        [{"type": "node", "level": "L1", "query_id": "q", "text": "nul\u0000here"}], project
    )
    assert bad.returncode == 2
    assert "text: contains a NUL character" in bad.stderr
    with psycopg.connect(faults.dsn) as conn:
        count = conn.execute(
            "SELECT count(*) FROM memory_node WHERE project = %s", (project,)
        ).fetchone()
    assert count == (len(HOSTILE),)


def test_commands_cannot_read_outside_the_workspace(
    faults: Faults, server: LspClient, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    link = faults.kong.root / "link-out.txt"
    link.unlink(missing_ok=True)
    link.symlink_to(secret)
    try:
        for uri in (
            secret.as_uri(),
            link.as_uri(),
            "file:///etc/passwd",
            "http://example.invalid/x",
        ):
            for command in ("mem.byGit", "mem.showMemories"):
                reply = server.wait(
                    server.send(
                        "workspace/executeCommand",
                        {"command": command, "arguments": [{"uri": uri, "line": 1}]},
                    )
                )
                assert reply.get("error", {}).get("code") == -32602, (uri, reply)
                assert "top secret" not in json.dumps(reply)
        for file in ("../../etc/passwd", "/etc/passwd", "src/../../x"):
            reply = server.wait(
                server.send(
                    "workspace/executeCommand",
                    {
                        "command": "mem.byGit",
                        "arguments": [{"file": file, "line": 1, "repo": "github.com/org/poimen"}],
                    },
                )
            )
            assert reply["error"]["code"] == -32602
            assert "file" in reply["error"]["message"]
    finally:
        link.unlink(missing_ok=True)
