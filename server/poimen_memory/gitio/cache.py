"""A bounded, persistent blame cache keyed by (file, last commit that touched it).

Blame of a file depends only on the history up to the last commit that touched it (plus the
.mailmap and ignore-revs settings, folded into a fingerprint), so that key survives commits
to other files and process restarts, and a commit touching the file changes the key: an
entry is never stale. Entries live in a small SQLite file under the user cache directory
(per machine: blame reflects the local clone and its settings, and must work while the
memory store is down), with an in-memory LRU in front. Both are bounded; the least recently
used entries go first.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs

from poimen_memory.domain import CommitSha
from poimen_memory.gitio.blame import Blame, BlameCommit, BlameLine

__all__ = ["BlameCache", "CacheKey", "default_cache_path"]

_FORMAT = 1


def default_cache_path() -> Path:
    """``$POIMEN_CACHE_DIR/blame.sqlite3``, else under the user cache directory."""
    override = os.environ.get("POIMEN_CACHE_DIR")
    base = Path(override) if override else platformdirs.user_cache_path("poimen-memory")
    return base / "blame.sqlite3"


@dataclass(frozen=True, slots=True)
class CacheKey:
    """What a cached blame depends on."""

    path: str
    commit: CommitSha
    fingerprint: str


def encode_blame(blame: Blame) -> bytes:
    """A compact, compressed form of a complete blame."""
    shas = list(blame.commits)
    index = {sha: i for i, sha in enumerate(shas)}
    paths = sorted({line.orig_path for line in blame.lines})
    path_index = {p: i for i, p in enumerate(paths)}
    body = {
        "v": _FORMAT,
        "commits": [
            [
                c.sha.value,
                c.author_name,
                c.author_email,
                int(c.author_time.timestamp()),
                c.summary,
                c.boundary,
            ]
            for c in (blame.commits[s] for s in shas)
        ],
        "paths": paths,
        "lines": [[index[ln.commit], path_index[ln.orig_path], ln.orig_line] for ln in blame.lines],
    }
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return zlib.compress(raw.encode("utf-8", "surrogateescape"), 6)


def decode_blame(data: bytes, path: str, rev: CommitSha) -> Blame:
    """The blame stored by encode_blame, for ``path`` as blamed at ``rev``."""
    body: dict[str, Any] = json.loads(zlib.decompress(data).decode("utf-8", "surrogateescape"))
    if body.get("v") != _FORMAT:
        raise ValueError("blame cache entry of another format")
    commits = [
        BlameCommit(CommitSha(c[0]), c[1], c[2], datetime.fromtimestamp(c[3], UTC), c[4], c[5])
        for c in body["commits"]
    ]
    paths: list[str] = body["paths"]
    lines = tuple(
        BlameLine(i + 1, commits[c].sha, paths[p], orig)
        for i, (c, p, orig) in enumerate(body["lines"])
    )
    return Blame(path=path, rev=rev, lines=lines, commits={c.sha: c for c in commits})


class BlameCache:
    """Blame entries on disk (SQLite) with an in-memory LRU in front; both bounded."""

    def __init__(
        self,
        path: Path | None,
        *,
        max_entries: int = 5000,
        max_bytes: int = 256 * 1024 * 1024,
        memory_entries: int = 16,
    ) -> None:
        self.path = path
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.memory_entries = memory_entries
        self._memory: OrderedDict[CacheKey, Blame] = OrderedDict()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = self._open(path)

    def _open(self, path: Path) -> sqlite3.Connection | None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, check_same_thread=False, timeout=5, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS blame (path TEXT NOT NULL, commit_sha TEXT NOT NULL,"
                " fingerprint TEXT NOT NULL, used REAL NOT NULL, size INTEGER NOT NULL,"
                " data BLOB NOT NULL, PRIMARY KEY (path, commit_sha, fingerprint))"
            )
            db.execute("CREATE INDEX IF NOT EXISTS blame_used ON blame (used)")
            # One row a line, so a hover after a restart reads one line, not a whole blame.
            db.execute(
                "CREATE TABLE IF NOT EXISTS blame_line (path TEXT NOT NULL, commit_sha TEXT NOT"
                " NULL, fingerprint TEXT NOT NULL, line INTEGER NOT NULL, origin TEXT NOT NULL,"
                " orig_path TEXT NOT NULL, orig_line INTEGER NOT NULL,"
                " PRIMARY KEY (path, commit_sha, fingerprint, line)) WITHOUT ROWID"
            )
            # (file, HEAD) -> the last commit that touched it and the hash of its text there.
            db.execute(
                "CREATE TABLE IF NOT EXISTS head_file (path TEXT NOT NULL, head TEXT NOT NULL,"
                " last_commit TEXT NOT NULL, text_sha TEXT NOT NULL, used REAL NOT NULL,"
                " PRIMARY KEY (path, head)) WITHOUT ROWID"
            )
            return db
        except (sqlite3.Error, OSError):
            return None  # an unusable cache directory: run with the in-memory layer only

    def close(self) -> None:
        """Close the database file."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def get(self, key: CacheKey, rev: CommitSha) -> Blame | None:
        """The cached blame for ``key``, re-labelled as blamed at ``rev``; None on a miss."""
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None:
                self._memory.move_to_end(key)
                return hit if hit.rev == rev else _relabel(hit, rev)
            if self._db is None:
                return None
            try:
                row = self._db.execute(
                    "SELECT data FROM blame WHERE path = ? AND commit_sha = ? AND fingerprint = ?",
                    (key.path, key.commit.value, key.fingerprint),
                ).fetchone()
                if row is None:
                    return None
                self._db.execute(
                    "UPDATE blame SET used = ?"
                    " WHERE path = ? AND commit_sha = ? AND fingerprint = ?",
                    (time.time(), key.path, key.commit.value, key.fingerprint),
                )
                blame = decode_blame(row[0], key.path, rev)
            except (sqlite3.Error, ValueError, zlib.error, KeyError, IndexError, TypeError):
                return None
            self._remember(key, blame)
            return blame

    def line(self, key: CacheKey, line: int) -> BlameLine | bool | None:
        """One line of a cached blame: the BlameLine, None past the end, False on a miss."""
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None:
                return hit.origin(line)
            if self._db is None:
                return False
            try:
                row = self._db.execute(
                    "SELECT origin, orig_path, orig_line FROM blame_line WHERE path = ? AND"
                    " commit_sha = ? AND fingerprint = ? AND line = ?",
                    (key.path, key.commit.value, key.fingerprint, line),
                ).fetchone()
                if row is not None:
                    return BlameLine(line, CommitSha(row[0]), row[1], row[2])
                present = self._db.execute(
                    "SELECT 1 FROM blame WHERE path = ? AND commit_sha = ? AND fingerprint = ?",
                    (key.path, key.commit.value, key.fingerprint),
                ).fetchone()
            except (sqlite3.Error, ValueError):
                return False
            return None if present else False

    def head_file(self, path: str, head: CommitSha) -> tuple[CommitSha, str] | None:
        """(last commit touching ``path``, sha256 of its text) at ``head``, if remembered."""
        with self._lock:
            if self._db is None:
                return None
            try:
                row = self._db.execute(
                    "SELECT last_commit, text_sha FROM head_file WHERE path = ? AND head = ?",
                    (path, head.value),
                ).fetchone()
                return None if row is None else (CommitSha(row[0]), str(row[1]))
            except (sqlite3.Error, ValueError):
                return None

    def put_head_file(self, path: str, head: CommitSha, last: CommitSha, text_sha: str) -> None:
        """Remember what head_file answers (bounded like the blames)."""
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO head_file VALUES (?, ?, ?, ?, ?)",
                    (path, head.value, last.value, text_sha, time.time()),
                )
                self._db.execute(
                    "DELETE FROM head_file WHERE (path, head) IN (SELECT path, head FROM head_file"
                    " ORDER BY used DESC LIMIT -1 OFFSET ?)",
                    (self.max_entries * 4,),
                )
            except sqlite3.Error:
                pass

    def put(self, key: CacheKey, blame: Blame) -> None:
        """Store a complete blame under ``key`` (partial blames are never stored)."""
        if not blame.complete:
            return
        with self._lock:
            self._remember(key, blame)
            if self._db is None:
                return
            data = encode_blame(blame)
            try:
                self._db.execute("BEGIN")
                self._db.execute(
                    "INSERT OR REPLACE INTO blame VALUES (?, ?, ?, ?, ?, ?)",
                    (key.path, key.commit.value, key.fingerprint, time.time(), len(data), data),
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO blame_line VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (key.path, key.commit.value, key.fingerprint, ln.line, ln.commit.value,
                         ln.orig_path, ln.orig_line)
                        for ln in blame.lines
                    ],
                )  # fmt: skip
                self._evict()
                self._db.execute("COMMIT")
            except sqlite3.Error:
                # A full disk or a locked file costs a re-blame later, nothing more.
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")

    def _remember(self, key: CacheKey, blame: Blame) -> None:
        self._memory[key] = blame
        self._memory.move_to_end(key)
        while len(self._memory) > self.memory_entries:
            self._memory.popitem(last=False)

    def _evict(self) -> None:
        assert self._db is not None
        count, total = self._db.execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM blame"
        ).fetchone()
        while count > self.max_entries or total > self.max_bytes:
            row = self._db.execute(
                "SELECT path, commit_sha, fingerprint, size FROM blame ORDER BY used LIMIT 1"
            ).fetchone()
            if row is None:
                break
            self._db.execute(
                "DELETE FROM blame WHERE path = ? AND commit_sha = ? AND fingerprint = ?", row[:3]
            )
            self._db.execute(
                "DELETE FROM blame_line WHERE path = ? AND commit_sha = ? AND fingerprint = ?",
                row[:3],
            )
            count, total = count - 1, total - row[3]

    def stats(self) -> tuple[int, int]:
        """(entries on disk, bytes on disk)."""
        with self._lock:
            if self._db is None:
                return (0, 0)
            count, total = self._db.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM blame"
            ).fetchone()
            return int(count), int(total)


def _relabel(blame: Blame, rev: CommitSha) -> Blame:
    return Blame(
        path=blame.path, rev=rev, lines=blame.lines, commits=blame.commits, complete=blame.complete
    )
