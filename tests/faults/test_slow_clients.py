"""Slow and greedy clients of `mem http` and `mem mcp --http`: connections that never finish
their headers are closed after the header timeout, and cannot keep a client with the token
out, even beyond the process's limit on open files; MCP sessions opened and left are capped
(one more `initialize` is refused with a message), keep the server's memory bounded, and are
closed once idle. Real servers on loopback, spoken to with raw sockets and httpx."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest

from ..serving import free_port, wait_until_healthy
from .conftest import PROJECT, Faults

TOKEN = "t0ken-for-slow-clients"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BY_GIT = {"file": "src/kong/buffer.rs", "line": 42}
OPEN_FILES = 256  # the server's limit on open files (soft and hard): many machines have 1024


def _few_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


@contextmanager
def running(
    faults: Faults, args: list[str], env: dict[str, str], port: int
) -> Iterator[subprocess.Popen[bytes]]:
    log = faults.root / f"slow-{uuid.uuid4().hex[:8]}.log"
    with log.open("wb") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "poimen_memory.cli", *args, "--port", str(port),
             "--repo", str(faults.kong.root), "--project", PROJECT, "--token", TOKEN],
            env={**faults.env, **env}, cwd=faults.root, stdout=subprocess.DEVNULL,
            stderr=err, preexec_fn=_few_files,
        )  # fmt: skip
    server.log = log  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.terminate()
        server.wait(10)


def hold(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that each send half a request's headers and then nothing."""
    held = []
    partial = f"POST /memory/nodes/by-git HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    for _ in range(count):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(partial)
        except OSError:
            s.close()
            continue
        held.append(s)
    return held


def closed_within(s: socket.socket, seconds: float, trickle: bool = False) -> float | None:
    """Seconds until the server closes ``s`` (sending a byte every half second if
    ``trickle``: a slow client's headers); None if it is still open after ``seconds``."""
    start = time.monotonic()
    s.settimeout(0.5)
    while time.monotonic() - start < seconds:
        try:
            if s.recv(4096) == b"":
                return time.monotonic() - start
        except TimeoutError:
            if trickle:
                try:
                    s.sendall(b"X")
                except OSError:
                    return time.monotonic() - start
        except OSError:
            return time.monotonic() - start
    return None


def test_idle_connections_holding_headers_never_keep_a_token_holder_out(faults: Faults) -> None:
    port = free_port()
    env = {"POIMEN_HTTP_HEADER_TIMEOUT": "3", "POIMEN_HTTP_MAX_CONNECTIONS": "1000"}
    with running(faults, ["http", "--host", "127.0.0.1"], env, port) as server:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base, server, server.log)  # type: ignore[attr-defined]
        held = hold(port, 2 * OPEN_FILES)  # more than the server can hold open
        try:
            started = time.monotonic()
            answer = httpx.post(f"{base}/memory/nodes/by-git", json=BY_GIT, headers=AUTH,
                                timeout=15)  # fmt: skip
            took = time.monotonic() - started
            assert answer.status_code == 200, answer.text
            assert "16MB" in answer.text
            assert took < 5, took
            # a connection that sends its headers a byte at a time is closed all the same
            slow = hold(port, 1)
            assert slow, "no connection could be opened"
            closed = closed_within(slow[0], 10, trickle=True)
            assert closed is not None, "a connection trickling its headers was kept open"
            assert closed < 6, closed
            held += slow
        finally:
            for s in held:
                s.close()
        assert server.poll() is None  # still serving
        assert httpx.get(f"{base}/health", timeout=5).status_code == 200


def test_a_connection_that_never_sends_is_closed(faults: Faults) -> None:
    port = free_port()
    env = {"POIMEN_HTTP_HEADER_TIMEOUT": "2"}
    with running(faults, ["http", "--host", "127.0.0.1"], env, port) as server:
        wait_until_healthy(f"http://127.0.0.1:{port}", server, server.log)  # type: ignore[attr-defined]
        with socket.create_connection(("127.0.0.1", port), timeout=2) as silent:
            closed = closed_within(silent, 8)
        assert closed is not None, "a connection that sent nothing was kept open"
        assert closed < 5, closed


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "slow-clients", "version": "1"},
    },
}
MCP_HEADERS = {**AUTH, "Accept": "application/json, text/event-stream"}


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_mcp_sessions_are_capped_bounded_and_closed_when_idle(faults: Faults) -> None:
    port = free_port()
    cap = 20
    env = {"POIMEN_MCP_MAX_SESSIONS": str(cap), "POIMEN_MCP_SESSION_IDLE_TIMEOUT": "4"}
    with running(faults, ["mcp", "--http"], env, port) as server:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 30
        while True:
            with suppress(httpx.TransportError):
                httpx.get(url, timeout=1)
                break
            assert server.poll() is None, server.log.read_text()  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "mem mcp --http did not start"
            time.sleep(0.1)
        with httpx.Client(timeout=10) as client:
            before = rss_kb(server.pid)
            opened, refused = [], []
            for _ in range(300):
                r = client.post(url, json=INITIALIZE, headers=MCP_HEADERS)
                if r.status_code == 200:
                    opened.append(r.headers["mcp-session-id"])
                else:
                    refused.append(r)
            assert len(opened) == cap, len(opened)
            assert all(r.status_code == 503 for r in refused), refused[0].text
            assert "Too many open sessions" in refused[0].text, refused[0].text
            assert rss_kb(server.pid) - before < 40_000  # KiB
            # a session already open is still served while the table is full
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            first = {**MCP_HEADERS, "mcp-session-id": opened[0], "mcp-protocol-version": "2025-06-18"}  # fmt: skip
            assert client.post(url, json=listing, headers=first).status_code == 200
            # left alone, they are closed, and new clients get in again
            time.sleep(7)
            gone = client.post(url, json=listing, headers=first)
            assert gone.status_code == 404, gone.text
            again = client.post(url, json=INITIALIZE, headers=MCP_HEADERS)
            assert again.status_code == 200, again.text
