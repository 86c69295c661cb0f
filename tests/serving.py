"""`mem http` and `mem mcp --http` subprocesses for tests: started on a free port, waited for
until they answer, stopped afterwards; and a port that never answers."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx


def wait_until_healthy(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    """Return once ``base``/health answers 200; AssertionError with the server's log if it
    exits or does not answer within 30 s."""
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"mem http did not start: {log.read_text()}")
        time.sleep(0.1)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at ``host`` now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def mem_http(
    args: Sequence[str], env: Mapping[str, str], log: Path, host: str = "127.0.0.1"
) -> Iterator[str]:
    """`mem http ARGS` on ``host`` and a free port, its stderr in ``log``: its base URL once
    it answers; stopped when the block ends."""
    port = free_port(host)
    with log.open("wb") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "poimen_memory.cli", "http", "--host", host,
             "--port", str(port), *args],
            env=dict(env), cwd=log.parent, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    name = f"[{host}]" if ":" in host else host
    base = f"http://{name}:{port}"
    try:
        wait_until_healthy(base, server, log)
        yield base
    finally:
        server.terminate()
        server.wait(10)


@contextmanager
def mem_mcp_http(args: Sequence[str], env: Mapping[str, str], log_dir: Path) -> Iterator[str]:
    """`mem mcp --http ARGS` on a free loopback port, its stderr in ``log_dir``: its MCP
    endpoint's URL once it answers; stopped when the block ends."""
    port = free_port()
    log = log_dir / f"mcp-http-{port}.log"
    with log.open("wb") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "poimen_memory.cli", "mcp", "--http", "--port", str(port),
             *args],
            env=dict(env), cwd=log_dir, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"mem mcp --http did not start: {log.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(10)


@contextmanager
def silent_port() -> Iterator[int]:
    """A TCP listener on loopback that accepts and never answers, like a hung Postgres: its
    port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()
