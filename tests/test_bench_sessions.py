"""Figure n's sessions (bench/sessions.py), on a small repository: Claude Code's reader takes
their transcripts whole, each Edit's recorded patch is the one a diff gives, and the hook's
worker stores their memories on the lines the edits added (at the session's commit), or keeps
them waiting for the commit."""

from __future__ import annotations

import json
import random
from pathlib import Path

import psycopg
import pytest
from bench import sessions

from poimen_memory.domain import Level, ProjectId
from poimen_memory.ingest.claude_code import parse_claude_code
from poimen_memory.ingest.model import TextAtHead

from .claude_sessions import structured_patch
from .gitrepo import ALICE, FixtureRepo

COUNT = 5


def _module(k: int) -> str:
    rng = random.Random(k)
    lines = [f'"""Module {k}."""', "", "LIMITS = {"]
    lines += [f"    'w{k}_{n}': {rng.randrange(10, 5000)}," for n in range(20)]
    lines += ["}", ""]
    for n in range(12):
        lines += [
            f"def handle_{k}_{n}(request, budget={rng.randrange(2, 90)}):",
            f"    timeout = request.timeout * {rng.randrange(2, 9)}",
            f"    return stream_{n}(request.body, timeout, budget)",
            "",
        ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def repo(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "app", remote="https://git.example/org/app.git")
    for k in range(3):
        repo.write(f"src/app/mod_{k}.py", _module(k))
    repo.write("README.md", "app\n")
    repo.commit("initial", "Initial", ALICE)
    return repo


def _maker(repo: FixtureRepo, tmp_path: Path) -> sessions.SessionMaker:
    files = sessions.editable_files(repo.root)
    assert files == [f"src/app/mod_{k}.py" for k in range(3)]
    out = sessions.sessions_dir(tmp_path / "claude" / "projects", repo.root)
    return sessions.SessionMaker(
        repo.root, files, out, random.Random(7), sessions.first_clock(repo.root)
    )


def _recorded_edits(transcript: Path) -> list[dict[str, object]]:
    entries = [json.loads(line) for line in transcript.read_text().splitlines()]
    return [
        e["toolUseResult"]
        for e in entries
        if isinstance(e.get("toolUseResult"), dict) and "structuredPatch" in e["toolUseResult"]
    ]


def test_transcripts_are_read_whole_and_their_patches_are_a_diffs(
    repo: FixtureRepo, tmp_path: Path
) -> None:
    maker = _maker(repo, tmp_path)
    for k in range(COUNT):
        session = maker.make(commit=k % 2 == 0)
        assert 1 <= len(session.edits) <= 6
        parsed = parse_claude_code(session.transcript, ProjectId("p"), repo.root)
        assert not parsed.bad
        assert not parsed.incomplete
        assert parsed.noop_edits == 0
        assert any(d.node.level is Level.L1 for d in parsed.drafts)
        requests = [a for d in parsed.drafts for a in d.anchors if isinstance(a, TextAtHead)]
        assert [(r.file, r.added) for r in requests] == [
            (e.file, (e.added,)) for e in session.edits
        ]
        for edit in _recorded_edits(session.transcript):
            before, old, new = edit["originalFile"], edit["oldString"], edit["newString"]
            assert isinstance(before, str)
            assert isinstance(old, str)
            assert isinstance(new, str)
            assert edit["structuredPatch"] == structured_patch(before, before.replace(old, new))
        if not session.committed:
            maker.commit_later(session)
    log = repo.git("log", "--format=%s").splitlines()
    assert len(log) == COUNT + 1  # each session's work in a commit of its own


def _anchored(dsn: str, project: str, session: str) -> list[tuple[str, str, int, int]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT a.commit_sha, a.file, a.line_start, a.line_end FROM git_anchor a"
            " JOIN memory_node n ON n.project = a.project AND n.sha256 = a.node_sha256"
            " WHERE a.project = %s AND n.run_id = %s",
            (project, session),
        ).fetchall()


def _waiting(dsn: str, project: str, session: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT p.file FROM pending_anchor p"
            " JOIN memory_node n ON n.project = p.project AND n.sha256 = p.node_sha256"
            " WHERE p.project = %s AND n.run_id = %s",
            (project, session),
        ).fetchall()
    return [r[0] for r in rows]


def test_the_hook_stores_memories_on_the_edited_lines(
    repo: FixtureRepo, tmp_path: Path, store_dsn: str, project: ProjectId
) -> None:
    maker = _maker(repo, tmp_path)
    with sessions.hook_environment(tmp_path / "cache", tmp_path / "no-config.toml"):
        for k in range(COUNT):
            session = maker.make(commit=k % 2 == 0)
            assert sessions.ingest_session(session, store_dsn, project.value) > 0
            entry = sessions.logged(session)
            assert entry["bad_records"] == 0
            if session.committed:
                head = repo.git("rev-parse", "HEAD").strip()
                anchors = _anchored(store_dsn, project.value, session.session_id)
                assert {(c, f) for c, f, _, _ in anchors} == {(head, f) for f in session.files()}
                for commit, file, first, last in anchors:
                    added = {line for e in session.edits if e.file == file for line in e.added}
                    lines = repo.git("show", f"{commit}:{file}").split("\n")
                    assert set(lines[first - 1 : last]) <= added
                assert entry["pending_edits"] == 0
            else:
                assert entry["anchors"] == 0
                assert entry["pending_edits"] == len(session.edits)
                waiting = _waiting(store_dsn, project.value, session.session_id)
                assert set(waiting) == set(session.files())
                maker.commit_later(session)
