"""Smaller hostile-input items: a file whose history has a name that is not UTF-8 gets a blame
(or one clear line), never a traceback; the local blame cache (paths, commits, authors) is
private: 0600 in a 0700 directory, an existing looser one tightened; PyPI, Docker Hub and
SendGrid tokens are redacted."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from poimen_memory.ingest.redact import redact

from ..gitrepo import ALICE, BOB, FixtureRepo
from ..test_redaction_patterns import SAMPLES

ODD = os.fsdecode(b"caf\xe9.txt")  # Latin-1, not UTF-8


def _mem(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "POIMEN_DSN"}
    env["POIMEN_CONFIG"] = str(tmp_path / "no-config.toml")
    env["POIMEN_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        check=False,
    )


def _odd_repo(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "repo")
    repo.write(ODD, "one\ntwo\n")
    repo.commit("odd", "add", ALICE)
    repo.git("mv", "--", ODD, "cafe.txt")
    repo.commit("renamed", "rename", BOB)
    return repo


def test_a_history_with_a_name_that_is_not_utf8_is_blamed(tmp_path: Path) -> None:
    repo = _odd_repo(tmp_path)
    for source in ("git blame", "the local cache"):  # computed, then read back from SQLite
        done = _mem(tmp_path, "blame", "cafe.txt", "--repo", str(repo.root))
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert "internal error" not in done.stderr
        assert f"2 lines from {source}" in done.stdout + done.stderr
        assert "caf" in done.stdout
        assert ") one" in done.stdout


def test_a_name_that_is_not_utf8_given_to_mem_blame_gets_one_clear_line(tmp_path: Path) -> None:
    repo = FixtureRepo.create(tmp_path / "repo")
    repo.write(ODD, "one\n")
    repo.commit("odd", "add", ALICE)
    done = _mem(tmp_path, "blame", str(repo.root / ODD), "--repo", str(repo.root))
    assert "Traceback" not in done.stderr
    assert "internal error" not in done.stderr
    if done.returncode != 0:
        assert len(done.stderr.strip().splitlines()) == 1
        assert "file" in done.stderr


def _plain_repo(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "repo")
    repo.write("cafe.txt", "one\ntwo\n")
    repo.commit("plain", "add", ALICE)
    return repo


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_blame_cache_is_created_private(tmp_path: Path) -> None:
    repo = _plain_repo(tmp_path)
    done = _mem(tmp_path, "blame", "cafe.txt", "--repo", str(repo.root))
    assert done.returncode == 0, done.stderr
    cache = tmp_path / "cache"
    assert _mode(cache) == 0o700
    files = [p for p in cache.iterdir() if p.name.startswith("blame.sqlite3")]
    assert files
    for path in files:
        assert _mode(path) == 0o600, path


def test_an_existing_world_readable_blame_cache_is_tightened(tmp_path: Path) -> None:
    repo = _plain_repo(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    os.chmod(cache, 0o755)
    done = _mem(tmp_path, "blame", "cafe.txt", "--repo", str(repo.root))
    assert done.returncode == 0, done.stderr
    for path in cache.iterdir():
        if path.name.startswith("blame.sqlite3"):
            os.chmod(path, 0o644)
    os.chmod(cache, 0o755)
    done = _mem(tmp_path, "blame", "cafe.txt", "--repo", str(repo.root))
    assert done.returncode == 0, done.stderr
    assert _mode(cache) == 0o700
    for path in cache.iterdir():
        if path.name.startswith("blame.sqlite3"):
            assert _mode(path) == 0o600, path


def test_pypi_and_other_registry_tokens_are_redacted() -> None:
    for kind in ("pypi-token", "dockerhub-token", "sendgrid-key"):
        around, secret = SAMPLES[kind]
        text = around.format(secret)
        assert secret not in redact(text), kind
        assert f"[REDACTED:{kind}]" in redact(text), kind
