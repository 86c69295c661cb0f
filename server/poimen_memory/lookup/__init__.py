"""Lookups: one request model per question, one service that answers every surface, one
response model.

- ``requests``: the request models (validated the same on every surface);
- ``results``: what the service computes, and the response model it is returned as;
- ``checkouts``: the local work trees, by repository identity;
- ``service``: the lookup service and its caches.
"""

from pathlib import Path

from poimen_memory.domain import ProjectId
from poimen_memory.gitio import BlameCache
from poimen_memory.gitio.cache import default_cache_path
from poimen_memory.lookup.checkouts import Checkouts, project_for
from poimen_memory.lookup.errors import LookupFailed, LookupInputError, NotInRepository
from poimen_memory.lookup.requests import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupRequest,
    QueryRequest,
)
from poimen_memory.lookup.results import (
    Citation,
    DocumentMemories,
    LineMemory,
    LookupResponse,
    LookupResult,
    Memory,
)
from poimen_memory.lookup.service import LookupService
from poimen_memory.store import Store

__all__ = [
    "ByAuthorRequest",
    "ByCommitRequest",
    "ByGitRequest",
    "Checkouts",
    "Citation",
    "DocumentMemories",
    "LineMemory",
    "LookupFailed",
    "LookupInputError",
    "LookupRequest",
    "LookupResponse",
    "LookupResult",
    "LookupService",
    "Memory",
    "NotInRepository",
    "QueryRequest",
    "build_service",
    "new_checkouts",
    "project_for",
]


def new_checkouts(
    repo_override: str | None = None,
    detect_moves: bool = False,
    cache_path: Path | None = None,
) -> Checkouts:
    """An empty Checkouts over the persistent blame cache (the user's, by default)."""
    return Checkouts(BlameCache(cache_path or default_cache_path()), repo_override, detect_moves)


def build_service(
    store: Store,
    repo_dirs: tuple[str | Path, ...] | list[str | Path] | list[str] | list[Path] = (),
    default_project: ProjectId | None = None,
    repo_override: str | None = None,
    cache_path: Path | None = None,
) -> LookupService:
    """A LookupService with the given work trees registered (NotInRepository if one is not)."""
    checkouts = new_checkouts(repo_override, cache_path=cache_path)
    for directory in repo_dirs:
        checkouts.add(directory)
    return LookupService(store, checkouts, default_project)
