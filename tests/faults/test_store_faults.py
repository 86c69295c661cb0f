"""The store down before the server starts, and `mem ingest` killed in the middle."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from ..tcpproxy import TcpProxy
from .conftest import PROJECT, Faults, hover_text

pytestmark = pytest.mark.slow


def test_store_down_before_the_server_starts(faults: Faults) -> None:
    params = conninfo.conninfo_to_dict(faults.dsn)
    proxy = TcpProxy(str(params.get("host", "127.0.0.1")), int(params.get("port", 5432)))
    params.update(host="127.0.0.1", port=str(proxy.port))
    client = faults.server(
        {"poimenMemory": {"dsn": conninfo.make_conninfo(**params), "project": PROJECT}}
    )
    try:
        buffer = faults.kong.root / "src/kong/buffer.rs"
        uri = client.open(buffer, buffer.read_text())
        for line in (42, 41, 10):
            started = time.monotonic()
            result = client.hover(uri, line)[1]
            assert time.monotonic() - started < 2.0
            assert "memory store unreachable" in hover_text(result)
        lenses = client.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
        assert lenses is None
        assert client.proc.poll() is None  # never exits
        proxy.start()
        deadline = time.monotonic() + 5
        while True:
            result = client.hover(uri, 42)[1]
            if result is not None and "Raised BODY\\_BUFFER" in hover_text(result):
                break
            assert time.monotonic() < deadline, "no recovery within 5 s"
            time.sleep(0.2)
    finally:
        proxy.stop()
        client.close()


def counts(dsn: str, project: str) -> tuple[int, int, int]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM memory_node WHERE project = %s),"
            " (SELECT count(*) FROM memory_edge WHERE project = %s),"
            " (SELECT count(*) FROM git_anchor WHERE project = %s)",
            (project, project, project),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_ingest_killed_mid_run_leaves_no_partial_batch(faults: Faults) -> None:
    batch = 400
    rows: list[dict[str, Any]] = [
        {
            "type": "node",
            "id": "m",
            "level": "L1",
            "query_id": "q",
            "text": "summary",
            "created_at": "2026-08-01T00:00:00Z",
        }
    ]
    rows += [
        {"type": "node", "level": "L0", "query_id": "q", "text": f"evidence number {k}", "parents": ["m"],
         "anchors": [{"file": "src/kong/buffer.rs", "line": 1 + k % 60}], "created_at": "2026-08-01T00:00:00Z"}
        for k in range(batch * 12)
    ]  # fmt: skip
    src = faults.root / "kill.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    project = f"kill-{uuid.uuid4().hex[:6]}"
    argv = [
        sys.executable,
        "-m",
        "poimen_memory.cli",
        "ingest",
        str(src),
        "--repo",
        str(faults.kong.root),
        "--project",
        project,
        "--batch-nodes",
        str(batch),
    ]
    with psycopg.connect(faults.dsn, autocommit=True) as listener:
        listener.execute("LISTEN poimen_memory_ingest")
        proc = subprocess.Popen(
            argv, env=faults.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 2 and time.monotonic() < deadline:  # two batches committed, then kill
            seen += len(list(listener.notifies(timeout=0.5, stop_after=2 - seen)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert seen >= 2
    nodes, edges, anchors = counts(faults.dsn, project)
    # Batches are whole: the first holds the L1 and 399 L0 (parents go first), later ones 400.
    assert nodes % batch == 1 or nodes % batch == 0
    assert anchors == nodes - 1
    assert edges == nodes - 1
    assert nodes < len(rows)
    done = subprocess.run(
        argv, env=faults.env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    clean = f"clean-{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        [*argv[:-3], clean, "--batch-nodes", str(batch)],
        env=faults.env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (
        counts(faults.dsn, project)
        == counts(faults.dsn, clean)
        == (len(rows), len(rows) - 1, len(rows) - 1)
    )
