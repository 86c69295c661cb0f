"""The blame cache shared through the store, as gitio's ``SharedBlames`` for one repository.

Reads are one query each and never fail a hover: a store that is down, slow or not migrated
to the table is a miss, and after a failure the store is not asked again for a while (so a
dead store costs one timeout, not one per hover). Writes go through one background thread
with a bounded queue: a blame computed for a hover is shared without the hover waiting.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

import psycopg

from poimen_memory.domain import ProjectId, RepoId, SharedBlame, SharedBlameLine
from poimen_memory.errors import StoreUnavailable
from poimen_memory.store import Store

__all__ = ["SharedBlameGate", "StoreSharedBlames"]

log = logging.getLogger(__name__)

PAUSE_S = 30.0
"""After a failure, how long the store is left alone."""
QUEUE = 64
"""Blames waiting to be written; more are dropped (each is only an optimisation)."""


class SharedBlameGate:
    """What the adapters of one store share: whether it answers, and the writer thread."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._paused_until = 0.0
        self._disabled = False
        self._queue: queue.Queue[tuple[ProjectId, RepoId, SharedBlame] | None] = queue.Queue(QUEUE)
        self._writer: threading.Thread | None = None
        self._lock = threading.Lock()

    def open(self) -> bool:
        """Whether the store may be asked now."""
        return not self._disabled and time.monotonic() >= self._paused_until

    def failed(self, exc: BaseException) -> None:
        """A failed call: pause, or stop for good when the table is missing (an older
        schema; ``mem db migrate`` adds it)."""
        if isinstance(exc, psycopg.errors.UndefinedTable):
            if not self._disabled:
                log.info("shared blame cache: the store has no blame tables; run mem db migrate")
            self._disabled = True
            return
        log.debug("shared blame cache unavailable: %s", exc)
        self._paused_until = time.monotonic() + PAUSE_S

    def enqueue(self, project: ProjectId, repo: RepoId, blame: SharedBlame) -> None:
        """Write ``blame`` in the background (dropped when the queue is full)."""
        if not self.open():
            return
        with self._lock:
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write, name="poimen-share-blame", daemon=True
                )
                self._writer.start()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait((project, repo, blame))

    def flush(self, timeout: float = 10.0) -> None:
        """Wait (up to ``timeout``) for the queued writes: a short-lived command's blames are
        shared before it exits."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    def _write(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self.open():
                    try:
                        self.store.put_blame(*item)
                    except (StoreUnavailable, psycopg.Error) as exc:
                        self.failed(exc)
                    except ValueError as exc:
                        log.debug("shared blame not written: %s", exc)
            finally:
                self._queue.task_done()


class StoreSharedBlames:
    """gitio's SharedBlames for one repository of one project, over a store."""

    def __init__(self, gate: SharedBlameGate, project: Callable[[], ProjectId], repo: RepoId):
        self.gate = gate
        self.project = project
        self.repo = repo

    def get(self, path: str, commit: str, fingerprint: str) -> SharedBlame | None:
        """The stored row, or None (a miss, or the store cannot answer)."""
        if not self.gate.open():
            return None
        try:
            found = self.gate.store.get_blame(self.project(), self.repo, path, commit, fingerprint)
        except (StoreUnavailable, psycopg.Error) as exc:
            self.gate.failed(exc)
            return None
        except ValueError:  # a path or id the store refuses (too long): a miss
            return None
        return found

    def line(self, path: str, fingerprint: str, blob_id: str, line: int) -> list[SharedBlameLine]:
        """The line's part of each stored blame of the blob (none when the store cannot
        answer)."""
        if not self.gate.open():
            return []
        try:
            return self.gate.store.blame_line(
                self.project(), self.repo, path, fingerprint, blob_id, line
            )
        except (StoreUnavailable, psycopg.Error) as exc:
            self.gate.failed(exc)
            return []
        except ValueError:
            return []

    def commits_with(self, path: str, fingerprint: str, commits: Sequence[str]) -> set[str]:
        """Which of ``commits`` have a stored blame (none when the store cannot answer)."""
        if not self.gate.open() or not commits:
            return set()
        try:
            return set(
                self.gate.store.blames_at(self.project(), self.repo, path, fingerprint, commits)
            )
        except (StoreUnavailable, psycopg.Error) as exc:
            self.gate.failed(exc)
            return set()
        except ValueError:
            return set()

    def has_path(self, path: str, fingerprint: str) -> bool:
        """Whether the store has a blame of ``path`` at any commit; False when the store
        cannot answer (nothing would come of asking it further)."""
        if not self.gate.open():
            return False
        try:
            return self.gate.store.blame_of_path(self.project(), self.repo, path, fingerprint)
        except (StoreUnavailable, psycopg.Error) as exc:
            self.gate.failed(exc)
            return False
        except ValueError:
            return False

    def put(self, row: SharedBlame) -> None:
        """Share a blame, in the background."""
        self.gate.enqueue(self.project(), self.repo, row)
