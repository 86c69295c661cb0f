"""What a process builds to answer operations: the lookup service over a store and the work
trees it serves, the recorder over it, from the one settings model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from poimen_memory.lookup import build_service
from poimen_memory.operations.table import Services
from poimen_memory.recording import Recorder, pending_resolver
from poimen_memory.settings import Settings
from poimen_memory.store import Store
from poimen_memory.store.connection import describe_target

__all__ = ["build_services", "store_label"]


def store_label(dsn: str, source: str) -> str:
    """The store as users are told of it: its address (no password) and where it was set."""
    return f"{describe_target(dsn)} (from {source})"


def build_services(
    store: Store,
    settings: Settings,
    repo_dirs: Sequence[str | Path] = (),
    *,
    cache_path: Path | None = None,
    shared_blames: bool = True,
    serving: bool = False,
) -> Services:
    """The services over ``store`` and the work trees containing ``repo_dirs``
    (NotInRepository if one is in none), as ``settings`` say: its project (or the one derived
    from each repository), repository identity, blame options, and how long remembered lines
    wait for their commit. Lookups anchor remembered lines once a commit holds them.
    ``serving``: for a server (LSP, MCP, HTTP), whose answers go out before the blames made
    for them are written to disk."""
    service = build_service(
        store,
        repo_dirs,
        cache_path=cache_path,
        shared_blames=shared_blames,
        settings=settings,
        pending=pending_resolver(store),
        serving=serving,
    )
    return Services(service, Recorder(service, settings.pending_days), settings)
