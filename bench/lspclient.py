"""A small synchronous LSP client over stdio, for timing: one reader thread, no framework."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO


class LspError(RuntimeError):
    pass


def read_message(stream: BinaryIO) -> Any:
    """The next JSON-RPC message framed with a Content-Length header; None at the end."""
    length = 0
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value.strip())
    return json.loads(stream.read(length))


class LspClient:
    """Starts a server process and speaks JSON-RPC to it."""

    def __init__(self, cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=cwd
        )
        self._next = 0
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[threading.Event, list[Any]]] = {}
        self.notifications: list[tuple[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _write(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            self.proc.stdin.flush()

    def _read(self) -> None:
        stream: BinaryIO | None = self.proc.stdout  # type: ignore[assignment]
        assert stream is not None
        while True:
            message = read_message(stream)
            if message is None:
                return
            if "id" in message and "method" in message:  # a request from the server
                self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "id" in message:
                waiter = self._pending.get(message["id"])
                if waiter is not None:
                    waiter[1].append(message)
                    waiter[0].set()
            else:
                self.notifications.append((message.get("method", ""), message.get("params")))

    def send(self, method: str, params: Any) -> int:
        """Send a request without waiting; returns its id (for wait() or cancel())."""
        with self._lock:
            self._next += 1
            ident = self._next
        self._pending[ident] = (threading.Event(), [])
        self._write({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return ident

    def wait(self, ident: int, timeout: float = 120.0) -> dict[str, Any]:
        """The raw reply to a sent request (``result`` or ``error``)."""
        event, box = self._pending[ident]
        if not event.wait(timeout):
            raise LspError(f"request {ident}: no answer in {timeout}s")
        reply: dict[str, Any] = box[0]
        return reply

    def cancel(self, ident: int) -> None:
        self.notify("$/cancelRequest", {"id": ident})

    def write_raw(self, data: bytes) -> None:
        """Bytes straight onto the server's stdin (malformed frames)."""
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def request(self, method: str, params: Any, timeout: float = 120.0) -> Any:
        reply = self.wait(self.send(method, params), timeout)
        if "error" in reply:
            raise LspError(f"{method}: {reply['error']}")
        return reply.get("result")

    def timed(self, method: str, params: Any) -> tuple[float, Any]:
        started = time.perf_counter()
        result = self.request(method, params)
        return time.perf_counter() - started, result

    def notify(self, method: str, params: Any) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def initialize(
        self, root: Path, options: dict[str, Any], folders: list[Path] | None = None
    ) -> None:
        capabilities = {
            "textDocument": {"hover": {"contentFormat": ["markdown", "plaintext"]}, "codeLens": {}},
            "workspace": {"codeLens": {"refreshSupport": True}},
            "window": {"workDoneProgress": False},
        }
        self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "workspaceFolders": [
                    {"uri": f.as_uri(), "name": f.name} for f in (folders or [root])
                ],
                "capabilities": capabilities,
                "initializationOptions": options,
            },
        )
        self.notify("initialized", {})

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": text}},
        )
        return uri

    def hover(self, uri: str, line: int) -> tuple[float, Any]:
        """Time a hover on 1-based ``line``."""
        return self.timed(
            "textDocument/hover",
            {"textDocument": {"uri": uri}, "position": {"line": line - 1, "character": 0}},
        )

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            self.proc.wait(10)
        except (LspError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._log.close()

    def rss_bytes(self) -> int:
        """The server's resident set size, from /proc."""
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0
