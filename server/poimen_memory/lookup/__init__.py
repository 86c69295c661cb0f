"""Lookups: one request model per question, one service that answers every surface, one
response model.

- ``requests``: the request models (validated the same on every surface);
- ``results``: what the service computes, and the response model it is returned as;
- ``checkouts``: the local work trees, by repository identity;
- ``service``: the lookup service and its caches.
"""

from collections.abc import Sequence
from pathlib import Path

from poimen_memory.domain import ProjectId
from poimen_memory.gitio import BlameCache
from poimen_memory.lookup import (
    checkouts,
    errors,
    fields,
    project,
    requests,
    results,
    service,
)
from poimen_memory.lookup.checkouts import *  # noqa: F403  (the package's API, as listed below)
from poimen_memory.lookup.errors import *  # noqa: F403
from poimen_memory.lookup.fields import *  # noqa: F403
from poimen_memory.lookup.project import *  # noqa: F403
from poimen_memory.lookup.requests import *  # noqa: F403
from poimen_memory.lookup.results import *  # noqa: F403
from poimen_memory.lookup.service import *  # noqa: F403
from poimen_memory.settings import Settings
from poimen_memory.store import Store

__all__ = ["build_service", "new_checkouts"]
__all__ += checkouts.__all__
__all__ += errors.__all__
__all__ += fields.__all__
__all__ += project.__all__
__all__ += requests.__all__
__all__ += results.__all__
__all__ += service.__all__


def new_checkouts(
    repo_override: str | None = None,
    detect_moves: bool = False,
    cache_path: Path | None = None,
    write_later: bool = False,
) -> checkouts.Checkouts:
    """An empty Checkouts over the persistent blame cache at ``cache_path`` (by default, in
    the default ``cache_dir``: a process with settings passes its own); ``write_later`` (a
    server): new blames go to disk after the answer they were made for."""
    cache = BlameCache(cache_path or Settings().blame_cache_path, write_later=write_later)
    return checkouts.Checkouts(cache, repo_override, detect_moves)


def build_service(
    store: Store,
    repo_dirs: Sequence[str | Path] = (),
    default_project: ProjectId | None = None,
    repo_override: str | None = None,
    cache_path: Path | None = None,
    shared_blames: bool = True,
    *,
    settings: Settings | None = None,
    pending: service.PendingResolver | None = None,
    serving: bool = False,
) -> service.LookupService:
    """A LookupService over ``settings`` (by default: only ``default_project`` and
    ``repo_override`` set) with the given work trees registered (NotInRepository if one is
    not); whole-file blames are shared through ``store`` unless ``shared_blames`` is off (or
    the settings' ``blame.shared_cache``); ``pending`` anchors remembered lines on lookup;
    ``serving``: a server's (blames are written to disk after the answers they were made
    for)."""
    if settings is None:
        project = None if default_project is None else default_project.value
        settings = Settings(project=project, repo=repo_override)
    cache_path = cache_path or settings.blame_cache_path
    known = new_checkouts(
        settings.repo, settings.blame.detect_moves, cache_path=cache_path, write_later=serving
    )
    found = service.LookupService(store, known, settings, pending)
    if shared_blames and settings.blame.shared_cache:
        known.share_through(store, found.project_for_repo)
    for directory in repo_dirs:
        known.add(directory)
    return found
