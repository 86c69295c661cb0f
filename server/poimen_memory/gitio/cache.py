"""A bounded, persistent blame cache keyed by (repository, file, last commit that touched it).

Blame of a file depends only on the history up to the last commit that touched it (plus the
.mailmap and ignore-revs settings, folded into a fingerprint), so that key survives commits
to other files and process restarts, and a commit touching the file changes the key: an
entry is never stale. The repository (identity and work tree) leads the key: two clones share
commits but not their settings, replace refs or grafts. Entries live in a small SQLite file
under the user cache directory (per machine: blame reflects the local clone and its settings,
and must work while the memory store is down), with an in-memory LRU in front. Both are
bounded; the least recently used entries go first. The file holds paths, commits and authors:
it is created 0600 in a directory of mode 0700 (an existing one of ours is tightened).

A path that is not UTF-8 (git gives its bytes, read with surrogate escapes) is stored as a BLOB
of those bytes: SQLite cannot bind it as text, and a BLOB never equals a TEXT, so no two paths
share a key.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sqlite3
import stat
import threading
import time
import weakref
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cachetools import LRUCache

from poimen_memory.domain import CommitSha
from poimen_memory.errors import may_wait
from poimen_memory.gitio.blame import Blame, BlameCommit, BlameLine

__all__ = ["BlameCache", "CacheKey", "note_activity"]

# The size of every cache in gitio, in one place; the least recently used entry goes first.
DISK_BLAMES = 5000  # whole-file blames on disk per cache file (and 4x as many head_file rows)
DISK_BYTES = 256 * 1024 * 1024  # ... and their size on disk (blob and one row a line)
MEMORY_BLAMES = 16  # decoded whole-file blames, shared by every repository of a BlameCache
LAST_COMMITS = 4096  # per Blamer: (file, HEAD) -> last commit touching the file
FILE_TEXTS = 16  # per Blamer: file bytes at HEAD, diffed against unsaved buffers
TEXT_DIGESTS = 4096  # per Blamer: (file, HEAD) -> sha256 of its text
LINE_ORIGINS = 4096  # per Blamer: single-line blames of cold hovers
WARMING = 1024  # per Blamer: (file, HEAD) whose whole-file blame was started in background
WRITE_DELAY_S = 0.2  # a new blame goes to disk once the server has been idle this long
WRITE_WAIT_MAX_S = 10.0  # ... or once it has waited this long, busy or not

# 2: the repository joined the key (entries of format 1 are dropped, never misread).
_FORMAT = 2
# The cache file's own version: 3, an entry's size counts its rows of blame_line (a file of
# an older version is emptied, so every size it holds is counted the same way).
_FILE_FORMAT = 3
# A blame_line row on disk against the bytes of its columns (cells, B-tree pages): 1.2 as
# measured on 5,000-line files, with a margin.
_LINE_ROW_SPACE = 1.5
_KEY = "repo = ? AND path = ? AND commit_sha = ? AND fingerprint = ?"
_SCHEMA = (
    "CREATE TABLE blame (repo TEXT NOT NULL, path TEXT NOT NULL, commit_sha TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL, used REAL NOT NULL, size INTEGER NOT NULL, data BLOB NOT NULL,"
    " PRIMARY KEY (repo, path, commit_sha, fingerprint))",
    "CREATE INDEX blame_used ON blame (used)",
    # One row a line, so a hover after a restart reads one line, not a whole blame.
    "CREATE TABLE blame_line (repo TEXT NOT NULL, path TEXT NOT NULL, commit_sha TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL, line INTEGER NOT NULL, origin TEXT NOT NULL,"
    " orig_path TEXT NOT NULL, orig_line INTEGER NOT NULL,"
    " PRIMARY KEY (repo, path, commit_sha, fingerprint, line)) WITHOUT ROWID",
    # (repository, file, HEAD) -> the last commit that touched it and the hash of its text.
    "CREATE TABLE head_file (repo TEXT NOT NULL, path TEXT NOT NULL, head TEXT NOT NULL,"
    " last_commit TEXT NOT NULL, text_sha TEXT NOT NULL, used REAL NOT NULL,"
    " PRIMARY KEY (repo, path, head)) WITHOUT ROWID",
)


def _sql_text(value: str) -> str | bytes:
    """A string as SQLite can bind it: itself, or its bytes when it is not UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape")
    return value


def _py_text(value: object) -> str:
    """What _sql_text stored, read back."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _private(path: Path) -> None:
    """Make ``path``'s directory 0700 and the file (and SQLite's companions) 0600: created so,
    or tightened when they are ours. A directory shared with others (sticky, like /tmp), not
    ours, or the home directory is left as it is; links are never followed."""
    directory = path.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.lstat()
    if (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & stat.S_ISVTX
        and stat.S_IMODE(info.st_mode) & 0o077
        and directory.resolve() not in (Path.home().resolve(), Path("/"))
    ):
        os.chmod(directory, stat.S_IMODE(info.st_mode) & 0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o600)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm", "-journal"):
        companion = path.with_name(path.name + suffix)
        with contextlib.suppress(OSError):
            info = companion.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                os.chmod(companion, stat.S_IMODE(info.st_mode) & 0o600)


@dataclass(frozen=True, slots=True)
class CacheKey:
    """What a cached blame depends on: the repository (a digest of its identity and work
    tree), the file, the last commit that touched it and the blame settings' fingerprint."""

    repo: str
    path: str
    commit: CommitSha
    fingerprint: str

    def row(self) -> tuple[str, str | bytes, str, str]:
        """The key as SQL parameters, in the column order of the tables."""
        return (self.repo, _sql_text(self.path), self.commit.value, self.fingerprint)


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
        max_entries: int = DISK_BLAMES,
        max_bytes: int = DISK_BYTES,
        memory_entries: int = MEMORY_BLAMES,
        write_later: bool = False,
    ) -> None:
        """``write_later`` (a server): a new blame goes to disk a moment after it is kept in
        memory, off the path of the answer it was made for (see ``put``)."""
        self.path = path
        self.write_later = write_later
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.memory_entries = memory_entries
        self._memory: LRUCache[CacheKey, Blame] = LRUCache(memory_entries)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        # Blames kept in memory whose disk write is still to come, oldest first; the thread
        # writing them (None when there is nothing to write).
        self._unwritten: dict[CacheKey, Blame] = {}
        self._writer: threading.Thread | None = None
        if path is not None:
            self._db = self._open(path)
            _OPEN.add(self)

    def _open(self, path: Path) -> sqlite3.Connection | None:
        try:
            _private(path)
            db = sqlite3.connect(path, check_same_thread=False, timeout=5, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")  # one process at a time replaces an old format
            try:
                if db.execute("PRAGMA user_version").fetchone()[0] != _FILE_FORMAT:
                    for table in ("blame", "blame_line", "head_file"):
                        db.execute(f"DROP TABLE IF EXISTS {table}")
                    for statement in _SCHEMA:
                        db.execute(statement)
                    db.execute(f"PRAGMA user_version = {_FILE_FORMAT}")
                db.execute("COMMIT")
            except sqlite3.Error:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                db.close()
                raise
            return db
        except (sqlite3.Error, OSError):
            return None  # an unusable cache directory: run with the in-memory layer only

    def close(self) -> None:
        """Write what is still to be written, then close the database file."""
        self.flush()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def get(self, key: CacheKey, rev: CommitSha) -> Blame | None:
        """The cached blame for ``key``, re-labelled as blamed at ``rev``; None on a miss."""
        with _held(self._lock):
            hit = self._memory.get(key) or self._unwritten.get(key)
            if hit is not None:
                return hit.relabelled(rev)
            if self._db is None:
                return None
            may_wait()  # a read from disk
            try:
                row = self._db.execute(f"SELECT data FROM blame WHERE {_KEY}", key.row()).fetchone()
                if row is None:
                    return None
                self._db.execute(
                    f"UPDATE blame SET used = ? WHERE {_KEY}", (time.time(), *key.row())
                )
                blame = decode_blame(row[0], key.path, rev)
            except (sqlite3.Error, ValueError, zlib.error, KeyError, IndexError, TypeError):
                return None
            self._memory[key] = blame
            return blame

    def has_path(self, repo: str, path: str, fingerprint: str) -> bool:
        """Whether any blame of ``path`` is cached for ``repo`` (a CacheKey's repository) with
        these settings: when none is, no checkpoint can be found and none is looked for."""
        with _held(self._lock):
            if any(
                k.repo == repo and k.path == path and k.fingerprint == fingerprint
                for k in (*self._memory, *self._unwritten)
            ):
                return True
            if self._db is None:
                return False
            may_wait()  # a read from disk
            try:
                row = self._db.execute(
                    "SELECT 1 FROM blame WHERE repo = ? AND path = ? AND fingerprint = ? LIMIT 1",
                    (repo, _sql_text(path), fingerprint),
                ).fetchone()
            except sqlite3.Error:
                return False
            return row is not None

    def cached_commits(
        self, repo: str, path: str, fingerprint: str, commits: list[CommitSha]
    ) -> set[CommitSha]:
        """Which of ``commits`` have a cached blame of ``path`` (memory or disk)."""
        wanted = {c.value: c for c in commits}
        with _held(self._lock):
            found = {
                k.commit
                for k in (*self._memory, *self._unwritten)
                if k.repo == repo and k.path == path and k.fingerprint == fingerprint
                and k.commit.value in wanted
            }  # fmt: skip
            if self._db is None:
                return found
            may_wait()  # a read from disk
            values = list(wanted)
            try:
                for start in range(0, len(values), 500):
                    chunk = values[start : start + 500]
                    rows = self._db.execute(
                        "SELECT commit_sha FROM blame WHERE repo = ? AND path = ?"
                        f" AND fingerprint = ? AND commit_sha IN ({','.join('?' * len(chunk))})",
                        (repo, _sql_text(path), fingerprint, *chunk),
                    ).fetchall()
                    found.update(wanted[r[0]] for r in rows if r[0] in wanted)
            except sqlite3.Error:
                pass
        return found

    def line(self, key: CacheKey, line: int) -> BlameLine | bool | None:
        """One line of a cached blame: the BlameLine, None past the end, False on a miss."""
        with _held(self._lock):
            hit = self._memory.get(key) or self._unwritten.get(key)
            if hit is not None:
                return hit.origin(line)
            if self._db is None:
                return False
            may_wait()  # a read from disk
            try:
                row = self._db.execute(
                    "SELECT origin, orig_path, orig_line FROM blame_line"
                    f" WHERE {_KEY} AND line = ?",
                    (*key.row(), line),
                ).fetchone()
                if row is not None:
                    return BlameLine(line, CommitSha(row[0]), _py_text(row[1]), row[2])
                present = self._db.execute(
                    f"SELECT 1 FROM blame WHERE {_KEY}", key.row()
                ).fetchone()
            except (sqlite3.Error, ValueError):
                return False
            return None if present else False

    def head_file(self, repo: str, path: str, head: CommitSha) -> tuple[CommitSha, str] | None:
        """(last commit touching ``path``, sha256 of its text) at ``head`` in ``repo`` (a
        CacheKey's repository), if remembered."""
        with _held(self._lock):
            if self._db is None:
                return None
            may_wait()  # a read from disk
            try:
                row = self._db.execute(
                    "SELECT last_commit, text_sha FROM head_file"
                    " WHERE repo = ? AND path = ? AND head = ?",
                    (repo, _sql_text(path), head.value),
                ).fetchone()
                return None if row is None else (CommitSha(row[0]), str(row[1]))
            except (sqlite3.Error, ValueError):
                return None

    def put_head_file(
        self, repo: str, path: str, head: CommitSha, last: CommitSha, text_sha: str
    ) -> None:
        """Remember what head_file answers (bounded like the blames)."""
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO head_file VALUES (?, ?, ?, ?, ?, ?)",
                    (repo, _sql_text(path), head.value, last.value, text_sha, time.time()),
                )
                self._db.execute(
                    "DELETE FROM head_file WHERE (repo, path, head) IN (SELECT repo, path, head"
                    " FROM head_file ORDER BY used DESC LIMIT -1 OFFSET ?)",
                    (self.max_entries * 4,),
                )
            except sqlite3.Error:
                pass

    def put(self, key: CacheKey, blame: Blame) -> None:
        """Store a complete blame under ``key`` (partial blames are never stored): in memory
        and on disk; with ``write_later``, on disk a moment later (WRITE_DELAY_S), in a
        thread of its own, so the answer the blame was made for goes out before its encoding
        and its rows are written (``flush``, ``close`` and the end of the process write what
        is left at once)."""
        if not blame.complete:
            return
        if not self.write_later:
            data = encode_blame(blame)
            with self._lock:
                self._memory[key] = blame
                self._unwritten.pop(key, None)
                self._write(key, blame, data)
            return
        note_activity()  # made for an answer still to go out
        with self._lock:
            self._memory[key] = blame
            if self._db is None:
                return
            self._unwritten.pop(key, None)
            self._unwritten[key] = blame
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_later, name="poimen-blame-cache", daemon=True
                )
                self._writer.start()

    def flush(self) -> None:
        """Write every blame kept in memory and not yet on disk, now."""
        while self._write_next():
            pass

    def _write_later(self) -> None:
        """The writer thread: what is unwritten, one blame at a time, each once the process
        has been idle for WRITE_DELAY_S (``note_activity``: a request taken) or once the
        oldest has waited WRITE_WAIT_MAX_S; until nothing is left."""
        started = time.monotonic()
        while True:
            time.sleep(WRITE_DELAY_S / 4)
            now = time.monotonic()
            if now - _LAST_ACTIVITY[0] < WRITE_DELAY_S and now - started < WRITE_WAIT_MAX_S:
                continue
            self._write_next()
            started = time.monotonic()
            with self._lock:
                if not self._unwritten:
                    self._writer = None
                    return

    def _write_next(self) -> bool:
        """Write the oldest unwritten blame; False when there was none."""
        with self._lock:
            if not self._unwritten:
                return False
            key = next(iter(self._unwritten))
            blame = self._unwritten.pop(key)
        data = encode_blame(blame)  # off the lock: readers go on meanwhile
        with self._lock:
            if key in self._unwritten:  # put again meanwhile: that one is written instead
                return True
            self._write(key, blame, data)
        return True

    def _write(self, key: CacheKey, blame: Blame, data: bytes) -> None:
        """One blame to disk (the lock held)."""
        if self._db is not None:
            try:
                self._db.execute("BEGIN")
                self._db.execute(
                    "INSERT OR REPLACE INTO blame VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*key.row(), time.time(), _disk_size(key, blame, data), data),
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO blame_line VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            *key.row(),
                            ln.line,
                            ln.commit.value,
                            _sql_text(ln.orig_path),
                            ln.orig_line,
                        )
                        for ln in blame.lines
                    ],
                )
                self._evict()
                self._db.execute("COMMIT")
            except sqlite3.Error:
                # A full disk or a locked file costs a re-blame later, nothing more.
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")

    def _evict(self) -> None:
        assert self._db is not None
        count, total = self._db.execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM blame"
        ).fetchone()
        while count > self.max_entries or total > self.max_bytes:
            row = self._db.execute(
                "SELECT repo, path, commit_sha, fingerprint, size FROM blame ORDER BY used LIMIT 1"
            ).fetchone()
            if row is None:
                break
            self._db.execute(f"DELETE FROM blame WHERE {_KEY}", row[:4])
            self._db.execute(f"DELETE FROM blame_line WHERE {_KEY}", row[:4])
            count, total = count - 1, total - row[4]

    def stats(self) -> tuple[int, int]:
        """(entries on disk, bytes on disk), once what is unwritten is written."""
        self.flush()
        with self._lock:
            if self._db is None:
                return (0, 0)
            count, total = self._db.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM blame"
            ).fetchone()
            return int(count), int(total)


# When a server last took a request (note_activity): its writers wait for a quiet moment.
_LAST_ACTIVITY = [float("-inf")]


@contextlib.contextmanager
def _held(lock: threading.Lock) -> Iterator[None]:
    """``lock``, held for the block; taken by a reader that must not wait (``nonblocking``)
    only when it is free: a writer holds it while it writes to disk."""
    if not lock.acquire(blocking=False):
        may_wait()
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def note_activity() -> None:
    """A server took a request: blames waiting to be written (``write_later``) wait until
    it has been idle for WRITE_DELAY_S, so that writing them never slows its answers."""
    _LAST_ACTIVITY[0] = time.monotonic()


# Open caches, written out as the process ends (a writer thread is a daemon: it would not be).
_OPEN: weakref.WeakSet[BlameCache] = weakref.WeakSet()


@atexit.register
def _flush_open() -> None:
    for cache in list(_OPEN):
        with contextlib.suppress(Exception):  # the end of the process: a cache is only a cache
            cache.flush()


def _disk_size(key: CacheKey, blame: Blame, data: bytes) -> int:
    """What an entry takes on disk: its compressed blob and its rows of blame_line."""
    keyed = sum(len(str(v).encode("utf-8", "surrogateescape")) for v in key.row()) + 16
    rows = sum(keyed + len(ln.commit.value) + len(ln.orig_path) for ln in blame.lines)
    return len(data) + int(rows * _LINE_ROW_SPACE)
