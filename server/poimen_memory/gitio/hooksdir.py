"""Where a repository's git hooks live (``core.hooksPath``, else ``hooks`` in the common git
directory), and what that place is: inside the git directory, inside the work tree (and
whether git ignores a file there) or elsewhere. Read, never run: no hook is executed here."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from poimen_memory.gitio.repo import GitRepo

__all__ = ["HooksDir", "exclude_locally", "hooks_dir"]


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


def exclude_locally(path: Path) -> Path | None:
    """Make git ignore the work-tree file ``path`` in this clone only, as Claude Code does for
    its local settings: its path is added to ``info/exclude`` in the common git directory
    (never committed). The exclude file is appended to only when it is a regular file reached
    through no link (or created); None when git ignores ``path`` already, or it cannot be
    done (not in a work tree, a link in the way)."""
    repo = GitRepo.discover(path.parent)
    rel = path.absolute().relative_to(repo.root).as_posix()
    if repo.is_ignored(rel):
        return None
    assert repo.common_dir is not None
    info = repo.common_dir / "info"
    if info.is_symlink() or (info.exists() and not info.is_dir()):
        return None
    info.mkdir(exist_ok=True)
    target = info / "exclude"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(target, flags, 0o644)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.write(fd, f"\n# poimen-memory: this machine's hook settings\n/{rel}\n".encode())
    finally:
        os.close(fd)
    return target
