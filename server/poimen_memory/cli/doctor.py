"""``mem doctor``: what ``mem`` would use here, and why: the config file, the store, the
work tree, the repository identity and the project (by the one project rule), each with
where it came from."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from poimen_memory.cli.operations import settings_of
from poimen_memory.errors import SchemaMissing
from poimen_memory.lookup import LookupFailed, LookupInputError, decide_project, identity_of
from poimen_memory.settings import Settings
from poimen_memory.wiring import Store, describe_target

__all__ = ["Doctor", "Found", "doctor"]


class Found(BaseModel):
    """A value ``mem`` uses here, where it came from, and (for files and the store) its
    state."""

    value: Annotated[str | None, Field(description="The value (None: none).")]
    source: Annotated[str, Field(description="Where it came from, or why there is none.")]
    state: Annotated[str | None, Field(description="Its state, where it has one.")] = None


class Doctor(BaseModel):
    """What ``mem`` uses here."""

    config_file: Annotated[Found, Field(description="The config file (state: found, none).")]
    store: Annotated[
        Found,
        Field(description="The store (state: ok, unreachable, schema missing, not started)."),
    ]
    work_tree: Annotated[Found, Field(description="The git work tree.")]
    repo: Annotated[Found, Field(description="The repository's identity.")]
    project: Annotated[Found, Field(description="The project (the one project rule).")]


def _store(settings: Settings) -> Found:
    if settings.dsn is None:
        where = f"embedded Postgres in {settings.data_dir / 'pgdata'}"
        return Found(value=where, source="default: no dsn set", state="not started")
    store = Store(settings.dsn, lazy=True, timeout=3.0)
    with contextlib.closing(store):
        problem = store.probe()
    state = "ok" if problem is None else "schema missing"
    if problem is not None and not isinstance(problem, SchemaMissing):
        state = "unreachable"
    source = settings.origin("dsn") or "settings"
    return Found(value=describe_target(settings.dsn), source=source, state=state)


def examine(args: argparse.Namespace) -> Doctor:
    """What ``mem`` would use, run here with these arguments."""
    settings = settings_of(args)
    base = Path(args.repo) if args.repo else Path.cwd()
    tree = Found(value=None, source=f"{base} is not in a git work tree")
    repo = Found(value=None, source="no work tree")
    identity = None
    with contextlib.suppress(LookupFailed, LookupInputError):
        identity, root = identity_of(base, settings.repo)
        tree = Found(value=str(root), source="--repo" if args.repo else "the cwd")
        if settings.repo is not None:
            source = settings.origin("repo") or "settings"
        elif identity.value.startswith("local/"):
            source = "local: no remote (derived from the root commit)"
        else:
            source = "the work tree's remote (origin, else the first)"
        repo = Found(value=identity.value, source=source)
    choice = decide_project(settings, identity)
    config = settings.config
    return Doctor(
        config_file=Found(
            value=str(config),
            source=settings.origin("config") or "default",
            state="found" if config.is_file() else "none: defaults apply",
        ),
        store=_store(settings),
        work_tree=tree,
        repo=repo,
        project=Found(
            value=None if choice.project is None else choice.project.value, source=choice.source
        ),
    )


def doctor(args: argparse.Namespace) -> int:
    """Print what ``mem`` uses here and where each came from."""
    found = examine(args)
    if args.json:
        print(json.dumps(found.model_dump(mode="json"), indent=2))
        return 0
    for name in Doctor.model_fields:
        item: Found = getattr(found, name)
        state = "" if item.state is None else f"; {item.state}"
        print(f"{name.replace('_', ' '):<12} {item.value or 'none'} (from {item.source}{state})")
    return 0
