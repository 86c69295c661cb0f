"""The embedded default: no DSN configured -> a Postgres from the wheel, started and stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .embedded import pgdata_of, root_dir

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime, timezone
    from pathlib import Path
    from poimen_memory.domain import Level, MemoryNode, ProjectId, QueryId, RunId
    from poimen_memory.store import Store, connect, embedded_dsn, migrate

    dsn = embedded_dsn(Path(sys.argv[1]), root_dir=Path(sys.argv[2]))
    with connect(dsn) as conn:
        migrate(conn)
    node = MemoryNode(Level.L1, ProjectId("embedded"), QueryId("q"), RunId("r"), 1,
                      "kept in the embedded store", datetime(2026, 8, 15, tzinfo=timezone.utc))
    with Store(dsn) as store:
        from poimen_memory.store import Batch
        counts = store.insert_batch(Batch(nodes=[node]))
        back = store.get_nodes(node.project, [node.sha256])
    print(json.dumps({"inserted": counts.nodes, "back": [n.to_json() for n in back],
                      "sha": node.sha256.value}))
    """
)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "POIMEN_DSN"}
    env["POIMEN_CONFIG"] = str(tmp_path / "no-config.toml")
    env["POIMEN_DATA_DIR"] = str(tmp_path / "data")
    return env


def _postmaster_running(pgdata: Path) -> bool:
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_embedded_store_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(data), str(root_dir())],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["inserted"] == 1
    assert [n["sha256"] for n in out["back"]] == [out["sha"]]
    assert out["back"][0]["text"] == "kept in the embedded store"
    # Stopped when the process ended.
    assert not _postmaster_running(pgdata_of(data))


def test_mem_cli_uses_embedded_default(tmp_path: Path) -> None:
    env = _env(tmp_path)
    migrate = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stderr
    assert "applied 0001_initial" in migrate.stdout
    status = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", "db", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["schema_version"] == body["latest_version"] >= 1
    assert "pgdata" in body["store"] or "/" in body["store"]  # the embedded server's socket
    assert not _postmaster_running(pgdata_of(tmp_path / "data"))


def test_mem_demo_on_the_embedded_default(tmp_path: Path) -> None:
    # The README's first set-up command: the main job on the embedded store.
    done = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", "demo", "--dir", str(tmp_path / "demo")],
        env={**_env(tmp_path), "POIMEN_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Hovering src/kong/buffer.rs:42 in an editor shows:" in done.stdout
    assert "raised it to 16 * MB" in done.stdout
    assert "Increase buffer — Alice Smith, 2026-08-06 · src/kong/buffer.rs:42" in done.stdout
    assert "(from embedded)" in done.stdout
    assert not _postmaster_running(pgdata_of(tmp_path / "data"))
