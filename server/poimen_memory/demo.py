"""``mem demo``: a small repository with agent memories, and what a hover on it shows.

It builds a git repository (two files, commits by two authors), ingests memories about it
through the real ingest path (git context read back from the repository), then asks the
lookup service what hovering ``src/kong/buffer.rs:42`` shows.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from poimen_memory.domain import ProjectId
from poimen_memory.gitio import GitRunner
from poimen_memory.ingest import IngestOptions, ingest
from poimen_memory.lookup import build_service
from poimen_memory.render import render_hover
from poimen_memory.store import Store, connect, migrate

__all__ = ["DemoResult", "build_demo_repo", "run_demo"]

PROJECT = ProjectId("demo")
ALICE = ("Alice Smith", "alice@example.org")
BOB = ("Bob Jones", "bob@example.org")

MEMORIES = [
    {"type": "node", "id": "s1", "level": "L2", "text": "Kong gateway: request bodies are buffered in memory up to 16MB and streamed beyond that.", "created_at": "2026-08-20T09:00:00Z"},
    {"type": "node", "id": "m1", "level": "L1", "query_id": "raise-buffer", "text": "Kong's body buffer was raised from 8MB to 16MB so that 16MB uploads pass.", "parents": ["s1"], "created_at": "2026-08-20T08:00:00Z"},
    {"type": "node", "id": "e1", "level": "L0", "query_id": "raise-buffer", "text": "User: uploads over 8MB fail with a 413 from Kong.\nAgent: the limit is BODY_BUFFER in src/kong/buffer.rs:42; raised it to 16 * MB.\nVerified: a 15MB upload now passes, a 20MB one still gets 413.", "parents": ["m1"], "anchors": [{"file": "src/kong/buffer.rs", "line": 42}], "created_at": "2026-08-20T07:00:00Z"},
    {"type": "node", "id": "m2", "level": "L1", "query_id": "stream-large", "text": "Bodies larger than the buffer are streamed to the upstream instead of being rejected.", "parents": ["s1"], "created_at": "2026-08-20T08:10:00Z"},
    {"type": "node", "id": "e2", "level": "L0", "query_id": "stream-large", "text": "Agent: added the streaming branch in the handler for bodies above BODY_BUFFER.", "parents": ["m2"], "anchors": [{"file": "src/kong/handler.rs", "line": 10}], "created_at": "2026-08-20T07:10:00Z"},
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class DemoResult:
    """Where the demo put things and what the hover shows."""

    repo: Path
    repo_id: str
    hover: str
    nodes_written: int


def _numbered(prefix: str, n: int) -> str:
    return "".join(f"// {prefix} line {i}\n" for i in range(1, n + 1))


def build_demo_repo(root: Path) -> Path:
    """A fresh repository at ``root``: an initial commit, alice's "Increase buffer" changing
    src/kong/buffer.rs:42 and bob's "Handle large bodies" changing src/kong/handler.rs:10."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    runner = GitRunner()
    runner.run(root, ["init", "-q"])
    runner.run(root, ["remote", "add", "origin", "https://example.org/demo/kong.git"])
    (root / "src" / "kong").mkdir(parents=True)
    buffer = _numbered("buffer", 60).splitlines()
    handler = _numbered("handler", 20).splitlines()
    (root / "src/kong/buffer.rs").write_text("\n".join(buffer) + "\n")
    (root / "src/kong/handler.rs").write_text("\n".join(handler) + "\n")

    def commit(message: str, author: tuple[str, str], stamp: int) -> None:
        runner.run(root, ["add", "-A"])
        runner.run(
            root,
            [
                "-c", f"user.name={author[0]}", "-c", f"user.email={author[1]}",
                "commit", "-q", "--no-gpg-sign", "-m", message,
                f"--date=@{stamp} +0000",
            ],
        )  # fmt: skip

    commit("Initial kong module", BOB, 1786000000)
    buffer[41] = "const BODY_BUFFER: usize = 16 * MB;"
    (root / "src/kong/buffer.rs").write_text("\n".join(buffer) + "\n")
    commit("Increase buffer", ALICE, 1786003600)
    handler[9] = "if body.len() > BODY_BUFFER { return stream(body); }"
    (root / "src/kong/handler.rs").write_text("\n".join(handler) + "\n")
    commit("Handle large bodies", BOB, 1786007200)
    return root


def run_demo(dsn: str, root: Path, cache_path: Path | None = None) -> DemoResult:
    """Build the repository, ingest the memories, and render the hover on buffer.rs:42."""
    repo = build_demo_repo(root)
    with connect(dsn) as conn:
        migrate(conn)
    memories = root.parent / f"{root.name}-memories.jsonl"
    memories.write_text("".join(json.dumps(m) + "\n" for m in MEMORIES))
    with Store(dsn, max_size=2) as store:
        summary = ingest(
            [memories],
            store,
            IngestOptions(PROJECT, repo, repo_override=None, cache_path=cache_path),
        )
        service = build_service(store, [repo], PROJECT, cache_path=cache_path)
        result = service.hover(repo / "src/kong/buffer.rs", 42)
        repo_id = service.checkouts.identities()[0].value
    shown = render_hover(result, 400, markdown=False) if result else "(no memories: unexpected)\n"
    return DemoResult(repo, repo_id, shown, summary.written.nodes)
