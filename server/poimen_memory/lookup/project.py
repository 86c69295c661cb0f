"""The one project rule, for every surface, hook and installer.

A memory's project is, in this order: the one a request (or command line) names, else
``POIMEN_PROJECT``, else ``project`` in the config file, else a default derived from the
repository's identity (``github.com/org/app`` -> ``app``; a repository without a remote has a
``local/...`` identity from its root commit), so every clone of one repository lands in the
same project. ``decide_project`` says which value won and why; ``mem doctor`` prints it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from poimen_memory.domain import ContentError, ProjectId, RepoId
from poimen_memory.settings import Settings

__all__ = ["ProjectChoice", "decide_project", "project_for"]

# What a project id may not hold, and may not start with (domain.ids.IDENT_PATTERN).
_NOT_IN_PROJECT = re.compile(r"[^A-Za-z0-9._:@/+=-]+")
_NOT_FIRST_IN_PROJECT = re.compile(r"^[^A-Za-z0-9]+")


def project_for(repo: RepoId) -> ProjectId:
    """The project derived from a repository identity: its last path segment
    (``github.com/org/poimen`` -> ``poimen``), made a valid project id the same way every time:
    each run of characters a project id cannot hold becomes ``-``, and what cannot start one is
    dropped (``org/.github`` -> ``github``, ``_infra`` -> ``infra``, ``a~b`` -> ``a-b``). A name
    with nothing valid in it gets ``repo-`` and 12 hex digits of the identity's sha256."""
    name = repo.value.rstrip("/").rsplit("/", 1)[-1]
    cleaned = _NOT_FIRST_IN_PROJECT.sub("", _NOT_IN_PROJECT.sub("-", name))[:128].rstrip("-")
    try:
        return ProjectId(cleaned)
    except ContentError:
        digest = hashlib.sha256(repo.value.encode("utf-8", "surrogateescape")).hexdigest()
        return ProjectId(f"repo-{digest[:12]}")


@dataclass(frozen=True, slots=True)
class ProjectChoice:
    """The project in force and where it came from (``--project``, ``POIMEN_PROJECT``,
    ``config file PATH``, ``request``, ``repository github.com/org/x``); ``project`` is None
    when nothing decides it (no setting, and no single repository to derive it from)."""

    project: ProjectId | None
    source: str


def decide_project(
    settings: Settings,
    repo: RepoId | None = None,
    explicit: ProjectId | None = None,
    explicit_source: str = "request",
) -> ProjectChoice:
    """The project rule: ``explicit`` > the settings (flag, ``POIMEN_PROJECT``, config file,
    in that order, as loaded) > derived from ``repo``'s identity > none."""
    if explicit is not None:
        return ProjectChoice(explicit, explicit_source)
    if settings.project is not None:
        return ProjectChoice(ProjectId(settings.project), settings.origin("project") or "settings")
    if repo is not None:
        return ProjectChoice(project_for(repo), f"repository {repo.value}")
    return ProjectChoice(None, "none: no setting, and no single repository to derive it from")
