"""git objects through GitPython's persistent ``git cat-file`` processes.

One request at a time (GitPython's readers are not thread-safe); git's stderr is drained after
every request, so hints about ambiguous names never fill the pipe and stall git; a process that
died is replaced on the next request, and the processes end after a few idle seconds (an open
repository costs no process while nobody reads it). Names are never options here: they travel
on stdin.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, TypeVar

from cachetools import LRUCache

from poimen_memory.errors import may_wait
from poimen_memory.gitio.blame import commit_time
from poimen_memory.gitio.errors import GitFailed
from poimen_memory.gitio.runner import failure

if TYPE_CHECKING:
    import git

__all__ = ["CommitRecord", "ObjectReader", "tree_path_ok"]

_T = TypeVar("_T")
IDLE_S = 5.0  # the persistent processes end after this long unused
# GitPython keeps one process per kind of request.
_HEADERS, _CONTENTS = "cat_file_header", "cat_file_all"


def tree_path_ok(path: str) -> bool:
    """Whether ``path`` can name a file in a tree: git's ``<rev>:<path>`` would otherwise read
    it relative to the current directory (``..`` makes cat-file exit), or split a request."""
    parts = path.split("/")
    return (
        bool(path)
        and "\n" not in path
        and "\x00" not in path
        and all(p not in ("", ".", "..") for p in parts)
    )


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """A commit's metadata as stored in the object (before .mailmap)."""

    sha: str
    author_name: str
    author_email: str
    author_date: datetime
    message: str


FILE_IDS_KEPT = 1024
"""How many (commit, path) file ids the object reader remembers."""


def blob_id_of(data: bytes) -> str:
    """The id git gives ``data`` as a file (``git hash-object``) in a repository of SHA-1
    ids, the only kind the object reader reads."""
    digest = hashlib.sha1(b"blob %d\x00" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


class ObjectReader:
    """Reads objects of one repository through GitPython, one request at a time."""

    def __init__(self, repo: git.Repo) -> None:
        self._repo = repo
        self._lock = threading.Lock()
        self._file_ids: LRUCache[tuple[str, str], str | None] = LRUCache(FILE_IDS_KEPT)
        self._ids_lock = threading.Lock()
        self._used = 0.0
        self._timer: threading.Timer | None = None
        # The processes end with their reader (or at exit), not whenever the collector runs.
        weakref.finalize(self, repo.git.clear_cache)
        # GitPython's reader parses 40-digit ids only; a SHA-256 answer would desynchronise it.
        self._format = str(
            repo.config_reader("repository").get_value("extensions", "objectformat", "sha1")
        ).lower()

    def header(self, name: str) -> tuple[str, str] | None:
        """(object id, type) of the object ``name`` denotes; None when there is none (or the
        name is ambiguous)."""
        found = self.sized_header(name)
        return None if found is None else found[:2]

    def sized_header(self, name: str) -> tuple[str, str, int] | None:
        """(object id, type, size in bytes) of the object ``name`` denotes, or None."""
        found = self._ask(_HEADERS, lambda: self._repo.git.get_object_header(name))
        return None if found is None else (_text(found[0]), _text(found[1]), int(found[2]))

    def commit_id(self, name: str) -> str | None:
        """The id of the commit ``name`` peels to (``name^{commit}``), or None. Read through
        the contents process, as commits are small: a caller that asks only about commits
        starts no ``--batch-check`` process (a hook's worker starts one reader, not two);
        a name of something else never has its contents read (git peels, and answers
        missing)."""
        found = self._ask(_CONTENTS, lambda: self._repo.git.get_object_data(f"{name}^{{commit}}"))
        return None if found is None or _text(found[1]) != "commit" else _text(found[0])

    def data(self, name: str) -> tuple[str, bytes] | None:
        """(type, contents) of the object ``name`` denotes; None when there is none."""
        found = self._ask(_CONTENTS, lambda: self._repo.git.get_object_data(name))
        return None if found is None else (_text(found[1]), found[3])

    def file_id(self, commit: str, path: str) -> str | None:
        """The id of the file (blob, or symlink) at ``path`` in ``commit``, found through the
        commit's trees on the contents process: no ``--batch-check`` process is started for
        it, and no file is read. None when there is no such file. Remembered (a commit's
        trees never change)."""
        key = (commit, path)
        with self._ids_lock:
            if key in self._file_ids:
                return self._file_ids[key]
        found_id = self._file_id(commit, path)
        with self._ids_lock:
            self._file_ids[key] = found_id
        return found_id

    def _file_id(self, commit: str, path: str) -> str | None:
        found = self.data(commit)
        if found is None or found[0] != "commit" or not found[1].startswith(b"tree "):
            return None
        oid = found[1][5:45].decode("ascii", "replace")
        *dirs, name = path.split("/")
        for part in dirs:
            entry = self._entry(oid, part)
            if entry is None or entry[0] != b"40000":
                return None
            oid = entry[1]
        entry = self._entry(oid, name)
        if entry is None or entry[0] in (b"40000", b"160000"):
            return None
        return entry[1]

    def _entry(self, tree: str, name: str) -> tuple[bytes, str] | None:
        """(mode, id) of the entry ``name`` of ``tree``, or None."""
        found = self.data(tree)
        if found is None or found[0] != "tree":
            return None
        data, wanted, at = found[1], name.encode("utf-8", "surrogateescape"), 0
        try:
            while at < len(data):
                space = data.index(b" ", at)
                nul = data.index(b"\x00", space)
                if data[space + 1 : nul] == wanted:
                    return data[at:space], data[nul + 1 : nul + 21].hex()
                at = nul + 21
        except ValueError:  # not a tree git wrote
            return None
        return None

    def commit(self, sha: str) -> CommitRecord | None:
        """The metadata of commit ``sha`` (a full id), parsed by GitPython; None when the
        repository has no such commit."""
        oid = self.commit_id(sha)
        if oid is None or oid != sha.lower():
            return None
        from poimen_memory.gitio.gitpython import git

        def read() -> CommitRecord:
            commit = git.Commit(self._repo, bytes.fromhex(oid))
            when = commit_time(
                commit.authored_date, timezone(timedelta(seconds=-commit.author_tz_offset))
            )
            message = commit.message
            if isinstance(message, bytes):
                message = message.decode("utf-8", "replace")
            return CommitRecord(
                oid, commit.author.name or "", commit.author.email or "", when, message
            )

        try:
            return self._ask(_CONTENTS, read)
        except (LookupError, IndexError, TypeError, AttributeError, OverflowError, ValueError):
            # Not the parser's words: they may quote the object.
            raise GitFailed(f"git cat-file: unreadable commit {sha}") from None

    def close(self) -> None:
        """Stop the persistent processes (started again by the next request)."""
        with self._lock:
            self._repo.git.clear_cache()

    def _ask(self, kind: str, request: Callable[[], _T]) -> _T | None:
        may_wait()
        if self._format != "sha1":
            raise GitFailed(f"git objects: {self._format} repositories are not supported")
        with self._lock:
            self._used = time.monotonic()
            if self._timer is None:
                self._stop_when_idle(IDLE_S)
            said = b""
            for _attempt in range(2):  # a process that died since the last request is replaced
                try:
                    answer = request()
                except (ValueError, OSError, AttributeError) as exc:
                    # A live process answered "missing" or "ambiguous"; a dead one, nothing.
                    # An AttributeError is a caller's parse of what a live one read, or
                    # GitPython's handle on a process it has ended already (at exit, say).
                    if self._alive(kind):
                        if isinstance(exc, AttributeError):
                            raise
                        if isinstance(exc, ValueError):
                            self._drain(kind)
                            return None
                    said = self._drain(kind)
                    self._repo.git.clear_cache()
                    continue
                self._drain(kind)
                return answer
            raise failure("cat-file", said, "the process ended")

    def _stop_when_idle(self, delay: float) -> None:
        # Called with the lock held; one timer at a time, re-armed while requests come.
        self._timer = threading.Timer(delay, self._idle)
        self._timer.daemon = True
        self._timer.start()

    def _idle(self) -> None:
        with self._lock:
            rest = self._used + IDLE_S - time.monotonic()
            if rest > 0:
                self._stop_when_idle(rest)
                return
            self._timer = None
            self._repo.git.clear_cache()

    def _alive(self, kind: str) -> bool:
        cmd = getattr(self._repo.git, kind)
        return cmd is not None and cmd.proc is not None and cmd.proc.poll() is None

    def _drain(self, kind: str) -> bytes:
        cmd = getattr(self._repo.git, kind)
        if cmd is None or cmd.proc is None or cmd.proc.stderr is None:
            return b""
        fd = cmd.proc.stderr.fileno()
        os.set_blocking(fd, False)
        chunks = []
        while True:
            try:
                chunk = os.read(fd, 65536)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def _text(value: str | bytes) -> str:
    # GitPython reads the header as bytes, whatever its annotations say.
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value
