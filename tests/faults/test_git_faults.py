"""git missing, a corrupt repository, an index.lock, a force-pushed history: each gives a
defined result and the server keeps serving."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..gitrepo import BOB, kong_repo
from .conftest import PROJECT, Faults, hover_text


def _path_without_git(tmp_path: Path) -> str:
    """A PATH with python but no git (mem runs as this interpreter's module)."""
    bin_dir = tmp_path / "nogit-bin"
    bin_dir.mkdir()
    for tool in ("python3", "python"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_git_missing_from_path(faults: Faults, tmp_path: Path) -> None:
    env = {"PATH": _path_without_git(tmp_path)}
    client = faults.server(env=env)
    try:
        buffer = faults.kong.root / "src/kong/buffer.rs"
        uri = client.open(buffer, buffer.read_text())
        assert client.hover(uri, 42)[1] is None
        assert client.request("textDocument/codeLens", {"textDocument": {"uri": uri}}) is None
        assert client.request(
            "workspace/executeCommand", {"command": "mem.ping", "arguments": [{}]}
        )["version"]
        assert client.proc.poll() is None
    finally:
        client.close()
    done = faults.mem(
        "ingest",
        str(tmp_path / "x.jsonl"),
        "--repo",
        str(faults.kong.root),
        "--project",
        PROJECT,
        env=env,
    )
    assert done.returncode == 2
    assert "git is not installed or not on PATH" in done.stderr
    assert "Traceback" not in done.stderr


def test_corrupt_repository_and_index_lock(faults: Faults, tmp_path: Path) -> None:
    repo = kong_repo(tmp_path / "corrupt")
    (repo.root / ".git" / "index.lock").write_text("")  # another git is (or was) running
    client = faults.server(root=repo.root)
    try:
        buffer = repo.root / "src/kong/buffer.rs"
        uri = client.open(buffer, buffer.read_text())
        # Read-only git commands ignore the lock: the line is blamed and the memory shown
        # (the memories were ingested from a repository with the same history).
        assert "Raised BODY\\_BUFFER" in hover_text(client.hover(uri, 42)[1])
        # Now destroy the objects: blame fails, hover answers null, the server lives on.
        objects = repo.root / ".git" / "objects"
        for sub in objects.iterdir():
            if len(sub.name) == 2:
                shutil.rmtree(sub)
        handler = repo.root / "src/kong/handler.rs"
        uri2 = client.open(handler, handler.read_text())
        assert client.hover(uri2, 10)[1] is None
        assert client.request("textDocument/codeLens", {"textDocument": {"uri": uri2}}) is None
        assert client.proc.poll() is None
    finally:
        client.close()


def test_force_pushed_history_without_memories(faults: Faults, tmp_path: Path) -> None:
    repo = kong_repo(tmp_path / "rewritten")
    # Rewrite history: the commit that changed line 42 is replaced by a different one.
    repo.git("reset", "-q", "--hard", repo.commits["initial"])
    repo.set_line("src/kong/buffer.rs", 42, "const BODY_BUFFER: usize = 16 * MB; // rewritten")
    repo.commit("rewritten", "Increase buffer (rewritten)", BOB)
    client = faults.server(root=repo.root)
    try:
        buffer = repo.root / "src/kong/buffer.rs"
        uri = client.open(buffer, buffer.read_text())
        assert client.hover(uri, 42)[1] is None  # its origin is a commit with no memories
        assert client.hover(uri, 10)[1] is None
        assert client.proc.poll() is None
    finally:
        client.close()
    assert os.path.isdir(repo.root)
