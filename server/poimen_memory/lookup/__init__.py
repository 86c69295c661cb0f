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
from poimen_memory.lookup import checkouts, errors, project, requests, results, service
from poimen_memory.lookup.checkouts import *  # noqa: F403  (the package's API, as listed below)
from poimen_memory.lookup.errors import *  # noqa: F403
from poimen_memory.lookup.project import *  # noqa: F403
from poimen_memory.lookup.requests import *  # noqa: F403
from poimen_memory.lookup.results import *  # noqa: F403
from poimen_memory.lookup.service import *  # noqa: F403
from poimen_memory.store import Store

__all__ = ["build_service", "new_checkouts"]
__all__ += checkouts.__all__
__all__ += errors.__all__
__all__ += project.__all__
__all__ += requests.__all__
__all__ += results.__all__
__all__ += service.__all__


def new_checkouts(
    repo_override: str | None = None,
    detect_moves: bool = False,
    cache_path: Path | None = None,
) -> checkouts.Checkouts:
    """An empty Checkouts over the persistent blame cache (the user's, by default)."""
    cache = BlameCache(cache_path or default_cache_path())
    return checkouts.Checkouts(cache, repo_override, detect_moves)


def build_service(
    store: Store,
    repo_dirs: tuple[str | Path, ...] | list[str | Path] | list[str] | list[Path] = (),
    default_project: ProjectId | None = None,
    repo_override: str | None = None,
    cache_path: Path | None = None,
    shared_blames: bool = True,
) -> service.LookupService:
    """A LookupService with the given work trees registered (NotInRepository if one is not);
    whole-file blames are shared through ``store`` unless ``shared_blames`` is off."""
    known = new_checkouts(repo_override, cache_path=cache_path)
    found = service.LookupService(store, known, default_project)
    if shared_blames:
        known.share_through(store, found.project_for_repo)
    for directory in repo_dirs:
        known.add(directory)
    return found
