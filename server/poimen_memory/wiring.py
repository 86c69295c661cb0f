"""What the adapters (CLI, LSP, HTTP, demo) put together: the store named by the settings,
and where files shown to the user go. Only adapters import this module."""

from __future__ import annotations

from pathlib import Path

from poimen_memory.errors import ConfigError, StoreUnavailable
from poimen_memory.gitio.cache import default_cache_path
from poimen_memory.settings import load_settings
from poimen_memory.store import IngestListener, Store, embedded_dsn

__all__ = ["ConfigError", "IngestListener", "StoreUnavailable", "open_store", "scratch_dir"]


def open_store(
    dsn: str | None,
    *,
    timeout: float = 5.0,
    statement_timeout_ms: int | None = None,
    lazy: bool = False,
) -> Store:
    """The store named by ``dsn``, else by POIMEN_DSN or the config file, else the embedded
    one. ``lazy`` returns at once and connects on first use (and again after a failure)."""
    settings = load_settings({"dsn": dsn})
    target = settings.dsn if settings.dsn is not None else embedded_dsn(settings.data_dir)
    return Store(target, timeout=timeout, statement_timeout_ms=statement_timeout_ms, lazy=lazy)


def scratch_dir() -> Path:
    """A directory for files shown to the user (rendered memories), under the cache dir."""
    return default_cache_path().parent / "memories"
