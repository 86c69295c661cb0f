"""Where a repository's git hooks live (``core.hooksPath``, else ``hooks`` in the common git
directory), and what that place is: inside the git directory, inside the work tree (and
whether git ignores a file there) or elsewhere. Read, never run: no hook is executed here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from poimen_memory.gitio.repo import GitRepo

__all__ = ["HooksDir", "hooks_dir"]


@dataclass(frozen=True, slots=True)
class HooksDir:
    """The hooks directory of the work tree at ``root``, symlinks resolved."""

    root: Path
    path: Path
    configured: str | None  # core.hooksPath as configured (None: git's default)
    in_git_dir: bool
    in_work_tree: bool
    ignored: bool  # a file named post-commit there is ignored by git (in the work tree only)


def _under(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def hooks_dir(where: str | os.PathLike[str], hook: str = "post-commit") -> HooksDir:
    """The hooks directory of the work tree containing ``where``, as git finds it: the last
    ``core.hooksPath`` (``~`` expanded; relative to the work tree root, where hooks run), else
    ``hooks`` in the common git directory. GitError subclasses when there is no work tree."""
    repo = GitRepo.discover(where)
    assert repo.git_dir is not None
    assert repo.common_dir is not None
    values = [v for v in repo.config_values("core", "hooksPath") if v.strip()]
    configured = values[-1] if values else None
    if configured is None:
        base = repo.common_dir / "hooks"
    else:
        expanded = Path(os.path.expanduser(configured))
        base = expanded if expanded.is_absolute() else repo.root / expanded
    path = Path(os.path.realpath(base))
    in_git_dir = _under(path, repo.git_dir) or _under(path, repo.common_dir)
    in_work_tree = not in_git_dir and _under(path, repo.root)
    ignored = in_work_tree and repo.is_ignored(str((path / hook).relative_to(repo.root)))
    return HooksDir(repo.root, path, configured, in_git_dir, in_work_tree, ignored)
