"""LISTEN on the ingest channel in a background thread; reconnects by itself."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

import psycopg

__all__ = ["NOTIFY_CHANNEL", "IngestListener"]

# Ingest sends pg_notify(NOTIFY_CHANNEL, '{"project": ..., "repo": ...}') after each batch.
NOTIFY_CHANNEL = "poimen_memory_ingest"

log = logging.getLogger("poimen_memory.lsp.listen")


class IngestListener:
    """Calls ``on_ingest(project, repo)`` for each committed ingest batch."""

    def __init__(self, dsn: str, on_ingest: Callable[[str, str], None]) -> None:
        self.dsn = dsn
        self.on_ingest = on_ingest
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="poimen-listen", daemon=True)

    def start(self) -> None:
        """Start listening."""
        self._thread.start()

    def stop(self) -> None:
        """Stop listening (returns at once; the thread ends within a second)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=2) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    log.info("listening for ingests on %s", NOTIFY_CHANNEL)
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._deliver(note.payload)
            except psycopg.Error as exc:
                log.debug("ingest listener: %s; retrying", exc)
                self._stop.wait(1.0)

    def _deliver(self, payload: str) -> None:
        try:
            body = json.loads(payload)
            project, repo = str(body["project"]), str(body["repo"])
        except (ValueError, KeyError, TypeError):
            log.debug("ignoring notification %r", payload)
            return
        self.on_ingest(project, repo)
