"""Values a store could keep but never give back: timestamps outside the years every reader
shares are refused at the door; a row stored before that check (put there with SQL) is
skipped by every lookup, which answers with the rest; a commit date past ``time_t`` is
clamped in the checkpoint blame. The real CLI, a real ``mem http`` and the real server."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

from ..gitrepo import FixtureRepo
from ..serving import mem_http
from .conftest import Faults, hover_text

BAD_TIMESTAMPS = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:00:00-14:00"]


@pytest.mark.parametrize("stamp", BAD_TIMESTAMPS)
def test_a_timestamp_outside_years_1_to_9999_in_utc_is_refused_at_the_door(
    faults: Faults, stamp: str
) -> None:
    project = f"door-{uuid.uuid4().hex[:6]}"
    row = {"type": "node", "level": "L0", "query_id": "q", "text": "Too old.",
           "anchors": [{"file": "src/kong/buffer.rs", "line": 42}], "created_at": stamp}  # fmt: skip
    done = faults.ingest([row], project)
    assert done.returncode != 0
    assert "created_at" in done.stderr, done.stderr
    assert stamp in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_an_agent_trace_timestamp_outside_the_years_is_refused(faults: Faults) -> None:
    record = {
        "version": "0.1.0",
        "id": str(uuid.uuid4()),
        "timestamp": BAD_TIMESTAMPS[0],
        "vcs": {"type": "git", "revision": faults.kong.git("rev-parse", "HEAD").strip()},
        "files": [],
    }
    src = faults.root / f"trace-{uuid.uuid4().hex[:6]}.json"
    src.write_text(json.dumps(record))
    done = faults.mem(
        "ingest", str(src), "--repo", str(faults.kong.root), "--project", "trace-door"
    )
    said = done.stdout + done.stderr
    assert "timestamp" in said, said
    assert BAD_TIMESTAMPS[0] in said, said
    assert "Traceback" not in said


@pytest.fixture(scope="module")
def poisoned(faults: Faults) -> str:
    """A project with two memories on buffer.rs:42, one of them given a BC ``created_at``
    directly in the database, as a store written before the check may hold."""
    project = f"poisoned-{uuid.uuid4().hex[:6]}"
    rows = [
        {"type": "node", "id": "good", "level": "L0", "query_id": "q-good",
         "text": "Innocent memory on the buffer line.",
         "anchors": [{"file": "src/kong/buffer.rs", "line": 42}],
         "created_at": "2026-08-20T07:00:00Z"},
        {"type": "node", "id": "bad", "level": "L0", "query_id": "q-bad",
         "text": "Poisoned memory on the buffer line.",
         "anchors": [{"file": "src/kong/buffer.rs", "line": 42}],
         "created_at": "2026-08-20T07:05:00Z"},
    ]  # fmt: skip
    done = faults.ingest(rows, project)
    assert done.returncode == 0, done.stderr
    with psycopg.connect(faults.dsn) as conn:
        updated = conn.execute(
            "UPDATE memory_node SET created_at = '0001-12-31 10:00:00+00 BC'"
            " WHERE project = %s AND text LIKE 'Poisoned%%'",
            (project,),
        ).rowcount
    assert updated == 1
    return project


def _lookup(faults: Faults, project: str, *args: str) -> str:
    if args[0] == "by-commit":
        args = (args[0], faults.kong.git("rev-parse", args[1]).strip())
    if args[0] != "query":
        args = (*args, "--repo", str(faults.kong.root))
    done = faults.mem("--json", "--project", project, *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("by-git", "src/kong/buffer.rs:42"),
        ("why", "src/kong/buffer.rs:42"),
        ("by-author", "alice@org.test"),
        ("by-commit", "HEAD~2"),
        ("query", "buffer"),
    ],
    ids=lambda a: a[0],
)
def test_a_stored_row_that_cannot_be_read_is_skipped_by_every_lookup(
    faults: Faults, poisoned: str, args: tuple[str, ...]
) -> None:
    out = _lookup(faults, poisoned, *args)
    assert "Innocent memory" in out
    assert "Poisoned memory" not in out


def test_http_lookup_skips_the_unreadable_row(faults: Faults, poisoned: str) -> None:
    log = faults.root / f"http-{uuid.uuid4().hex[:8]}.log"
    args = ("--repo", str(faults.kong.root), "--project", poisoned)
    with mem_http(args, faults.env, log) as base:
        for _ in range(2):
            r = httpx.post(
                f"{base}/memory/nodes/by-git",
                json={"file": "src/kong/buffer.rs", "line": 42},
                timeout=30,
            )
            assert r.status_code == 200, r.text
            assert "Innocent memory" in r.text
            assert "Poisoned memory" not in r.text
    # Logged once, naming the column; not once per request.
    assert log.read_text().count("cannot be read") == 1, log.read_text()


def test_the_hover_skips_the_unreadable_row(faults: Faults, poisoned: str) -> None:
    client = faults.server({"poimenMemory": {"dsn": faults.dsn, "project": poisoned}})
    try:
        buffer = faults.kong.root / "src/kong/buffer.rs"
        uri = client.open(buffer, buffer.read_text())
        text = hover_text(client.hover(uri, 42)[1])
        assert "Innocent memory" in text
        assert "Poisoned memory" not in text
    finally:
        client.close()


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.parametrize("seconds", ["253402300800", "99999999999999999999"])
def test_a_commit_date_past_time_t_is_clamped_in_the_checkpoint_blame(
    faults: Faults, tmp_path: Path, seconds: str
) -> None:
    repo = FixtureRepo.create(tmp_path / "future")
    repo.write("a.txt", "".join(f"line {i}\n" for i in range(1, 41)))
    repo.commit("first", "first", ("Ann", "ann@example.com"))
    env = {"POIMEN_CACHE_DIR": str(tmp_path / "cache")}
    first = faults.mem("--json", "blame", "a.txt", "--repo", str(repo.root), env=env)
    assert first.returncode == 0, first.stderr  # the checkpoint the next blame starts from
    repo.set_line("a.txt", 20, "changed in the far future")
    repo.commit("far", "far", ("Far", "far@example.com"))
    # The same commit with a date git writes but Python cannot hold (past year 9999).
    raw = _git(repo.root, "cat-file", "commit", "HEAD")
    forged = re.sub(r"> \d+ ([+-]\d{4})$", rf"> {seconds} \1", raw, flags=re.M)
    sha = _git(
        repo.root,
        "hash-object",
        "-t",
        "commit",
        "-w",
        "--literally",
        "--stdin",
        stdin=forged + "\n",
    )
    _git(repo.root, "update-ref", "HEAD", sha)
    done = faults.mem("--json", "blame", "a.txt", "--repo", str(repo.root), env=env)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["source"] == "incremental"
    why = faults.mem("--json", "by-commit", sha, "--repo", str(repo.root), "--project", "far")
    assert "Traceback" not in why.stderr, why.stderr
    assert "internal error" not in why.stderr, why.stderr
