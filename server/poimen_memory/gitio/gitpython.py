"""GitPython bound to a GitRunner: the same git, the same fixed environment, every process
counted. Imported on first use: GitPython takes ~50 ms to import and runs ``git version``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from poimen_memory.gitio.errors import NotARepository
from poimen_memory.gitio.runner import GitRunner


@contextmanager
def _quiet_refresh() -> Iterator[None]:
    # Without git on PATH GitPython's import raises ImportError; we say GitNotFound on use.
    saved = os.environ.get("GIT_PYTHON_REFRESH")
    os.environ["GIT_PYTHON_REFRESH"] = "quiet"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("GIT_PYTHON_REFRESH", None)
        else:
            os.environ["GIT_PYTHON_REFRESH"] = saved


with _quiet_refresh():
    import git
    from git.refs.symbolic import SymbolicReference

__all__ = ["BoundGit", "SymbolicReference", "git", "open_repository"]


class BoundGit(git.cmd.Git):
    """GitPython's command runner, running the runner's git with its environment, counted."""

    def __init__(self, working_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(working_dir)
        self.runner = GitRunner()

    def execute(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        """Run GitPython's ``command`` (an argv) as the runner would run it."""
        self.runner.count()
        argv = self.runner.argv(list(command)[1:])
        kwargs["env"] = {**self.runner.overrides(), **(kwargs.get("env") or {})}
        try:
            return super().execute(argv, *args, **kwargs)
        except git.exc.GitCommandNotFound:
            raise self.runner.not_found() from None


class _Repo(git.Repo):
    GitCommandWrapperType = BoundGit


def open_repository(start: Path, runner: GitRunner) -> git.Repo:
    """The non-bare repository whose work tree holds the directory ``start``."""
    try:
        # No $VAR expansion: a directory name is data, not a template.
        repo = _Repo(start, search_parent_directories=True, expand_vars=False)
    except (git.exc.InvalidGitRepositoryError, git.exc.NoSuchPathError, OSError):
        raise NotARepository(f"{start} is not inside a git work tree") from None
    if repo.working_tree_dir is None:
        raise NotARepository(f"{start} is not inside a git work tree (bare repository?)")
    cast(BoundGit, repo.git).runner = runner
    return repo
