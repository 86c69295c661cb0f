"""The hook's state under the user's cache directory (``hooks/``, beside the blame cache): the
log, one JSON line per run, bounded in size and read back by ``mem hooks status``; and the
lock files that keep runs of one transcript one at a time."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs

from poimen_memory.errors import ConfigError
from poimen_memory.hooks.claude import AGENT
from poimen_memory.settings import APP, Settings, load_settings

__all__ = [
    "LOCKS_KEPT_S",
    "LOG_MAX_BYTES",
    "locked",
    "log_path",
    "prune_locks",
    "read_log",
    "transcript_locks",
    "write_log",
]

LOG_MAX_BYTES = 1_000_000
# Lock files of transcripts no run has touched for this long are deleted.
LOCKS_KEPT_S = 7 * 24 * 3600.0
# ... looked for at most this often (a glob of every lock file, on each run, adds up).
PRUNE_EVERY_S = 24 * 3600.0


def _state_dir(settings: Settings | None = None) -> Path:
    """``hooks`` under the user cache directory (``$POIMEN_CACHE_DIR``), beside the blame
    cache: that of ``settings`` when given (a run loads them once), else of the settings
    loaded now; the platform's default when they cannot be read."""
    try:
        base = (settings or load_settings()).cache_dir
    except ConfigError:
        base = platformdirs.user_cache_path(APP)
    return base / "hooks"


def log_path(settings: Settings | None = None) -> Path:
    """The hook's log: one JSON object per line (under ``settings``' cache directory when
    given)."""
    return _state_dir(settings) / f"{AGENT}.log"


@contextlib.contextmanager
def locked(path: Path, *, wait: float | None) -> Iterator[bool]:
    """An exclusive flock on ``path``: yields whether it was taken (within ``wait`` seconds;
    None: do not wait)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        with contextlib.suppress(OSError):
            os.utime(handle.fileno())  # in use: not pruned
        deadline = time.monotonic() + (wait or 0.0)
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if wait is None or time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.1)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_log(entry: Mapping[str, Any], path: Path | None = None) -> None:
    """Append one entry (with the time) to the log, moving a log over LOG_MAX_BYTES to
    ``.1`` first. Never raises: the log is the last resort."""
    path = path or log_path()
    line = json.dumps(
        {"time": datetime.now(UTC).isoformat(timespec="seconds"), **entry}, ensure_ascii=False
    )
    with contextlib.suppress(OSError), locked(path.with_suffix(".lock"), wait=5.0):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_name(path.name + ".1"))
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def read_log(limit: int = 10, path: Path | None = None) -> list[dict[str, Any]]:
    """The last ``limit`` entries, oldest first; a line that is not one of ours (a worker's
    stray output) is an entry with outcome ``output``."""
    path = path or log_path()
    lines: list[str] = []
    for candidate in (path, path.with_name(path.name + ".1")):
        try:
            with candidate.open("rb") as handle:
                start = max(0, handle.seek(0, os.SEEK_END) - 256_000)
                handle.seek(start)
                tail = handle.read().decode("utf-8", errors="replace").splitlines()
        except OSError:
            continue
        lines = [*(tail[1:] if start else tail), *lines]  # from the first whole line
        if len(lines) >= limit:
            break
    entries = []
    for line in lines[-limit:] if limit > 0 else []:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if not isinstance(entry, dict):
            entry = {"outcome": "output", "message": line.strip()}
        entries.append(entry)
    return entries


def transcript_locks(transcript: Path, settings: Settings | None = None) -> tuple[Path, Path]:
    """The lock files of a transcript's runs: (held by the one run waiting for its turn, held
    by the one run ingesting), under ``settings``' cache directory when given."""
    key = hashlib.sha256(str(transcript).encode()).hexdigest()[:24]
    locks = _state_dir(settings) / "locks"
    return locks / f"{key}.waiting", locks / f"{key}.running"


def prune_locks(locks: Path, older_than_s: float = LOCKS_KEPT_S) -> None:
    """Delete the lock files of transcripts no run has touched for a while (a free one only):
    at most once every PRUNE_EVERY_S (a marker file's time says when), not on every run."""
    marker = locks / "pruned"  # no dot: never taken for a lock file
    with contextlib.suppress(OSError):
        if time.time() - marker.stat().st_mtime < PRUNE_EVERY_S:
            return
    with contextlib.suppress(OSError):
        marker.touch()
    cutoff = time.time() - older_than_s
    for path in locks.glob("*.*"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < cutoff:
                with locked(path, wait=None) as free:
                    if free:
                        path.unlink()
