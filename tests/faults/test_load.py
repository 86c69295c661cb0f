"""200 concurrent hovers and 50 code-lens requests, half of them cancelled."""

from __future__ import annotations

import random
import subprocess
import time

import pytest

from .conftest import Faults

pytestmark = pytest.mark.slow
CANCELLED = -32800


def _children(pid: int) -> list[str]:
    done = subprocess.run(
        ["ps", "-o", "pid=,comm=", "--ppid", str(pid)], capture_output=True, text=True, check=False
    )
    return [line.split(None, 1)[1] for line in done.stdout.splitlines() if line.strip()]


def test_concurrent_requests_half_cancelled(faults: Faults) -> None:
    client = faults.server()
    try:
        files = [faults.kong.root / "src/kong/buffer.rs", faults.kong.root / "src/kong/handler.rs"]
        uris = [client.open(f, f.read_text()) for f in files]
        rss_before = client.rss_bytes()
        rng = random.Random(4)
        sent = []
        for i in range(250):
            uri = uris[i % 2]
            if i < 200:
                ident = client.send(
                    "textDocument/hover",
                    {
                        "textDocument": {"uri": uri},
                        "position": {
                            "line": rng.randrange(0, 60 if i % 2 == 0 else 20),
                            "character": 0,
                        },
                    },
                )
            else:
                ident = client.send("textDocument/codeLens", {"textDocument": {"uri": uri}})
            sent.append(ident)
            if i % 2 == 1:
                client.cancel(ident)
        answered = cancelled = 0
        for ident in sent:
            reply = client.wait(ident, timeout=60)
            if "error" in reply:
                assert reply["error"]["code"] == CANCELLED, reply
                cancelled += 1
            else:
                answered += 1
        assert answered + cancelled == 250
        assert answered >= 125
        # Still serving, no git left running, memory bounded.
        assert client.request(
            "workspace/executeCommand", {"command": "mem.ping", "arguments": [{}]}
        )["version"]
        deadline = time.monotonic() + 10
        while "git" in _children(client.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "git" not in _children(client.proc.pid)
        assert client.rss_bytes() - rss_before < 100 * 1024 * 1024
    finally:
        client.close()
