"""A repository's own files, checked once when it is found, before anything reads them.

GitPython reads ``.git`` (a gitdir file), ``commondir``, HEAD, refs, packed-refs and the
configuration in this process; git reads them too, and alternates, grafts, shallow,
info/exclude and info/attributes. Any of them may be a FIFO (an ``open`` that never returns)
or a link to ``/dev/zero`` (a read that never ends). Each must be, once links are followed,
a regular file of bounded size (directories where git expects directories); the few read
here are opened without waiting and read up to their cap. A repository that fails is refused
with one error naming it and the file: a few ``lstat`` calls, once per discovery.
"""

from __future__ import annotations

import os
import stat as stat_mode
from pathlib import Path

from poimen_memory.gitio.errors import GitFailed

__all__ = [
    "UNSAFE_FILE",
    "UnsafeRepositoryFile",
    "check_ref_files",
    "check_repository_files",
]

UNSAFE_FILE = "a file of the repository is no small regular file"

_SMALL = 64 << 10  # HEAD, a loose ref, commondir, a gitdir file
_LIST = 16 << 20  # alternates, grafts, shallow, info/exclude, info/attributes, config
_PACKED_REFS = 256 << 20  # hundreds of thousands of refs
_MAX_REFS = 100_000  # loose refs looked at; beyond that git is left to read them itself
_ALTERNATE_DEPTH = 5  # git follows alternates of alternates this deep

# Below the common directory: (path, cap).
_COMMON_FILES: tuple[tuple[str, int], ...] = (
    ("config", _LIST),
    ("packed-refs", _PACKED_REFS),
    ("shallow", _LIST),
    ("info/grafts", _LIST),
    ("info/exclude", _LIST),
    ("info/attributes", _LIST),
)
# Below the git directory of the work tree (the same one, but for a linked work tree).
_OWN_FILES: tuple[tuple[str, int], ...] = (
    ("HEAD", _SMALL),
    ("commondir", _SMALL),
    ("gitdir", _SMALL),
    ("config.worktree", _LIST),
)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class UnsafeRepositoryFile(GitFailed):
    """A file of the repository's own that is a FIFO, a device, a link to one, or too big."""

    def __init__(self, root: Path, path: Path, what: str) -> None:
        super().__init__(f"the repository at {root}: {path} {what}; not read", UNSAFE_FILE)


class _Checker:
    def __init__(self, root: Path) -> None:
        self.root = root

    def refuse(self, path: Path, what: str) -> UnsafeRepositoryFile:
        return UnsafeRepositoryFile(self.root, path, what)

    def _stat(self, path: Path) -> os.stat_result | None:
        """``path``'s status, links followed (None: not there, or a dangling link)."""
        try:
            return os.stat(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            raise self.refuse(path, "cannot be examined") from None

    def file(self, path: Path, cap: int) -> bool:
        """Whether ``path`` is there: a regular file of at most ``cap`` bytes; refused if it
        is there but is anything else (a missing file, or a dangling link, is not there)."""
        info = self._stat(path)
        if info is None:
            return False
        if not stat_mode.S_ISREG(info.st_mode):
            raise self.refuse(path, "is not a regular file (a FIFO, a device or a directory)")
        if info.st_size > cap:
            raise self.refuse(path, f"is larger than {cap >> 10} KiB")
        return True

    def directory(self, path: Path) -> bool:
        info = self._stat(path)
        if info is None:
            return False
        if not stat_mode.S_ISDIR(info.st_mode):
            raise self.refuse(path, "is not a directory")
        return True

    def read(self, path: Path, cap: int) -> bytes | None:
        """The bytes of ``path`` (None: not there), opened without waiting, read to ``cap``."""
        if not self.file(path, cap):
            return None
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            return None
        except OSError:
            raise self.refuse(path, "cannot be read") from None
        try:
            info = os.fstat(fd)
            if not stat_mode.S_ISREG(info.st_mode):  # swapped since the stat
                raise self.refuse(path, "is not a regular file")
            data = os.read(fd, cap + 1)
        except OSError:
            raise self.refuse(path, "cannot be read") from None
        finally:
            os.close(fd)
        if len(data) > cap:
            raise self.refuse(path, f"is larger than {cap >> 10} KiB")
        return data

    def pointer(self, path: Path, base: Path, prefix: bytes = b"") -> Path | None:
        """The directory a small file names (a gitdir file, commondir), relative to ``base``."""
        data = self.read(path, _SMALL)
        if data is None:
            return None
        text = data.strip()
        if prefix:
            if not text.startswith(prefix):
                return None  # not ours to judge: GitPython and git say what it is
            text = text[len(prefix) :].strip()
        if not text or b"\x00" in text:
            return None
        return base / os.fsdecode(text.splitlines()[0].strip())

    def refs(self, top: Path) -> None:
        """Every loose ref below ``top``: a small regular file (walked without following a
        link to a directory; at most _MAX_REFS entries)."""
        if not self.directory(top):
            return
        pending, seen = [top], 0
        while pending and seen < _MAX_REFS:
            here = pending.pop()
            try:
                entries = list(os.scandir(here))
            except OSError:
                continue  # unreadable: git says so itself
            for entry in entries:
                seen += 1
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                else:
                    self.file(Path(entry.path), _SMALL)

    def alternates(self, objects: Path, depth: int = 0) -> None:
        """objects/info/alternates, and those of the object directories it names."""
        data = self.read(objects / "info" / "alternates", _LIST)
        if data is None or depth >= _ALTERNATE_DEPTH:
            return
        for line in data.splitlines():
            line = line.strip()
            if not line or line.startswith(b"#") or line.startswith(b'"') or b"\x00" in line:
                continue
            other = objects / os.fsdecode(line)
            if os.path.isdir(other):
                self.alternates(other, depth + 1)


def _git_dir_of(start: Path, checker: _Checker) -> tuple[Path, Path] | None:
    """(work tree, git directory) of the repository holding ``start``, found as GitPython
    finds it (``$GIT_DIR``, else the nearest ``.git``); None when there is none."""
    env = os.environ.get("GIT_DIR")
    if env:
        return start, Path(env)
    for top in (start, *start.parents):
        dot = top / ".git"
        try:
            info = os.stat(dot)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
        checker.root = top
        if stat_mode.S_ISDIR(info.st_mode):
            return top, dot
        found = checker.pointer(dot, top, b"gitdir:")  # refuses a FIFO, a device, a big file
        return (top, found) if found is not None else None
    return None


def check_repository_files(start: Path) -> None:
    """Refuse (UnsafeRepositoryFile) the repository holding ``start`` if one of its own files
    is not a regular file of bounded size; nothing is said of a directory in no repository."""
    checker = _Checker(start)
    found = _git_dir_of(start, checker)
    if found is None:
        return
    checker.root, git_dir = found
    if not checker.directory(git_dir):
        return
    for name, cap in _OWN_FILES:
        checker.file(git_dir / name, cap)
    common = checker.pointer(git_dir / "commondir", git_dir) or git_dir
    if common != git_dir and not checker.directory(common):
        return
    for name, cap in _COMMON_FILES:
        checker.file(common / name, cap)
    checker.refs(git_dir / "refs")
    if common != git_dir:
        checker.refs(common / "refs")
    checker.alternates(common / "objects")


def check_ref_files(root: Path, *paths: str) -> None:
    """Refuse (UnsafeRepositoryFile) the repository at ``root`` if one of the ref files at
    ``paths`` (HEAD, a loose ref, packed-refs) is there but is no small regular file: they
    may have changed since the repository was found, and GitPython reads them in process."""
    checker = _Checker(root)
    for path in paths:
        checker.file(Path(path), _PACKED_REFS if path.endswith("packed-refs") else _SMALL)
