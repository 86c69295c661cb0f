"""Hostile input at `mem ingest`: oversized, deeply nested, enormous or BOM-prefixed files,
ambiguous commit prefixes, and a store that refuses data. Nothing half-written, no traceback."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from poimen_memory.domain import ContentError, Level, MemoryNode, ProjectId, QueryId, RunId
from poimen_memory.store import Batch, Store, StoreUnavailable, migrate

from ..conftest import create_database, drop_database
from ..gitrepo import BOB, FixtureRepo
from .conftest import Faults

FIXTURES = Path(__file__).parent.parent / "fixtures"
MAX_TEXT_BYTES = 1 << 20  # the documented limit of a node's text (domain.MAX_TEXT_BYTES)


def node(text: str, local_id: str, level: str = "L1") -> dict[str, Any]:
    return {"type": "node", "id": local_id, "level": level, "query_id": "q", "text": text,
            "created_at": "2026-08-20T08:00:00Z"}  # fmt: skip


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def ingest(
    faults: Faults, src: Path, project: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return faults.mem(
        "ingest", str(src), "--repo", str(faults.kong.root), "--project", project, *extra
    )


def node_count(dsn: str, project: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memory_node WHERE project = %s", (project,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def new_project() -> str:
    return f"limits-{uuid.uuid4().hex[:8]}"


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


# -- oversized nodes ------------------------------------------------------------------------


def oversized_input(root: Path) -> tuple[Path, int]:
    big = " ".join(f"w{i}" for i in range(300_000))  # 2.2 MB: over the limit and tsvector's
    src = write_rows(
        root / f"big-{uuid.uuid4().hex[:6]}.jsonl",
        [node("good one", "a"), node("good two", "b"), node(big, "c")],
    )
    return src, len(big.encode("utf-8"))


def test_oversized_node_is_refused_before_anything_is_written(faults: Faults) -> None:
    src, size = oversized_input(faults.root)
    project = new_project()
    # A batch boundary before the bad node: still nothing may be written.
    done = ingest(faults, src, project, "--batch-nodes", "1")
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert f"{src}:3: text too long ({size} bytes, max {MAX_TEXT_BYTES})" in done.stderr
    assert "unreachable" not in done.stderr
    assert node_count(faults.dsn, project) == 0


def test_oversized_node_is_skipped_and_reported_with_skip_bad(faults: Faults) -> None:
    src, size = oversized_input(faults.root)
    project = new_project()
    done = ingest(faults, src, project, "--batch-nodes", "1", "--skip-bad")
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert f"mem: skipped {src}:3: text too long ({size} bytes, max {MAX_TEXT_BYTES})" in (
        done.stderr
    )
    assert node_count(faults.dsn, project) == 2


def under_limit_text(first_word: str) -> str:
    """Just under the limit, and built so that indexing all of it would overflow Postgres's
    tsvector (1 MB): unique hyphenated words, each adding three lexemes."""
    words = [first_word]
    size = len(first_word)
    i = 0
    while True:
        word = f"{i:x}q-{i:x}z"
        if size + 1 + len(word) > MAX_TEXT_BYTES - 16:
            break
        words.append(word)
        size += 1 + len(word)
        i += 1
    return " ".join(words)


def test_text_just_under_the_limit_is_stored_and_found(faults: Faults) -> None:
    text = under_limit_text("zanzibarish")
    assert MAX_TEXT_BYTES - 64 < len(text.encode("utf-8")) <= MAX_TEXT_BYTES
    src = write_rows(faults.root / "under.jsonl", [node(text, "long")])
    project = new_project()
    done = ingest(faults, src, project)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    found = faults.mem("query", "zanzibarish", "--project", project, "--json")
    assert found.returncode == 0, found.stderr
    nodes = json.loads(found.stdout)["nodes"]
    assert len(nodes) == 1
    assert nodes[0]["text"].startswith("zanzibarish 0q-0z")


# -- a store that refuses data --------------------------------------------------------------


@pytest.fixture(scope="module")
def refusing_dsn() -> Iterator[str]:
    """A migrated database whose memory_node refuses any text containing 'poison' with the
    error Postgres gives for an oversized tsvector (SQLSTATE 54000)."""
    name, dsn = create_database("refusing")
    try:
        with psycopg.connect(dsn) as conn:
            migrate(conn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                """CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
                   BEGIN
                     IF NEW.text LIKE '%poison%' THEN
                       RAISE EXCEPTION 'string is too long for tsvector (2 bytes, max 1 bytes)'
                         USING ERRCODE = '54000';
                     END IF;
                     RETURN NEW;
                   END $$"""
            )
            conn.execute(
                "CREATE TRIGGER refuse_poison BEFORE INSERT ON memory_node"
                " FOR EACH ROW EXECUTE FUNCTION refuse_poison()"
            )
        yield dsn
    finally:
        drop_database(name)


def test_store_refusing_data_is_not_reported_unreachable(faults: Faults, refusing_dsn: str) -> None:
    src = write_rows(
        faults.root / "poison.jsonl",
        [node("good one", "a"), node("good two", "b"), node("poison pill", "c", "L0")],
    )
    project = new_project()
    done = faults.mem(
        "ingest", str(src), "--repo", str(faults.kong.root), "--project", project,
        "--batch-nodes", "1", env={"POIMEN_DSN": refusing_dsn},
    )  # fmt: skip
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert "unreachable" not in done.stderr
    assert "refused" in done.stderr
    assert "string is too long for tsvector" in done.stderr
    # The two L1 batches went first and are committed; the message says so.
    assert "2 node(s) in 2 earlier batch(es) were written" in done.stderr
    assert node_count(refusing_dsn, project) == 2


def test_refused_batch_leaves_the_store_usable(refusing_dsn: str) -> None:
    project = ProjectId(new_project())
    at = datetime(2026, 8, 20, tzinfo=UTC)

    def mk(text: str) -> MemoryNode:
        return MemoryNode(Level.L1, project, QueryId("q"), RunId("r"), 0, text, at)

    with Store(refusing_dsn, retry_interval=60) as store:
        with pytest.raises(ContentError, match="refused") as refused:
            store.insert_batch(Batch(nodes=[mk("poison")]))
        assert not isinstance(refused.value, StoreUnavailable)
        assert "unreachable" not in str(refused.value)
        # Not a lost connection: the very next batch is written (no reconnect wait).
        assert store.insert_batch(Batch(nodes=[mk("fine")])).nodes == 1


# -- malformed files ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["auto", "jsonl", "claude-code", "agent-trace"])
def test_deeply_nested_json_is_a_bad_record(faults: Faults, fmt: str) -> None:
    src = faults.root / f"nested-{fmt}.jsonl"
    src.write_text("[" * 60_000 + "\n" + json.dumps(node("good", "g")) + "\n")
    project = new_project()
    done = ingest(faults, src, project, "--format", fmt)
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert f"{src}:1: too deeply nested" in done.stderr
    assert node_count(faults.dsn, project) == 0


def test_deeply_nested_json_with_skip_bad_writes_the_rest(faults: Faults) -> None:
    src = faults.root / "nested-skip.jsonl"
    src.write_text(json.dumps(node("good", "g")) + "\n" + "[" * 60_000 + "\n")
    project = new_project()
    done = ingest(faults, src, project, "--skip-bad")
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert f"mem: skipped {src}:2: too deeply nested" in done.stderr
    assert node_count(faults.dsn, project) == 1


def agent_trace_record(revision: str) -> dict[str, Any]:
    return {
        "version": "0.1.0", "id": "0b9e8f2a-6c41-4d2b-a7e3-5f1c9d8b2e40",
        "timestamp": "2026-08-06T10:10:00Z", "vcs": {"type": "git", "revision": revision},
        "files": [{"path": "src/kong/handler.rs", "conversations": [
            {"url": "https://cursor.example/conversations/7c1d",
             "ranges": [{"start_line": 10, "end_line": 10}]}]}],
    }  # fmt: skip


@pytest.mark.parametrize("name", ["generic.jsonl", "session.jsonl", "trace.json", "traces.jsonl"])
def test_utf8_bom_is_accepted_in_every_format(faults: Faults, name: str) -> None:
    revision = faults.kong.commits["def456"]
    text = {
        "generic.jsonl": json.dumps(node("with a byte order mark", "m")) + "\n",
        "session.jsonl": (FIXTURES / "claude_code" / "session.jsonl").read_text("utf-8"),
        "trace.json": json.dumps(agent_trace_record(revision), indent=2),
        "traces.jsonl": json.dumps(agent_trace_record(revision)) + "\n",
    }[name]
    src = faults.root / f"bom-{name}"
    src.write_bytes(("\ufeff" + text).encode("utf-8"))
    project = new_project()
    done = ingest(faults, src, project)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert node_count(faults.dsn, project) > 0


def peak_rss_kib(faults: Faults, src: Path, *extra: str) -> tuple[int, str, int]:
    """(exit status, stderr, peak resident KiB) of `mem ingest` run from a fresh process,
    so that the peak is mem's own."""
    probe = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stderr.write(done.stderr)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    argv = [
        sys.executable,
        "-m",
        "poimen_memory.cli",
        "ingest",
        str(src),
        "--repo",
        str(faults.kong.root),
        "--project",
    ]
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv, new_project(), *extra],
        env=faults.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    status, peak = done.stdout.split()
    return int(status), done.stderr, int(peak)


@pytest.mark.slow
def test_enormous_line_is_refused_without_reading_it_whole(faults: Faults) -> None:
    small = write_rows(faults.root / "small.jsonl", [node("good", "g")])
    status, stderr, baseline = peak_rss_kib(faults, small)
    assert status == 0, stderr
    src = faults.root / "enormous.jsonl"
    with src.open("w", encoding="utf-8") as out:
        out.write('{"type": "node", "level": "L1", "query_id": "q", "text": "')
        for _ in range(50):
            out.write("x" * (1 << 20))
        out.write('"}\n')
        out.write(json.dumps(node("good", "g")) + "\n")
    for fmt in ("auto", "jsonl"):
        status, stderr, peak = peak_rss_kib(faults, src, "--format", fmt, "--skip-bad")
        assert "Traceback" not in stderr, stderr[-2000:]
        assert status == 0, stderr
        assert f"mem: skipped {src}:1: line too long" in stderr
        # The 50 MB line is never held in memory, not even once.
        assert peak - baseline < 40 * 1024, (fmt, peak, baseline)


# -- commit prefixes ------------------------------------------------------------------------


def ambiguous_repo(root: Path) -> tuple[FixtureRepo, str]:
    """A repository with two commits whose ids share their first four hex digits."""
    repo = FixtureRepo.create(root)
    repo.write("a.txt", "one\ntwo\n")
    base = repo.commit("base", "Base", BOB)
    tree = repo.git("rev-parse", "HEAD^{tree}").strip()
    seen: dict[str, bytes] = {}
    for i in range(200_000):
        body = (
            f"tree {tree}\nparent {base}\nauthor Bob Jones <bob@org.test> 1786000000 +0000\n"
            f"committer Bob Jones <bob@org.test> 1786000000 +0000\n\nvariant {i}\n"
        ).encode()
        sha = hashlib.sha1(b"commit %d\x00" % len(body) + body, usedforsecurity=False).hexdigest()
        prefix = sha[:4]
        if prefix in seen and not base.startswith(prefix):
            for data in (seen[prefix], body):
                written = subprocess.run(
                    ["git", "hash-object", "-w", "-t", "commit", "--stdin"],
                    cwd=repo.root, input=data, capture_output=True, check=True,
                )  # fmt: skip
                name = written.stdout.decode().strip()
                repo.git("update-ref", f"refs/heads/v-{name[:12]}", name)
            return repo, prefix
        seen[prefix] = body
    raise AssertionError("no two commits share a prefix")


def test_ambiguous_commit_prefix_says_give_more_digits(faults: Faults, tmp_path: Path) -> None:
    repo, prefix = ambiguous_repo(tmp_path / "ambiguous")
    anchored = {**node("evidence", "e", "L0"),
                "anchors": [{"file": "a.txt", "line": 1, "commit": prefix}]}  # fmt: skip
    missing = {**node("other evidence", "f", "L0"),
               "anchors": [{"file": "a.txt", "line": 1, "commit": "0123456789abc"}]}  # fmt: skip
    src = write_rows(tmp_path / "anchors.jsonl", [anchored, missing])
    project = new_project()
    done = faults.mem("ingest", str(src), "--repo", str(repo.root), "--project", project)
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert f"{src}:1: anchors: commit {prefix!r} is ambiguous" in done.stderr
    assert "give more digits" in done.stderr
    line1 = next(ln for ln in done.stderr.splitlines() if f"{src}:1:" in ln)
    assert "not in the repository" not in line1
    assert f"{src}:2: anchors: commit '0123456789abc' is not in the repository" in done.stderr
