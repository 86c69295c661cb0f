"""Shared pieces for the fault, abuse and access tests: a repository with memories and a
synchronous stdio client for the real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bench.lspclient import LspClient

from ..gitrepo import FixtureRepo, kong_repo

PROJECT = "poimen"

MEMORIES = [
    {"type": "node", "id": "m1", "level": "L1", "query_id": "q-buffer", "text": "Kong body buffer raised to 16MB.", "created_at": "2026-08-20T08:00:00Z"},
    {"type": "node", "id": "e1", "level": "L0", "query_id": "q-buffer", "text": "Raised BODY_BUFFER from 8MB to 16MB.", "parents": ["m1"], "anchors": [{"file": "src/kong/buffer.rs", "line": 42}], "created_at": "2026-08-20T07:00:00Z"},
    {"type": "node", "id": "e2", "level": "L0", "query_id": "q-large", "text": "Handler streams bodies larger than BODY_BUFFER.", "anchors": [{"file": "src/kong/handler.rs", "line": 10}], "created_at": "2026-08-20T07:10:00Z"},
]  # fmt: skip


@dataclass
class Faults:
    root: Path
    kong: FixtureRepo
    dsn: str
    env: dict[str, str]

    def mem(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ingest(
        self, rows: list[dict[str, Any]], project: str = PROJECT, *extra: str
    ) -> subprocess.CompletedProcess[str]:
        src = self.root / f"in-{uuid.uuid4().hex[:6]}.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return self.mem(
            "ingest", str(src), "--repo", str(self.kong.root), "--project", project, *extra
        )

    def server(
        self,
        options: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        root: Path | None = None,
    ) -> LspClient:
        client = LspClient(
            [sys.executable, "-m", "poimen_memory.cli", "lsp"],
            {
                **self.env,
                "POIMEN_CACHE_DIR": str(self.root / f"cache-{uuid.uuid4().hex[:8]}"),
                **(env or {}),
            },
            root or self.kong.root,
            self.root / "server.log",
        )
        client.initialize(
            root or self.kong.root,
            options
            if options is not None
            else {"poimenMemory": {"dsn": self.dsn, "project": PROJECT}},
        )
        return client


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> Faults:
    root = tmp_path_factory.mktemp("faults")
    kong = kong_repo(root / "kong")
    env = {k: v for k, v in os.environ.items() if k != "POIMEN_DSN"}
    env.update(
        POIMEN_DSN=store_dsn,
        POIMEN_CONFIG=str(root / "none.toml"),
        POIMEN_CACHE_DIR=str(root / "cache"),
    )
    f = Faults(root, kong, store_dsn, env)
    done = f.ingest(MEMORIES)
    assert done.returncode == 0, done.stderr
    return f


@pytest.fixture
def server(faults: Faults) -> Iterator[LspClient]:
    client = faults.server()
    yield client
    client.close()


def hover_text(result: Any) -> str:
    assert result is not None
    return str(result["contents"]["value"])
