"""One workspace folder whose repository never answers (a FIFO in ``.git``, a git that hangs)
cannot freeze the language server: ``initialize``, ``mem.ping`` and ``shutdown``/``exit``
answer promptly, the other folder's hovers keep working, and the bad folder is reported once,
by name."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from .conftest import PROJECT, Faults

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _plain_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("one\n")
    _git(root, "add", "a.txt")
    _git(root, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "one")
    return root


def _fifo_at(rel: str) -> Callable[[Path, Path], dict[str, str]]:
    def make(bad: Path, tmp: Path) -> dict[str, str]:
        target = bad / ".git" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        os.mkfifo(target)
        return {}

    return make


def _hanging_git(bad: Path, tmp: Path) -> dict[str, str]:
    """A git that never returns in the bad folder (whatever gitio checks, a read can block)."""
    real = shutil.which("git")
    assert real is not None
    shim_dir = tmp / "bin"
    shim_dir.mkdir()
    shim = shim_dir / "git"
    shim.write_text(
        f'#!/bin/sh\ncase "$(pwd -P)" in "{bad.resolve()}"*) exec sleep 600;; esac\n'
        f'exec "{real}" "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{shim_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


BAD_FOLDERS = {
    "fifo-commondir": _fifo_at("commondir"),
    "fifo-alternates": _fifo_at("objects/info/alternates"),
    "git-hangs": _hanging_git,
}


@pytest.mark.parametrize("kind", list(BAD_FOLDERS))
async def test_a_folder_that_never_answers_blocks_nothing(
    faults: Faults, tmp_path: Path, kind: str
) -> None:
    bad = _plain_repo(tmp_path / "bad")
    env = BAD_FOLDERS[kind](bad, tmp_path)
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "poimen_memory.cli", "lsp"],
        server_env={
            **faults.env,
            "POIMEN_CACHE_DIR": str(tmp_path / f"cache-{uuid.uuid4().hex[:6]}"),
            **env,
        },
    )
    client = await config.start()
    assert isinstance(client, LanguageClient)
    good = faults.kong.root
    process = client._server  # the server's subprocess
    assert process is not None
    try:
        started = time.monotonic()
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=client_capabilities("visual-studio-code"),
                    root_uri=bad.as_uri(),
                    workspace_folders=[
                        types.WorkspaceFolder(uri=bad.as_uri(), name="bad"),
                        types.WorkspaceFolder(uri=good.as_uri(), name="kong"),
                    ],
                    initialization_options={
                        "poimenMemory": {"dsn": faults.dsn, "project": PROJECT}
                    },
                )
            ),
            timeout=10,
        )
        assert time.monotonic() - started < 8

        ping = await asyncio.wait_for(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="mem.ping", arguments=[])
            ),
            timeout=5,
        )
        assert ping is not None

        buffer = good / "src/kong/buffer.rs"
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(buffer.as_uri(), "rust", 1, buffer.read_text())
            )
        )
        shown = await asyncio.wait_for(
            client.text_document_hover_async(
                types.HoverParams(
                    types.TextDocumentIdentifier(buffer.as_uri()), types.Position(41, 0)
                )
            ),
            timeout=15,
        )
        assert shown is not None
        assert isinstance(shown.contents, types.MarkupContent)
        assert "Kong body buffer raised to 16MB" in shown.contents.value

        # A file of the bad folder answers (with nothing), and quickly, again and again.
        bad_file = bad / "a.txt"
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(bad_file.as_uri(), "plaintext", 1, "one\n")
            )
        )
        for _ in range(6):
            nothing = await asyncio.wait_for(
                client.text_document_hover_async(
                    types.HoverParams(
                        types.TextDocumentIdentifier(bad_file.as_uri()), types.Position(0, 0)
                    )
                ),
                timeout=5,
            )
            assert nothing is None

        # The bad folder is reported, once, by name.
        def naming_bad() -> list[str]:
            said = [m.message for m in client.messages]
            return [m for m in said if str(bad.resolve()) in m]

        deadline = time.monotonic() + 15
        while not naming_bad() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        reports = naming_bad()
        assert len(reports) == 1, [m.message for m in client.messages]
        assert "\n" not in reports[0]
        assert "Traceback" not in reports[0]

        # The good folder still answers after the report.
        again = await asyncio.wait_for(
            client.text_document_hover_async(
                types.HoverParams(
                    types.TextDocumentIdentifier(buffer.as_uri()), types.Position(41, 0)
                )
            ),
            timeout=5,
        )
        assert again is not None

        await asyncio.wait_for(client.shutdown_async(None), timeout=5)
        client.exit(None)
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            pytest.fail("the server did not end within 10 s of exit")
        assert process.returncode == 0
    finally:
        if process.returncode is None:
            process.kill()
        await client.stop()


@pytest.mark.parametrize("kind", list(BAD_FOLDERS))
async def test_a_repository_found_below_a_folder_that_never_answers_blocks_nothing(
    faults: Faults, tmp_path: Path, kind: str
) -> None:
    """A workspace folder of several repositories: one of them, found when a file of it is
    first asked about, never answers. Its hovers answer null within seconds
    (at once after the first), and nothing else waits."""
    folder = tmp_path / "projects"
    bad = _plain_repo(folder / "bad")
    env = BAD_FOLDERS[kind](bad, tmp_path)
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "poimen_memory.cli", "lsp"],
        server_env={**faults.env, "POIMEN_CACHE_DIR": str(tmp_path / "cache"), **env},
    )
    client = await config.start()
    assert isinstance(client, LanguageClient)
    good = faults.kong.root
    process = client._server
    assert process is not None
    try:
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=client_capabilities("neovim"),
                    workspace_folders=[
                        types.WorkspaceFolder(uri=folder.as_uri(), name="projects"),
                        types.WorkspaceFolder(uri=good.as_uri(), name="kong"),
                    ],
                    initialization_options={
                        "poimenMemory": {"dsn": faults.dsn, "project": PROJECT}
                    },
                )
            ),
            timeout=10,
        )
        bad_file = bad / "a.txt"
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(bad_file.as_uri(), "plaintext", 1, "one\n")
            )
        )
        started = time.monotonic()
        for _ in range(8):  # more than the server has workers
            nothing = await asyncio.wait_for(
                client.text_document_hover_async(
                    types.HoverParams(
                        types.TextDocumentIdentifier(bad_file.as_uri()), types.Position(0, 0)
                    )
                ),
                timeout=8,
            )
            assert nothing is None
        assert time.monotonic() - started < 12

        ping = await asyncio.wait_for(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="mem.ping", arguments=[])
            ),
            timeout=5,
        )
        assert ping is not None
        buffer = good / "src/kong/buffer.rs"
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(buffer.as_uri(), "rust", 1, buffer.read_text())
            )
        )
        shown = await asyncio.wait_for(
            client.text_document_hover_async(
                types.HoverParams(
                    types.TextDocumentIdentifier(buffer.as_uri()), types.Position(41, 0)
                )
            ),
            timeout=10,
        )
        assert shown is not None
        assert isinstance(shown.contents, types.MarkupContent)
        assert "Kong body buffer raised to 16MB" in shown.contents.value

        await asyncio.wait_for(client.shutdown_async(None), timeout=5)
        client.exit(None)
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            pytest.fail("the server did not end within 10 s of exit")
        assert process.returncode == 0
    finally:
        if process.returncode is None:
            process.kill()
        await client.stop()
