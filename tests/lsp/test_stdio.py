"""How the server reads stdin: a pipe on the event loop (``lsp.stdio.PipeReader``), anything
else as pygls reads it; the same framing either way, and input it cannot frame is dropped
without ending the session."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from bench.lspclient import LspClient, read_message

from poimen_memory.lsp.stdio import LINE_LIMIT, PipeReader, is_pipe


def _read_all(data: bytes, reads: list[str]) -> list[bytes]:
    """What ``reads`` (``line`` or ``n:<count>``) return from a pipe that ``data`` was
    written into and then closed."""
    read_fd, write_fd = os.pipe()

    def write() -> None:  # from a thread: a pipe holds less than a long line
        with os.fdopen(write_fd, "wb") as w:
            w.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    stdin = os.fdopen(read_fd, "rb")

    async def go() -> list[bytes]:
        reader = PipeReader(stdin)
        out = []
        for what in reads:
            if what == "line":
                out.append(await reader.readline())
            else:
                out.append(await reader.readexactly(int(what.split(":")[1])))
        return out

    try:
        return asyncio.run(asyncio.wait_for(go(), timeout=60))
    finally:
        stdin.close()
        writer.join(timeout=5)


def test_a_pipe_or_socket_is_read_on_the_loop_a_file_or_a_buffer_is_not(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb") as r, os.fdopen(write_fd, "wb"):
        assert is_pipe(r)
    import socket

    a, b = socket.socketpair()
    with a, b, a.makefile("rb") as stream:
        assert is_pipe(stream)
    f = tmp_path / "messages"
    f.write_bytes(b"")
    with f.open("rb") as stream:
        assert not is_pipe(stream)
    assert not is_pipe(io.BytesIO(b""))  # type: ignore[arg-type]


def test_pipe_reader_frames_headers_and_bodies() -> None:
    data = b"Content-Length: 5\r\n\r\nhelloContent-Length: 2\r\n\r\nhi"
    got = _read_all(data, ["line", "line", "n:5", "line", "line", "n:2", "line"])
    assert got == [
        b"Content-Length: 5\r\n",
        b"\r\n",
        b"hello",
        b"Content-Length: 2\r\n",
        b"\r\n",
        b"hi",
        b"",
    ]


def test_pipe_reader_gives_what_is_left_when_input_ends_early() -> None:
    assert _read_all(b"Content-Len", ["line", "line"]) == [b"Content-Len", b""]
    assert _read_all(b"Content-Length: 9\r\n\r\nabc", ["line", "line", "n:9"]) == [
        b"Content-Length: 9\r\n",
        b"\r\n",
        b"abc",
    ]


@pytest.mark.parametrize("ends", [True, False], ids=["line-ends", "input-ends"])
def test_an_overlong_header_line_is_dropped_and_the_next_line_read(ends: bool) -> None:
    long = b"X" * (3 * LINE_LIMIT + 17)
    if ends:
        got = _read_all(long + b"\r\nContent-Length: 2\r\n", ["line", "line"])
        assert got == [b"Content-Length: 2\r\n", b""]
    else:
        assert _read_all(long, ["line"]) == [b""]


def test_a_line_at_the_limit_is_kept() -> None:
    line = b"Y" * (LINE_LIMIT - 2) + b"\r\n"
    assert _read_all(line, ["line", "line"]) == [line, b""]


NOT_JSON = b"Content-Length: 3\r\n\r\n{{{"
INITIALIZE = {"processId": None, "rootUri": None, "capabilities": {}}
SERVER = [sys.executable, "-m", "poimen_memory.cli", "lsp"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("POIMEN_")},
        "POIMEN_CACHE_DIR": str(tmp_path / "cache"),
        "POIMEN_DATA_DIR": str(tmp_path / "data"),
        "POIMEN_CONFIG": str(tmp_path / "none.toml"),
    }


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _check_session(status: int, answers: dict[int, Any], logged: list[str], stderr: bytes) -> None:
    """The session went on past the garbage: initialize (1) and shutdown (2) answered, exit 0,
    the unreadable body told to the client (``window/logMessage``) without a traceback."""
    assert status == 0, stderr.decode(errors="replace")
    assert answers[1]["result"]["serverInfo"]["name"] == "poimen-memory"
    assert answers[2]["result"] is None
    assert b"Traceback" not in stderr
    assert any(
        "Unable to handle message" in line and "JSONDecodeError" in line for line in logged
    ), logged
    assert not any("Traceback" in line for line in logged), logged


def test_the_server_answers_after_garbage_on_a_pipe(tmp_path: Path) -> None:
    """An overlong header line and a body that is not JSON, then a session as a client runs
    it (each answer awaited): both are dropped and logged, the session goes on."""
    client = LspClient(SERVER, _env(tmp_path), tmp_path, tmp_path / "server.log")
    try:
        client.write_raw(b"Z" * (LINE_LIMIT + 5) + b"\r\n" + NOT_JSON)
        answers = {1: client.wait(client.send("initialize", INITIALIZE))}
        client.notify("initialized", {})
        answers[2] = client.wait(client.send("shutdown", None))
        client.notify("exit", None)
        status = client.proc.wait(60)
    finally:
        client.close()
    logged = [
        params["message"]
        for method, params in client.notifications
        if method == "window/logMessage"
    ]
    _check_session(status, answers, logged, (tmp_path / "server.log").read_bytes())
    assert any("header line over" in line for line in logged), logged


def test_the_server_answers_after_garbage_from_a_file(tmp_path: Path) -> None:
    """The same from a regular file (read by pygls's reader, through the same loop)."""
    messages = tmp_path / "messages"
    messages.write_bytes(
        NOT_JSON
        + _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE})
        + _frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        + _frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        + _frame({"jsonrpc": "2.0", "method": "exit"})
    )
    with messages.open("rb") as stdin:
        proc = subprocess.run(
            SERVER, stdin=stdin, capture_output=True, env=_env(tmp_path), cwd=tmp_path,
            timeout=120, check=False,
        )  # fmt: skip
    out = io.BytesIO(proc.stdout)
    sent = list(iter(lambda: read_message(out), None))
    answers = {m["id"]: m for m in sent if "id" in m and "method" not in m}
    logged = [m["params"]["message"] for m in sent if m.get("method") == "window/logMessage"]
    _check_session(proc.returncode, answers, logged, proc.stderr)
