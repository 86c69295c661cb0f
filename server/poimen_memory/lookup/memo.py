"""One bounded, thread-safe cache of remembered answers: what every cache of the lookup
service is."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

from poimen_memory.errors import may_wait

__all__ = ["Memo"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(Generic[K, V]):
    """The ``maxsize`` answers used last, by key, behind a lock of their own. An answer is
    computed outside the lock, once when threads ask for it at once (``get_or_compute``),
    and None is never kept."""

    def __init__(self, maxsize: int) -> None:
        self._entries: LRUCache[K, V] = LRUCache(maxsize)
        self._lock = threading.Lock()
        # Keys being computed, each with what its waiters wait on.
        self._running: dict[K, threading.Event] = {}

    @property
    def maxsize(self) -> int:
        """How many answers are kept at most."""
        return int(self._entries.maxsize)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, key: K) -> V | None:
        """The answer kept for ``key`` (now the most recently used), else None."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key``, in place of any answer kept for it."""
        with self._lock:
            self._entries[key] = value

    def setdefault(self, key: K, value: V) -> V:
        """The answer kept for ``key``; ``value``, now kept, when there is none."""
        with self._lock:
            return self._entries.setdefault(key, value)

    def get_or_compute(self, key: K, compute: Callable[[], V | None]) -> V | None:
        """The answer kept for ``key``, else ``compute()`` (called outside the lock), kept
        unless it is None. Threads asking for the same key at once compute it once: the
        others wait for that answer (and compute their own if it is None or fails)."""
        found = self.get(key)
        if found is not None:
            return found
        may_wait()
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                return found
            running = self._running.get(key)
            if running is None:
                running = self._running[key] = threading.Event()
                mine = True
            else:
                mine = False
        if not mine:
            running.wait()
            found = self.get(key)
            if found is not None:
                return found
            # The first computation kept nothing: this one is its own.
        try:
            found = compute()
            if found is not None:
                self.put(key, found)
        finally:
            if mine:
                with self._lock:
                    self._running.pop(key, None)
                running.set()
        return found

    def drop_where(self, doomed: Callable[[K], bool]) -> int:
        """Forget the answers whose key ``doomed`` picks; how many went."""
        with self._lock:
            keys = [k for k in self._entries if doomed(k)]
            for k in keys:
                del self._entries[k]
        return len(keys)

    def clear(self) -> None:
        """Forget every answer."""
        with self._lock:
            self._entries.clear()
