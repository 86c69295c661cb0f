"""The edges of the protocol: odd argument values, undecodable URIs, a workspace given by
rootUri alone (or not at all), requests before initialize, and exit without shutdown."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.lspclient import LspClient

from poimen_memory.lsp.protocol import EXIT_GRACE

from ..gitrepo import BOB, FixtureRepo
from .conftest import PROJECT, Faults, hover_text

INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002


def _raw_client(faults: Faults) -> LspClient:
    """A server process that has not been initialized."""
    return LspClient(
        [sys.executable, "-m", "poimen_memory.cli", "lsp"],
        {**faults.env, "POIMEN_CACHE_DIR": str(faults.root / f"cache-{uuid.uuid4().hex[:8]}")},
        faults.kong.root,
        faults.root / "server.log",
    )


def _initialize(client: LspClient, faults: Faults, **workspace: Any) -> None:
    """initialize with exactly the workspace fields given (rootUri, workspaceFolders, ...)."""
    client.request(
        "initialize",
        {
            "processId": os.getpid(),
            "capabilities": {"textDocument": {"hover": {"contentFormat": ["markdown"]}}},
            "initializationOptions": {"poimenMemory": {"dsn": faults.dsn, "project": PROJECT}},
            **workspace,
        },
    )
    client.notify("initialized", {})


def _command(client: LspClient, command: str, argument: Any) -> dict[str, Any]:
    return client.wait(
        client.send("workspace/executeCommand", {"command": command, "arguments": [argument]}),
        timeout=30,
    )


def _invalid(reply: dict[str, Any], field: str) -> None:
    assert "error" in reply, reply
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    assert reply["error"]["message"].startswith(f"{field}:"), reply
    assert reply["error"]["data"] == {"field": field}, reply


@pytest.fixture(scope="module")
def other_repo(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    """A repository outside the kong workspace."""
    repo = FixtureRepo.create(tmp_path_factory.mktemp("other") / "other", None)
    repo.write("notes.txt", "first\nsecond\n")
    repo.commit("other", "Add notes", BOB)
    return repo


@pytest.fixture(scope="module")
def shared(faults: Faults) -> Iterator[LspClient]:
    client = faults.server()
    yield client
    client.close()


LIMITED = {
    "mem.byCommit": {"commit_sha": "abc123"},
    "mem.byAuthor": {"author": "Bob"},
    "mem.query": {"query": "buffer"},
}


@pytest.mark.parametrize("limit", ["¹", "١٢", "²³", "1.0", "0x10", " 5"])
@pytest.mark.parametrize("command", sorted(LIMITED))
def test_a_limit_that_is_not_ascii_digits_is_invalid_params(
    shared: LspClient, command: str, limit: str
) -> None:
    _invalid(_command(shared, command, {**LIMITED[command], "limit": limit}), "limit")


@pytest.mark.parametrize(
    "uri",
    [
        "file:///tmp/a%00b.rs",
        "file:///%00",
        "file:///tmp/%ED%A0%80.rs",  # UTF-8 of a lone surrogate
        "file:///tmp/%FF%FE.rs",
        "file:%00",
        "file://",
        "file:",
    ],
)
@pytest.mark.parametrize("command", ["mem.byGit", "mem.showMemories"])
def test_an_undecodable_uri_is_invalid_params_naming_uri(
    shared: LspClient, command: str, uri: str
) -> None:
    _invalid(_command(shared, command, {"uri": uri, "line": 1}), "uri")


def test_an_undecodable_uri_in_a_document_request_answers_null(shared: LspClient) -> None:
    for uri in ("file:///tmp/a%00b.rs", "file:///tmp/%ED%A0%80.rs"):
        for method, extra in (
            ("textDocument/hover", {"position": {"line": 0, "character": 0}}),
            ("textDocument/codeLens", {}),
        ):
            reply = shared.wait(shared.send(method, {"textDocument": {"uri": uri}, **extra}))
            assert "error" not in reply, (uri, method, reply)
            assert reply["result"] in (None, []), (uri, method, reply)
    assert shared.request("workspace/executeCommand", {"command": "mem.ping", "arguments": []})


def test_root_uri_alone_limits_lookups_to_it(faults: Faults, other_repo: FixtureRepo) -> None:
    client = _raw_client(faults)
    try:
        _initialize(client, faults, rootUri=faults.kong.root.as_uri())
        inside = faults.kong.root / "src/kong/buffer.rs"
        uri = client.open(inside, inside.read_text())
        assert "Raised BODY\\_BUFFER" in hover_text(client.hover(uri, 42)[1])
        assert _command(client, "mem.byGit", {"uri": uri, "line": 42})["result"]["nodes"]
        outside = other_repo.root / "notes.txt"
        out_uri = client.open(outside, outside.read_text())
        assert client.hover(out_uri, 1)[1] is None
        _invalid(_command(client, "mem.byGit", {"uri": out_uri, "line": 1}), "uri")
    finally:
        client.close()


def test_no_workspace_means_no_files(faults: Faults) -> None:
    client = _raw_client(faults)
    try:
        _initialize(client, faults, rootUri=None)
        inside = faults.kong.root / "src/kong/buffer.rs"
        uri = client.open(inside, inside.read_text())
        assert client.hover(uri, 42)[1] is None
        lenses = client.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
        assert lenses in (None, [])
        _invalid(_command(client, "mem.byGit", {"uri": uri, "line": 42}), "uri")
        assert client.request("workspace/executeCommand", {"command": "mem.ping", "arguments": []})
    finally:
        client.close()


def test_requests_before_initialize_get_server_not_initialized(faults: Faults) -> None:
    client = _raw_client(faults)
    try:
        inside = faults.kong.root / "src/kong/buffer.rs"
        uri = client.open(inside, inside.read_text())  # a notification: dropped
        for method, params in (
            ("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 41, "character": 0}}),
            ("textDocument/codeLens", {"textDocument": {"uri": uri}}),
            ("workspace/executeCommand", {"command": "mem.ping", "arguments": []}),
            ("shutdown", None),
            ("no/such/method", {}),
        ):  # fmt: skip
            reply = client.wait(client.send(method, params), timeout=30)
            assert reply.get("error", {}).get("code") == SERVER_NOT_INITIALIZED, (method, reply)
        assert client.proc.poll() is None
        # Initialized afterwards, it serves; the document opened before was dropped.
        _initialize(client, faults, rootUri=faults.kong.root.as_uri())
        assert client.request("workspace/executeCommand", {"command": "mem.ping", "arguments": []})
        reopened = client.open(inside, inside.read_text())
        assert "Raised BODY\\_BUFFER" in hover_text(client.hover(reopened, 42)[1])
    finally:
        client.close()


def _exit_status(faults: Faults, shutdown_first: bool, initialize: bool = True) -> int:
    client = _raw_client(faults)
    try:
        if initialize:
            _initialize(client, faults, rootUri=faults.kong.root.as_uri())
        if shutdown_first:
            client.request("shutdown", None, timeout=10)
        client.notify("exit", None)
        return client.proc.wait(15)
    finally:
        client.close()


def test_exit_without_shutdown_exits_with_status_1(faults: Faults) -> None:
    assert _exit_status(faults, shutdown_first=False) == 1
    assert _exit_status(faults, shutdown_first=False, initialize=False) == 1


def test_exit_after_shutdown_exits_with_status_0(faults: Faults) -> None:
    assert _exit_status(faults, shutdown_first=True) == 0


STUCK_THREAD = """\
import os, threading
# A thread that never ends, blocked in open() of a FIFO no one writes (as a thread reading a
# FIFO in some .git would be): Python waits for such a thread before it exits.
threading.Thread(target=lambda: open(os.environ["STUCK_FIFO"]), name="stuck").start()
"""


@pytest.mark.parametrize("shutdown_first", [True, False], ids=["after-shutdown", "without"])
def test_exit_ends_the_process_even_with_a_thread_stuck_for_good(
    faults: Faults, tmp_path: Path, shutdown_first: bool
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STUCK_THREAD)
    fifo = tmp_path / "nobody-writes"
    os.mkfifo(fifo)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = {**faults.env, "PYTHONPATH": path, "STUCK_FIFO": str(fifo)}
    env["POIMEN_CACHE_DIR"] = str(tmp_path / "cache")
    client = LspClient(
        [sys.executable, "-m", "poimen_memory.cli", "lsp"], env, faults.kong.root, tmp_path / "log"
    )
    try:
        _initialize(client, faults, rootUri=faults.kong.root.as_uri())
        assert client.request("workspace/executeCommand", {"command": "mem.ping", "arguments": []})
        if shutdown_first:
            client.request("shutdown", None, timeout=10)
        client.notify("exit", None)
        started = time.monotonic()
        status = client.proc.wait(EXIT_GRACE + 10)
        assert time.monotonic() - started < EXIT_GRACE + 3
        assert status == (0 if shutdown_first else 1)
    finally:
        client.close()


def test_a_file_uri_of_another_host_is_not_in_the_workspace(shared: LspClient) -> None:
    reply = _command(shared, "mem.byGit", {"uri": "file://evil.example/etc/passwd", "line": 1})
    _invalid(reply, "uri")
