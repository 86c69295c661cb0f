"""Waiting for a `mem http` subprocess to answer (shared by the HTTP fault tests)."""

from __future__ import annotations

import subprocess
import time
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
