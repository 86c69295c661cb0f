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

from poimen_memory.lsp.stdio import LINE_LIMIT, PipeReader, is_pipe


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


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


def _exchange(stdin: Any, env: dict[str, str], cwd: Path) -> tuple[int, bytes, bytes]:
    proc = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", "lsp"],
        stdin=stdin, capture_output=True, env=env, cwd=cwd, timeout=120, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


def _session(garbage: bytes) -> list[tuple[bytes, int | None]]:
    """What a client writes, in parts, each with the id of the answer it waits for next."""
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": None, "rootUri": None, "capabilities": {}},
    }  # fmt: skip
    return [
        (garbage + _frame(init), 1),
        (
            _frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + _frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}),
            2,
        ),
        (_frame({"jsonrpc": "2.0", "method": "exit"}), None),
    ]


def _read_frame(stdout: Any) -> bytes:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = stdout.read(1)
        assert byte, "the server closed its output"
        head += byte
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    return head + stdout.read(length)


def _messages(out: bytes) -> list[dict[str, Any]]:
    found = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        found.append(json.loads(rest[:length]))
        out = rest[length:]
    return found


def _responses(out: bytes) -> dict[int, Any]:
    return {m["id"]: m for m in _messages(out) if "id" in m and "method" not in m}


@pytest.mark.parametrize("source", ["pipe", "file"])
def test_the_server_answers_after_garbage_on_a_pipe_and_from_a_file(
    source: str, tmp_path: Path
) -> None:
    """An overlong header line and a body that is not JSON are dropped (logged); the
    session goes on and ends with status 0 after shutdown, whether stdin is a pipe (read on
    the event loop) or a regular file (read by pygls)."""
    garbage = b"Z" * (LINE_LIMIT + 5) + b"\r\n" + b"Content-Length: 3\r\n\r\n{{{"
    steps = _session(garbage if source == "pipe" else b"Content-Length: 3\r\n\r\n{{{")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("POIMEN_")},
        "POIMEN_CACHE_DIR": str(tmp_path / "cache"),
        "POIMEN_DATA_DIR": str(tmp_path / "data"),
        "POIMEN_CONFIG": str(tmp_path / "none.toml"),
    }
    if source == "file":
        messages = tmp_path / "messages"
        messages.write_bytes(b"".join(part for part, _ in steps))
        with messages.open("rb") as stdin:
            status, out, err = _exchange(stdin, env, tmp_path)
    else:  # as a client does: each request's answer awaited before what follows it
        proc = subprocess.Popen(
            [sys.executable, "-m", "poimen_memory.cli", "lsp"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=tmp_path,
        )  # fmt: skip
        assert proc.stdin is not None
        assert proc.stdout is not None
        got = b""
        for part, answer_id in steps:
            proc.stdin.write(part)
            proc.stdin.flush()
            while answer_id is not None and answer_id not in _responses(got):
                got += _read_frame(proc.stdout)
        out_rest, err = proc.communicate(timeout=120)
        out = got + out_rest
        status = proc.returncode
    assert status == 0, err.decode(errors="replace")
    answers = _responses(out)
    assert answers[1]["result"]["serverInfo"]["name"] == "poimen-memory"
    assert answers[2]["result"] is None
    assert b"Traceback" not in err
    # Told to the client, as every log line of the server, without a traceback.
    logged = [
        m["params"]["message"] for m in _messages(out) if m.get("method") == "window/logMessage"
    ]
    assert any(
        "Unable to handle message" in line and "JSONDecodeError" in line for line in logged
    ), logged
    assert not any("Traceback" in line for line in logged), logged
    if source == "pipe":
        assert any("header line over" in line for line in logged), logged
