"""What the adapters (CLI, LSP, HTTP, MCP, demo, hooks) put together, so that none of them
holds SQL or git of its own: the store the settings name (its address as users are told
it, its schema, its grants), the version of git and Postgres, and where files shown to the
user go. The settings are loaded by the adapter and passed here."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from pathlib import Path

from poimen_memory.errors import ConfigError, StoreUnavailable
from poimen_memory.gitio import GitError, GitRepo, GitRunner, note_activity, stop_git
from poimen_memory.gitio.hooksdir import HooksDir, exclude_locally, hooks_dir
from poimen_memory.settings import Settings
from poimen_memory.store import (
    IngestListener,
    Store,
    connect,
    embedded_dsn,
    embedded_pgdata,
    migrate,
)
from poimen_memory.store.access import grant_readonly, readonly_grants
from poimen_memory.store.connection import describe_target, release_embedded, server_version

__all__ = [
    "ConfigError",
    "HooksDir",
    "IngestListener",
    "Store",
    "StoreUnavailable",
    "describe_target",
    "embedded_pgdata",
    "git_exclude_locally",
    "git_hooks_dir",
    "git_ignores",
    "git_version",
    "grants_for",
    "migrate_store",
    "note_activity",
    "open_store",
    "postgres_version",
    "release_embedded",
    "scratch_dir",
    "settle_heap",
    "stop_git",
    "store_target",
]


def store_target(settings: Settings, *, migrate_embedded: bool = True) -> tuple[str, str]:
    """(DSN, where it came from): the configured store, else the embedded one under
    ``data_dir`` (its schema migrated on first use, unless ``migrate_embedded`` is false:
    the ``db`` commands report the schema as it is)."""
    if settings.dsn is None:
        dsn = embedded_dsn(
            settings.data_dir,
            root_dir=settings.embedded_root_dir,
            migrate_schema=migrate_embedded,
        )
        return dsn, "embedded"
    return settings.dsn, settings.origin("dsn") or "settings"


def open_store(
    settings: Settings,
    *,
    timeout: float = 5.0,
    statement_timeout_ms: int | None = None,
    lazy: bool = False,
    warm: bool = False,
    max_size: int = 4,
) -> Store:
    """The store the settings name (``dsn``), else the embedded one under ``data_dir``.
    ``lazy`` returns at once and connects on first use (and again after a failure); ``warm``
    (a server) readies each connection for lookups as it opens; ``max_size`` connections at
    most (1: one connection, no pool's threads, for one-shot work)."""
    target, _ = store_target(settings)
    return Store(
        target,
        timeout=timeout,
        statement_timeout_ms=statement_timeout_ms,
        lazy=lazy,
        warm=warm,
        max_size=max_size,
    )


def migrate_store(dsn: str) -> list[str]:
    """Apply the pending schema migrations; their names (``0006_pending_anchor``)."""
    with connect(dsn) as conn:
        return [f"{m.version:04d}_{m.name}" for m in migrate(conn)]


def grants_for(dsn: str, role: str, *, apply: bool, projects: Sequence[str] = ()) -> list[str]:
    """The GRANT statements a read-only lookup role needs, limiting it to ``projects`` (none:
    every project) (run, when ``apply``)."""
    with connect(dsn) as conn:
        return (grant_readonly if apply else readonly_grants)(conn, role, projects)


def git_hooks_dir(where: Path) -> HooksDir:
    """Where git runs the hooks of the work tree containing ``where`` (core.hooksPath, else
    the git directory's), and what that place is; ConfigError when git cannot say."""
    try:
        return hooks_dir(where)
    except GitError as exc:
        raise ConfigError(f"--repo: {exc}") from None


def git_exclude_locally(path: Path) -> Path | None:
    """Make git ignore ``path`` in this clone only (its ``info/exclude``); the file changed,
    or None when git ignores it already or it cannot be done."""
    try:
        return exclude_locally(path)
    except (GitError, ValueError):
        return None


def git_ignores(path: Path) -> bool | None:
    """Whether git ignores ``path`` in its work tree (None: not in one, or git cannot say)."""
    try:
        repo = GitRepo.discover(path.parent)
        return repo.is_ignored(str(path.resolve().relative_to(repo.root)))
    except (GitError, ValueError):
        return None


def git_version() -> str:
    """git's version, or what went wrong asking for it."""
    try:
        return GitRunner().version()
    except GitError as exc:
        return f"git: {exc}"


def postgres_version(dsn: str) -> str:
    """The Postgres server's version at ``dsn`` (StoreUnavailable if it does not answer)."""
    return server_version(dsn)


def scratch_dir(settings: Settings) -> Path:
    """A directory for files shown to the user (rendered memories), under the cache dir."""
    return settings.cache_dir / "memories"


def settle_heap() -> None:
    """A server's start-up is done: what it made (its imports' modules, classes and tables,
    its settings and services) moves to the collector's permanent generation, so that no
    later collection walks it again. Left there, a full collection during a request walked
    the whole start-up heap: 70 ms, on the first code lens of a fresh language server."""
    gc.freeze()
