"""``mem demo``: a small repository with agent memories, and what a hover on it shows.

It builds a git repository (two files, commits by two authors), ingests memories about it
through the real ingest path (git context read back from the repository), then asks the
lookup service what hovering ``src/kong/buffer.rs:42`` shows.

The repository is built the same way every time (fixed authors, dates and messages, and no
git configuration of the user's), so its commits have the same ids on every run and every
machine. It is built in a new or empty directory only. A directory that holds a previous
demo, recognised by its marker file and checked to be exactly that demo, is used as it is;
anything else is refused. Nothing is ever deleted.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from poimen_memory.domain import ProjectId
from poimen_memory.gitio import GitError, GitRunner
from poimen_memory.gitio.runner import pinned_environment
from poimen_memory.ingest import IngestOptions, ingest
from poimen_memory.lookup import HoverRequest, build_service
from poimen_memory.render import render_hover
from poimen_memory.store import Store, connect, migrate

__all__ = [
    "DEMO_HEAD",
    "MARKER",
    "MARKER_TEXT",
    "DemoRefused",
    "DemoResult",
    "build_demo_repo",
    "demo_state",
    "run_demo",
]

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


# Written inside the repository's git directory (so the work tree stays clean): the demo's
# own repository, and no other, has it.
MARKER = Path(".git") / "poimen-demo"
MARKER_TEXT = "a sample repository made by `mem demo`; it may be rebuilt by it\n"
# HEAD of the repository build_demo_repo makes, wherever and whenever it runs.
DEMO_HEAD = "7cf8db624d94ece8a68586ffc5dde94e430a0ccb"
_COMMITS = (
    ("Initial kong module", BOB, 1786000000),
    ("Increase buffer", ALICE, 1786003600),
    ("Handle large bodies", BOB, 1786007200),
)


class DemoRefused(Exception):
    """The directory given for the demo may not be used; the message says why."""


@dataclass(frozen=True, slots=True)
class DemoResult:
    """Where the demo put things and what the hover shows."""

    repo: Path
    repo_id: str
    hover: str
    nodes_written: int


@dataclass
class _DemoGit(GitRunner):
    """git without any configuration of the user's or the system's (no hooks, template,
    signing, default branch or identity from there) and without the GIT_* variables of the
    caller; commits by ``who`` at ``stamp`` (seconds, UTC), as author and committer."""

    who: tuple[str, str] = ("poimen-memory", "demo@example.org")
    stamp: int = 0

    def _env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        name, email = self.who
        date = f"@{self.stamp} +0000"
        return {
            **base,
            **pinned_environment(base),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_COMMITTER_DATE": date,
        }


def _numbered(prefix: str, n: int) -> str:
    return "".join(f"// {prefix} line {i}\n" for i in range(1, n + 1))


def demo_state(root: Path) -> bool:
    """Whether ``root`` must be built (True: it is new or empty) or holds the demo already
    (False). DemoRefused for anything else: a file, a directory with other things in it, a
    demo that was changed since it was built."""
    if not root.exists():
        return True
    if not root.is_dir():
        raise DemoRefused(f"{root} exists and is not a directory")
    if not any(root.iterdir()):
        return True
    marker = root / MARKER
    if marker.is_symlink() or not marker.is_file() or marker.read_text("utf-8") != MARKER_TEXT:
        raise DemoRefused(f"{root} is not empty and holds no demo; choose a new or empty directory")
    changed = _changed(root)
    if changed:
        raise DemoRefused(
            f"{root} holds a demo repository that was changed since it was built ({changed}); "
            "remove it yourself, or choose another directory"
        )
    return False


def _changed(root: Path) -> str | None:
    """How the repository at ``root`` differs from the demo's, or None if it does not."""
    git = _DemoGit()
    try:
        top = git.run(root, ["rev-parse", "--show-toplevel"]).stdout.decode().strip()
        if Path(top).resolve() != root.resolve():
            return f"its work tree is {top}"
        head = git.run(root, ["rev-parse", "--verify", "-q", "HEAD"], ok_codes=(0, 1))
        if head.stdout.decode().strip() != DEMO_HEAD:
            return "other commits"
        status = git.run(root, ["status", "--porcelain", "--ignored", "--untracked-files=all"])
    except GitError as exc:
        return f"git: {exc}"
    if status.stdout.strip():
        return "files added or edited"
    return None


def build_demo_repo(root: Path) -> Path:
    """The demo repository at ``root`` (DemoRefused unless ``root`` is new, empty or that
    repository already): an initial commit, alice's "Increase buffer" changing
    src/kong/buffer.rs:42 and bob's "Handle large bodies" changing src/kong/handler.rs:10."""
    if not demo_state(root):
        return root
    root.mkdir(parents=True, exist_ok=True)
    git = _DemoGit()
    git.run(root, ["-c", "init.defaultBranch=main", "init", "-q"])
    (root / MARKER).write_text(MARKER_TEXT, "utf-8")
    git.run(root, ["remote", "add", "origin", "https://example.org/demo/kong.git"])
    (root / "src" / "kong").mkdir(parents=True)
    buffer = _numbered("buffer", 60).splitlines()
    handler = _numbered("handler", 20).splitlines()
    (root / "src/kong/buffer.rs").write_text("\n".join(buffer) + "\n")
    (root / "src/kong/handler.rs").write_text("\n".join(handler) + "\n")

    def commit(message: str, author: tuple[str, str], stamp: int) -> None:
        git.who, git.stamp = author, stamp
        git.run(root, ["add", "-A"])
        git.run(root, ["commit", "-q", "--no-gpg-sign", "--no-verify", "-m", message])

    (first, second, third) = _COMMITS
    commit(*first)
    buffer[41] = "const BODY_BUFFER: usize = 16 * MB;"
    (root / "src/kong/buffer.rs").write_text("\n".join(buffer) + "\n")
    commit(*second)
    handler[9] = "if body.len() > BODY_BUFFER { return stream(body); }"
    (root / "src/kong/handler.rs").write_text("\n".join(handler) + "\n")
    commit(*third)
    return root


def run_demo(dsn: str, root: Path, cache_path: Path | None = None) -> DemoResult:
    """Build the repository (or find it built), ingest the memories, and render the hover on
    buffer.rs:42."""
    repo = build_demo_repo(root)
    with connect(dsn) as conn:
        migrate(conn)
    with Store(dsn, max_size=2) as store, tempfile.TemporaryDirectory() as scratch:
        memories = Path(scratch) / "memories.jsonl"
        memories.write_text("".join(json.dumps(m) + "\n" for m in MEMORIES))
        summary = ingest(
            [memories],
            store,
            IngestOptions(PROJECT, repo, repo_override=None, cache_path=cache_path),
        )
        service = build_service(store, [repo], PROJECT, cache_path=cache_path)
        result = service.hover(HoverRequest(file=str(repo / "src/kong/buffer.rs"), line=42))
        repo_id = service.checkouts.identities()[0].value
    shown = render_hover(result, 400, markdown=False) if result else "(no memories: unexpected)\n"
    return DemoResult(repo, repo_id, shown, summary.written.nodes)
