"""`mem ingest` on real repositories and a real Postgres: each format, git enrichment from the
repository itself, idempotency row for row, bad input, NOTIFY."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from poimen_memory.cli import main
from poimen_memory.domain import ProjectId
from poimen_memory.ingest import (
    NOTIFY_CHANNEL,
    Format,
    IngestError,
    IngestOptions,
    IngestRejected,
    ingest,
)
from poimen_memory.store import Store

from .gitrepo import ALICE, FixtureRepo, kong_repo
from .test_store import snapshot

FIXTURES = Path(__file__).parent / "fixtures"
SESSION = FIXTURES / "claude_code" / "session.jsonl"


@pytest.fixture(scope="module")
def kong(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    return kong_repo(tmp_path_factory.mktemp("ingest") / "kong")


@pytest.fixture
def options(kong: FixtureRepo, project: ProjectId, tmp_path: Path) -> IngestOptions:
    return IngestOptions(project=project, repo_dir=kong.root, cache_path=tmp_path / "blame.db")


def write_jsonl(path: Path, *objects: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def git_blame_line(repo: FixtureRepo, file: str, line: int) -> tuple[str, str, int]:
    """(commit, original path, original line) straight from `git blame --porcelain`."""
    out = repo.git(
        "blame", "--porcelain", "-M", "-C", "--root", f"-L{line},{line}", "HEAD", "--", file
    )
    first = out.splitlines()[0].split()
    orig_path = next(ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("filename "))
    return first[0], orig_path, int(first[1])


def anchors_of(dsn: str, project: ProjectId) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            """SELECT n.level, n.text, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
               FROM git_anchor a JOIN memory_node n
                 ON n.project = a.project AND n.sha256 = a.node_sha256
               WHERE a.project = %s ORDER BY a.file, a.line_start, n.text""",
            (project.value,),
        ).fetchall()


def rows(dsn: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


# -- generic JSONL --------------------------------------------------------------------------

MEMORY = {"type": "node", "id": "m1", "level": "L1", "query_id": "q1",
          "text": "Kong body buffer raised to 16MB", "created_at": "2026-08-06T12:00:00Z"}  # fmt: skip


def test_jsonl_lines_at_head_are_anchored_at_their_blame_origin(
    tmp_path: Path, kong: FixtureRepo, store: Store, store_dsn: str, options: IngestOptions
) -> None:
    src = write_jsonl(
        tmp_path / "in.jsonl",
        MEMORY,
        {"type": "node", "id": "e1", "level": "L0", "query_id": "q1", "text": "buffer edit",
         "parents": ["m1"], "anchors": [{"file": "src/kong/buffer.rs", "line": 42}]},
        {"type": "node", "id": "e2", "level": "L0", "query_id": "q1", "text": "handler edit",
         "anchors": [{"file": "src/kong/handler.rs", "lines": [9, 11]}]},
        {"type": "edge", "child": "e2", "parent": "m1"},
    )  # fmt: skip
    summary = ingest([src], store, options)
    assert summary.nodes_by_level == {"L0": 2, "L1": 1, "L2": 0}
    assert (summary.edges, summary.written.edges) == (2, 2)
    got = anchors_of(store_dsn, options.project)
    expected = []
    for file, text, lines in (("src/kong/buffer.rs", "buffer edit", [42]),
                              ("src/kong/handler.rs", "handler edit", [9, 10, 11])):  # fmt: skip
        for line in lines:
            commit, orig_path, orig_line = git_blame_line(kong, file, line)
            expected.append(
                ("L0", text, "github.com/org/poimen", commit, orig_path, orig_line, orig_line)
            )
    assert sorted(got) == sorted(expected)
    assert any(r[3] == kong.commits["abc123"] for r in got)


def test_commit_metadata_is_extracted_from_the_repository(
    tmp_path: Path, kong: FixtureRepo, store: Store, store_dsn: str, options: IngestOptions
) -> None:
    # The input names no author, message or date: all of it must come from git.
    src = write_jsonl(
        tmp_path / "in.jsonl",
        {"type": "node", "level": "L0", "query_id": "q", "text": "x",
         "anchors": [{"file": "src/kong/buffer.rs", "line": 42}]},
    )  # fmt: skip
    ingest([src], store, options)
    (commit,) = rows(
        store_dsn,
        "SELECT commit_sha, message, author_name, author_email, author_date FROM git_commit"
        " WHERE project = %s",
        options.project.value,
    )
    assert commit[0] == kong.commits["abc123"]
    assert commit[1] == "Increase buffer"
    assert (commit[2], commit[3]) == ALICE  # .mailmap applied; committed as the old address
    git_date = kong.git("log", "-1", "--format=%aI", kong.commits["abc123"]).strip()
    assert commit[4].isoformat() == git_date


def test_jsonl_explicit_commit_prefix_and_whole_file(
    tmp_path: Path, kong: FixtureRepo, store: Store, store_dsn: str, options: IngestOptions
) -> None:
    abc = kong.commits["abc123"]
    src = write_jsonl(
        tmp_path / "in.jsonl",
        {"type": "node", "level": "L0", "query_id": "q", "text": "at a commit",
         "anchors": [{"file": "src/kong/buffer.rs", "lines": [40, 44], "commit": abc[:9]}]},
        {"type": "node", "level": "L0", "query_id": "q", "text": "whole file",
         "anchors": [{"file": "src/kong/handler.rs"}]},
    )  # fmt: skip
    ingest([src], store, options)
    got = anchors_of(store_dsn, options.project)
    assert ("L0", "at a commit", "github.com/org/poimen", abc, "src/kong/buffer.rs", 40, 44) in got
    assert (
        "L0", "whole file", "github.com/org/poimen", kong.commits["def456"],
        "src/kong/handler.rs", 0, 0,
    ) in got  # fmt: skip


def test_same_commit_under_two_repo_identities_is_two_anchors(
    tmp_path: Path, store: Store, store_dsn: str, options: IngestOptions
) -> None:
    src = write_jsonl(
        tmp_path / "in.jsonl",
        {"type": "node", "level": "L0", "query_id": "q", "text": "mirrored",
         "anchors": [{"file": "src/kong/buffer.rs", "line": 42}]},
    )  # fmt: skip
    ingest([src], store, options)
    mirror = IngestOptions(
        project=options.project,
        repo_dir=options.repo_dir,
        repo_override="https://gitlab.com/org/poimen.git",
        cache_path=options.cache_path,
    )
    ingest([src], store, mirror)
    repos = sorted(r[2] for r in anchors_of(store_dsn, options.project))
    assert repos == ["github.com/org/poimen", "gitlab.com/org/poimen"]
    # ...and the node itself is one row.
    assert rows(
        store_dsn, "SELECT count(*) FROM memory_node WHERE project = %s", options.project.value
    ) == [(1,)]


# -- Claude Code ----------------------------------------------------------------------------


def test_claude_code_session_anchors_edits_and_builds_l1s(
    kong: FixtureRepo, store: Store, store_dsn: str, options: IngestOptions
) -> None:
    summary = ingest([SESSION], store, options)
    assert summary.nodes_by_level == {"L0": 3, "L1": 3, "L2": 0}
    # Query 3's edit never reached HEAD; query 2's /etc/hosts edit is outside the repo, and its
    # "// handler line 15" -> "// handler line 15" changed nothing: none of them is anchored,
    # and the no-op is counted as what it is.
    assert summary.unanchored_edits == 1
    assert summary.noop_edits == 1
    got = anchors_of(store_dsn, options.project)
    assert [(r[3], r[4], r[5], r[6]) for r in got] == [
        (kong.commits["abc123"], "src/kong/buffer.rs", 42, 42),
        (kong.commits["def456"], "src/kong/handler.rs", 10, 10),
    ]
    for row, file, line in zip(
        got, ("src/kong/buffer.rs", "src/kong/handler.rs"), (42, 10), strict=True
    ):
        assert (row[3], row[4], row[5]) == git_blame_line(kong, file, line)
    assert "Uploads over 8MB fail" in got[0][1]
    assert "[Edit src/kong/buffer.rs]" in got[0][1]
    # One L1 per prompt, holding the agent's final reply, with edges from that prompt's L0s.
    pairs = rows(
        store_dsn,
        """SELECT c.query_id, c.level, p.query_id, p.level, p.text FROM memory_edge e
           JOIN memory_node c ON c.project = e.project AND c.sha256 = e.child_sha256
           JOIN memory_node p ON p.project = e.project AND p.sha256 = e.parent_sha256
           WHERE e.project = %s""",
        options.project.value,
    )
    q1, q2, q3 = (
        "7d0e6a52-1c3b-4f7e-9a2d-6b8c0e4f1a11",
        "9f4b2d71-5e8a-4c3f-b1d0-3a7e9c2f6b22",
        "2c8e5f13-7a9d-4b6e-8f0a-1d3c5e7a9b33",
    )
    assert sorted(p[:4] for p in pairs) == sorted((q, "L0", q, "L1") for q in (q1, q2, q3))
    replies = {p[2]: p[4] for p in pairs}
    assert replies[q1].startswith("Raised BODY_BUFFER to 16MB")
    assert replies[q2].startswith("Bodies above BODY_BUFFER are now streamed")
    run_ids = rows(
        store_dsn,
        "SELECT DISTINCT run_id FROM memory_node WHERE project = %s",
        options.project.value,
    )
    assert run_ids == [("5b1f2c9e-8d47-4a0b-9e61-2f0c7d3a1b84",)]


def test_an_edit_is_blamed_on_its_own_lines_and_a_kept_blame_is_used(
    kong: FixtureRepo, store: Store, store_dsn: str, options: IngestOptions, tmp_path: Path
) -> None:
    """A session's edits cost a blame of their lines, not a whole-file blame written to the
    cache (that one is the editor's); a whole-file blame already kept answers the same."""
    import sqlite3

    from poimen_memory.gitio import BlameCache, Blamer, GitRepo

    ingest([SESSION], store, options)
    assert options.cache_path is not None
    with sqlite3.connect(options.cache_path) as db:
        assert db.execute("SELECT count(*) FROM blame").fetchone() == (0,)
    expected = [(r[3], r[4], r[5], r[6]) for r in anchors_of(store_dsn, options.project)]
    assert len(expected) == 2
    # Whole-file blames kept in the cache of another ingest: used, and the anchors are equal.
    kept = tmp_path / "kept.db"
    blamer = Blamer(GitRepo.discover(kong.root), BlameCache(kept))
    for file in ("src/kong/buffer.rs", "src/kong/handler.rs"):
        blamer.blame_file(file)
    other = ProjectId(f"{options.project.value}-kept")
    ingest([SESSION], store, IngestOptions(project=other, repo_dir=kong.root, cache_path=kept))
    assert [(r[3], r[4], r[5], r[6]) for r in anchors_of(store_dsn, other)] == expected


def test_claude_code_small_budget_splits_queries_into_chunks(
    store: Store, store_dsn: str, options: IngestOptions
) -> None:
    small = IngestOptions(
        options.project, options.repo_dir, budget=20, cache_path=options.cache_path
    )
    summary = ingest([SESSION], store, small)
    assert summary.nodes_by_level["L0"] > 3
    # Only the chunk holding the buffer.rs Edit is anchored at buffer.rs; no other chunk is.
    buffer_rows = [
        r for r in anchors_of(store_dsn, options.project) if r[4] == "src/kong/buffer.rs"
    ]
    assert len(buffer_rows) == 1
    assert "[Edit src/kong/buffer.rs]" in buffer_rows[0][1]
    ts = rows(
        store_dsn,
        "SELECT t FROM memory_node WHERE project = %s AND level = 'L0' ORDER BY t",
        options.project.value,
    )
    assert [t for (t,) in ts] == list(range(1, len(ts) + 1))


def test_claude_code_edit_not_committed_yet_is_unanchored(
    tmp_path: Path, store: Store, store_dsn: str, project: ProjectId
) -> None:
    # The session ran, but nothing is committed yet: no evidence may be anchored.
    repo = FixtureRepo.create(tmp_path / "fresh")
    repo.write("src/kong/buffer.rs", "".join(f"// buffer line {i}\n" for i in range(1, 61)))
    repo.write("src/kong/handler.rs", "".join(f"// handler line {i}\n" for i in range(1, 21)))
    repo.commit("initial", "Initial", ALICE)
    summary = ingest(
        [SESSION], store, IngestOptions(project, repo.root, cache_path=tmp_path / "c.db")
    )
    assert summary.anchors == 0
    assert summary.nodes_by_level["L0"] == 3


# -- Agent Trace ----------------------------------------------------------------------------


def agent_trace_record(revision: str, path: str = "src/kong/handler.rs") -> dict[str, Any]:
    return {
        "version": "0.1.0",
        "id": "0b9e8f2a-6c41-4d2b-a7e3-5f1c9d8b2e40",
        "timestamp": "2026-08-06T10:10:00Z",
        "vcs": {"type": "git", "revision": revision},
        "tool": {"name": "cursor", "version": "2.0.1"},
        "files": [
            {
                "path": path,
                "conversations": [
                    {
                        "url": "https://cursor.example/conversations/7c1d",
                        "contributor": {"type": "ai", "model_id": "claude-sonnet-4-5"},
                        "ranges": [
                            {"start_line": 10, "end_line": 10, "content_hash": "murmur3:9f2e"}
                        ],
                    }
                ],
            }
        ],
    }


def test_agent_trace_ranges_become_anchors_at_the_revision(
    tmp_path: Path, kong: FixtureRepo, store: Store, store_dsn: str, options: IngestOptions
) -> None:
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(agent_trace_record(kong.commits["def456"])))
    summary = ingest([src], store, options)
    assert summary.nodes_by_level["L0"] == 1
    (row,) = anchors_of(store_dsn, options.project)
    assert row[3:] == (kong.commits["def456"], "src/kong/handler.rs", 10, 10)
    assert "conversation: https://cursor.example/conversations/7c1d" in row[1]
    assert "by claude-sonnet-4-5 via cursor 2.0.1" in row[1]


# -- idempotency ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "claude-code", "agent-trace"])
def test_reingest_leaves_the_store_unchanged_row_for_row(
    tmp_path: Path,
    kong: FixtureRepo,
    store: Store,
    store_dsn: str,
    options: IngestOptions,
    fmt: str,
) -> None:
    if fmt == "jsonl":
        src = write_jsonl(
            tmp_path / "in.jsonl",
            {**MEMORY, "created_at": None} if False else {k: v for k, v in MEMORY.items() if k != "created_at"},
            {"type": "node", "level": "L0", "query_id": "q1", "text": "e", "parents": ["m1"],
             "anchors": [{"file": "src/kong/buffer.rs", "lines": [41, 43]}]},
        )  # fmt: skip
    elif fmt == "claude-code":
        src = SESSION
    else:
        src = tmp_path / "trace.json"
        src.write_text(json.dumps(agent_trace_record(kong.commits["def456"])))
    first = ingest([src], store, options)
    assert first.written.nodes > 0
    before = snapshot(store_dsn)
    again = ingest([src], store, options)
    assert (again.written.nodes, again.written.edges, again.written.anchors) == (0, 0, 0)
    assert snapshot(store_dsn) == before


# -- bad input ------------------------------------------------------------------------------

BAD_CASES = [
    ("not json", "{nope", "not valid JSON"),
    ("array line", "[1, 2]", "expected a JSON object, got list"),
    ("unknown type", {"type": "thing"}, "type: expected 'node' or 'edge', got 'thing'"),
    ("bad level", {"type": "node", "level": "l0", "query_id": "q", "text": "x"}, "level: expected 'L0', 'L1' or 'L2', got 'l0'"),
    ("L2 with query", {"type": "node", "level": "L2", "query_id": "q", "text": "x"}, "query_id: must be absent at L2"),
    ("L0 without query", {"type": "node", "level": "L0", "text": "x"}, "query_id: required at L0"),
    ("empty text", {"type": "node", "level": "L1", "query_id": "q", "text": " "}, "text: a memory node needs non-empty text"),
    ("naive time", {"type": "node", "level": "L1", "query_id": "q", "text": "x", "created_at": "2026-01-01T00:00:00"}, "created_at: timestamp needs a UTC offset"),
    ("unknown field", {"type": "node", "level": "L1", "query_id": "q", "text": "x", "author": "a"}, "author: unknown field of a node"),
    ("anchor on L1", {"type": "node", "level": "L1", "query_id": "q", "text": "x", "anchors": [{"file": "a"}]}, "anchors: only L0 evidence is anchored"),
    ("absolute file", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "/etc/passwd", "line": 1}]}, "anchors[0].file: expected a path relative"),
    ("dotdot file", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "../x", "line": 1}]}, "must be a normalized relative path"),
    ("line zero", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "src/kong/buffer.rs", "line": 0}]}, "anchors[0].line: expected a line number >= 1, got 0"),
    ("beyond end", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "src/kong/buffer.rs", "line": 61}]}, "lines 61-61: src/kong/buffer.rs has 60 lines at HEAD"),
    ("untracked file", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "nope.rs", "line": 1}]}, "nope.rs is not in HEAD"),
    ("unknown commit", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "README.md", "line": 1, "commit": "deadbeef"}]}, "commit 'deadbeef' is not in the repository"),
    ("option commit", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "README.md", "line": 1, "commit": "--upload-pack=touch /tmp/pwned"}]}, "is not a commit id (4 to 64 hex digits)"),
    ("file not at commit", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "README.md", "line": 1, "commit": "INITIAL"}]}, "README.md is not in commit"),
    ("beyond end at a commit", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "anchors": [{"file": "src/kong/buffer.rs", "lines": [59, 70], "commit": "INITIAL"}]}, "lines 59-70: src/kong/buffer.rs has 60 lines in commit"),
    ("dangling parent", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "parents": ["ghost"]}, "parent: 'ghost' is no node of this file"),
    ("unknown sha parent", {"type": "node", "level": "L0", "query_id": "q", "text": "x", "parents": ["a" * 64]}, "is not in this input or the store"),
    ("edge down", {"type": "edge", "child": "m1", "parent": "e1"}, "edge: L1 -> L0 does not point up"),
    ("duplicate id", {**MEMORY, "text": "another"}, "id: 'm1' already used at line 1"),
]  # fmt: skip


@pytest.mark.parametrize(("label", "line", "message"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_records_are_reported_and_nothing_is_written(
    tmp_path: Path,
    kong: FixtureRepo,
    store: Store,
    store_dsn: str,
    options: IngestOptions,
    label: str,
    line: object,
    message: str,
) -> None:
    good_l0 = {"type": "node", "id": "e1", "level": "L0", "query_id": "q1", "text": "good",
               "parents": ["m1"], "anchors": [{"file": "src/kong/buffer.rs", "line": 42}]}  # fmt: skip
    if isinstance(line, dict):
        line = json.dumps(line).replace("INITIAL", kong.commits["initial"])
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([json.dumps(MEMORY), json.dumps(good_l0), str(line)]) + "\n")
    before = snapshot(store_dsn)
    with pytest.raises(IngestRejected) as info:
        ingest([src], store, options)
    assert snapshot(store_dsn) == before
    reported = [str(b) for b in info.value.bad]
    assert len(reported) == 1, reported
    assert reported[0].startswith(f"{src}:3: "), reported
    assert message in reported[0]

    # --skip-bad writes the two good records and lists the bad one.
    skip = IngestOptions(
        options.project, options.repo_dir, skip_bad=True, cache_path=options.cache_path
    )
    summary = ingest([src], store, skip)
    assert [str(b) for b in summary.skipped] == reported
    assert summary.written.nodes == 2
    assert summary.written.anchors == 1


def test_unreadable_and_unknown_inputs(
    tmp_path: Path, store: Store, options: IngestOptions
) -> None:
    with pytest.raises(IngestError, match="does not exist"):
        ingest([tmp_path / "missing.jsonl"], store, options)
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n')
    with pytest.raises(IngestError, match="cannot tell the format"):
        ingest([odd], store, options)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(IngestError, match=r"--repo: .* is not inside a git work tree"):
        ingest([odd], store, IngestOptions(options.project, plain))


def test_format_detection(tmp_path: Path, kong: FixtureRepo) -> None:
    from poimen_memory.ingest.pipeline import detect_format

    assert detect_format(SESSION) is Format.CLAUDE_CODE
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(agent_trace_record(kong.commits["def456"]), indent=2))
    assert detect_format(trace) is Format.AGENT_TRACE
    assert detect_format(write_jsonl(tmp_path / "g.jsonl", MEMORY)) is Format.JSONL


# -- NOTIFY ---------------------------------------------------------------------------------


def test_notify_after_each_committed_batch(
    tmp_path: Path, store: Store, store_dsn: str, options: IngestOptions
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", MEMORY)
    with psycopg.connect(store_dsn, autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        ingest([src], store, options)
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert notes, "no notification within 5 s"
    assert json.loads(notes[0].payload) == {
        "project": options.project.value,
        "repo": "github.com/org/poimen",
    }


# -- the command ----------------------------------------------------------------------------


def test_mem_ingest_command(
    tmp_path: Path,
    kong: FixtureRepo,
    store_dsn: str,
    project: ProjectId,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POIMEN_CACHE_DIR", str(tmp_path / "cache"))
    src = write_jsonl(tmp_path / "in.jsonl", MEMORY)
    argv = [
        "--dsn",
        store_dsn,
        "ingest",
        str(src),
        "--repo",
        str(kong.root),
        "--project",
        project.value,
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "nodes    L0 0 · L1 1 · L2 0  (1 new of 1)" in out
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["written"]["nodes"] == 0
    bad = write_jsonl(tmp_path / "bad.jsonl", {"type": "node", "level": "L9", "text": "x"})
    assert (
        main(
            [
                "--dsn",
                store_dsn,
                "ingest",
                str(bad),
                "--repo",
                str(kong.root),
                "--project",
                project.value,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "1 bad record(s); nothing was written" in err
    assert f"{bad}:1: level: expected 'L0', 'L1' or 'L2', got 'L9'" in err
    # No project, and no work tree to derive one from (the one project rule).
    assert main(["--dsn", store_dsn, "ingest", str(src), "--repo", str(tmp_path)]) == 2
    assert "--project: required" in capsys.readouterr().err


def test_examples_ingest_against_this_repository(
    tmp_path: Path, store: Store, store_dsn: str, project: ProjectId
) -> None:
    root = Path(__file__).resolve().parent.parent
    examples = sorted((root / "examples").glob("*.jsonl"))
    assert examples
    summary = ingest(examples, store, IngestOptions(project, root, cache_path=tmp_path / "c.db"))
    assert not summary.skipped
    assert summary.anchors >= 3
    assert summary.nodes_by_level == {"L0": 3, "L1": 3, "L2": 1}
    commits = rows(
        store_dsn, "SELECT DISTINCT commit_sha FROM git_anchor WHERE project = %s", project.value
    )
    history = subprocess.run(
        ["git", "rev-list", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    assert {c for (c,) in commits} <= set(history)
