"""A fixture repository with memories, and language-server clients speaking as real editors."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from ..gitrepo import FixtureRepo, kong_repo

PROJECT = "poimen"
REPO = "github.com/org/poimen"

MEMORIES = [
    {"type": "node", "id": "s1", "level": "L2", "text": "Kong platform: bodies are buffered up to 16MB and streamed beyond.", "created_at": "2026-08-20T09:00:00Z"},
    {"type": "node", "id": "m1", "level": "L1", "query_id": "q-buffer", "text": "Kong body buffer raised to 16MB so 16MB uploads pass.", "parents": ["s1"], "created_at": "2026-08-20T08:00:00Z"},
    {"type": "node", "id": "e1", "level": "L0", "query_id": "q-buffer", "text": "Raised BODY_BUFFER from 8MB to 16MB in the Kong buffer module.\nUploads of 16MB now pass; larger ones get a 413.", "parents": ["m1"], "anchors": [{"file": "src/kong/buffer.rs", "line": 42}], "created_at": "2026-08-20T07:00:00Z"},
    {"type": "node", "id": "e2", "level": "L0", "query_id": "q-large", "text": "Handler streams bodies larger than BODY_BUFFER.", "anchors": [{"file": "src/kong/handler.rs", "line": 10}], "created_at": "2026-08-20T07:10:00Z"},
]  # fmt: skip


@dataclass
class World:
    root: Path
    kong: FixtureRepo
    dsn: str
    shim_log: Path
    shim_dir: Path
    env: dict[str, str] = field(default_factory=dict)

    def uri(self, rel: str) -> str:
        return (self.kong.root / rel).as_uri()

    def git_calls(self) -> list[str]:
        return self.shim_log.read_text().splitlines() if self.shim_log.exists() else []

    def ingest(self, rows: list[dict[str, Any]], name: str = "m.jsonl") -> None:
        src = self.root / name
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        done = subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", "ingest", str(src), "--repo", str(self.kong.root), "--project", PROJECT],
            env={**self.env, "POIMEN_DSN": self.dsn}, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, store_dsn: str) -> World:
    root = tmp_path_factory.mktemp("lsp")
    kong = kong_repo(root / "kong")
    shim_dir = root / "bin"
    shim_dir.mkdir()
    shim_log = root / "git-calls.log"
    real_git = shutil.which("git")
    assert real_git is not None, "git is not on PATH"
    shim = shim_dir / "git"
    shim.write_text(f'#!/bin/sh\necho "$*" >> "{shim_log}"\nexec "{real_git}" "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {
        **os.environ,
        "PATH": f"{shim_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "POIMEN_CONFIG": str(root / "no-config.toml"),
    }
    env.pop("POIMEN_DSN", None)
    w = World(root, kong, store_dsn, shim_log, shim_dir, env)
    w.ingest(MEMORIES)
    return w


CLIENTS = ["visual-studio-code", "neovim"]


def server_env(world: World) -> dict[str, str]:
    return {**world.env, "POIMEN_CACHE_DIR": str(world.root / f"cache-{uuid.uuid4().hex[:8]}")}


async def start_client(
    world: World,
    spec: str,
    options: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> LanguageClient:
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "poimen_memory.cli", "lsp"],
        server_env=env or server_env(world),
    )
    client = await config.start()
    assert isinstance(client, LanguageClient)
    client.lens_refreshes = 0  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(params: None) -> None:
        client.lens_refreshes += 1  # type: ignore[attr-defined]

    client.init_result = await client.initialize_session(  # type: ignore[attr-defined]
        types.InitializeParams(
            capabilities=client_capabilities(spec),
            root_uri=world.kong.root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=world.kong.root.as_uri(), name="kong")],
            initialization_options=options
            if options is not None
            else {"poimenMemory": {"dsn": world.dsn, "project": PROJECT}},
        )
    )
    return client


@pytest_asyncio.fixture(params=CLIENTS)
async def client(request: pytest.FixtureRequest, world: World) -> AsyncIterator[LanguageClient]:
    lsp = await start_client(world, request.param)
    lsp.spec = request.param  # type: ignore[attr-defined]
    yield lsp
    await lsp.shutdown_session()
    await lsp.stop()
