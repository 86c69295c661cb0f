"""``mem doctor``: what ``mem`` would use here, and why: the config file, the store, the
project (by the one project rule), the repository identity and the work tree."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from poimen_memory.cli.operations import settings_of
from poimen_memory.errors import SchemaMissing
from poimen_memory.lookup import LookupFailed, LookupInputError, decide_project, new_checkouts
from poimen_memory.settings import Settings
from poimen_memory.store import Store
from poimen_memory.store.connection import describe_target

__all__ = ["Doctor", "doctor"]


class Doctor(BaseModel):
    """What ``mem`` uses here, each value with where it came from."""

    config_file: Annotated[str, Field(description="The config file read (it may not exist).")]
    config_file_exists: Annotated[bool, Field(description="Whether the config file exists.")]
    store: Annotated[str, Field(description="The memory store (no password).")]
    store_source: Annotated[str, Field(description="Where the store was set.")]
    store_state: Annotated[
        str,
        Field(description="`ok`, `unreachable`, `schema missing`, or `not started` (embedded)."),
    ]
    work_tree: Annotated[str | None, Field(description="The git work tree, if in one.")]
    repo: Annotated[str | None, Field(description="The repository's identity.")]
    repo_source: Annotated[str | None, Field(description="Where the identity came from.")]
    project: Annotated[str | None, Field(description="The project in use (None: required).")]
    project_source: Annotated[str, Field(description="Why this project (the one rule).")]


def _store(settings: Settings) -> tuple[str, str, str]:
    if settings.dsn is None:
        where = f"embedded Postgres in {settings.data_dir / 'pgdata'}"
        return where, "default: no dsn set", "not started"
    store = Store(settings.dsn, lazy=True, timeout=3.0)
    with contextlib.closing(store):
        problem = store.probe()
    state = "ok" if problem is None else "schema missing"
    if problem is not None and not isinstance(problem, SchemaMissing):
        state = "unreachable"
    return describe_target(settings.dsn), settings.origin("dsn") or "settings", state


def examine(args: argparse.Namespace) -> Doctor:
    """What ``mem`` would use, run here with these arguments."""
    settings = settings_of(args)
    base = Path(args.repo) if args.repo else Path.cwd()
    root = identity = source = None
    with contextlib.suppress(LookupFailed, LookupInputError):
        identity, blamer = new_checkouts(settings.repo).add(base)
        root = str(blamer.repo.root)
        if settings.repo is not None:
            source = settings.origin("repo") or "settings"
        elif identity.value.startswith("local/"):
            source = "local: no remote (derived from the root commit)"
        else:
            source = "the work tree's remote (origin, else the first)"
    choice = decide_project(settings, identity)
    store, store_source, state = _store(settings)
    return Doctor(
        config_file=str(settings.config),
        config_file_exists=settings.config.is_file(),
        store=store,
        store_source=store_source,
        store_state=state,
        work_tree=root,
        repo=None if identity is None else identity.value,
        repo_source=source,
        project=None if choice.project is None else choice.project.value,
        project_source=choice.source,
    )


def doctor(args: argparse.Namespace) -> int:
    """Print what ``mem`` uses here and where each came from."""
    found = examine(args)
    if args.json:
        print(json.dumps(found.model_dump(mode="json"), indent=2))
        return 0
    exists = "" if found.config_file_exists else " (none there: defaults apply)"
    rows = [
        ("config file", f"{found.config_file}{exists}"),
        ("store", f"{found.store} (from {found.store_source}; {found.store_state})"),
        ("work tree", found.work_tree or "none: not in a git work tree"),
        ("repository", f"{found.repo} (from {found.repo_source})" if found.repo else "none"),
        ("project", f"{found.project or 'none: give --project'} (from {found.project_source})"),
    ]
    for name, value in rows:
        print(f"{name:<12} {value}")
    return 0
