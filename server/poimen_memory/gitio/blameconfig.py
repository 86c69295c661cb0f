"""What changes a blame besides history: its flags, the ignore-revs files and the mailmap.

git is told exactly which ignore-revs files to read (``--no-ignore-revs-file`` drops those the
configuration names, which git would otherwise open itself, links and FIFOs included), and
only regular files reached through no link are among them. The same files, and .mailmap, are
read here the same way and size-capped, to fingerprint the settings for the blame cache.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mode
from dataclasses import dataclass
from pathlib import Path

from poimen_memory.gitio.refs import FileStamp, stamp

__all__ = ["BlameConfig", "BlameSettings", "read_regular_file"]

CONVENTIONAL_IGNORE_REVS = ".git-blame-ignore-revs"
MAX_SETTINGS_FILE = 4 << 20  # a larger ignore-revs list or mailmap is neither read nor used
_BLAME_FLAGS = ("--root", "--no-textconv")
# Moved and copied lines: more history kept for reorganized code, at about twice the cost.
_MOVE_FLAGS = ("-M", "-C")
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def read_regular_file(root: Path, path: Path, cap: int = MAX_SETTINGS_FILE) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``cap`` bytes, reached through
    no link below the work tree ``root``; None otherwise (missing, a link, a FIFO, too big)."""
    full = os.path.normpath(path)
    if full.startswith(os.path.join(root, "")) and os.path.realpath(full) != full:
        return None
    try:
        fd = os.open(full, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat_mode.S_ISREG(info.st_mode) or info.st_size > cap:
            return None
        chunks, size = [], 0
        while size <= cap and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if size > cap else b"".join(chunks)


@dataclass(frozen=True, slots=True)
class BlameSettings:
    """A blame's flags and a fingerprint of everything besides history that it depends on."""

    args: tuple[str, ...]
    fingerprint: str


@dataclass(frozen=True, slots=True)
class BlameConfig:
    """The configuration values of one repository that change a blame."""

    root: Path
    ignore_revs: tuple[str, ...] = ()  # blame.ignoreRevsFile, in order ("" empties the list)
    mailmap_files: tuple[str, ...] = ()  # mailmap.file
    mailmap_blobs: tuple[str, ...] = ()  # mailmap.blob
    detect_moves: bool = False

    def _path(self, value: str) -> Path:
        # git reads relative paths from its working directory: the root, for us.
        return self.root / os.path.expanduser(value)

    def ignore_files(self) -> tuple[Path, ...]:
        """The ignore-revs files in force: the configured ones, else the conventional one."""
        if not self.ignore_revs:
            return (self.root / CONVENTIONAL_IGNORE_REVS,)
        files: list[Path] = []
        for value in self.ignore_revs:
            files = [*files, self._path(value)] if value else []
        return tuple(files)

    def watched(self) -> tuple[Path, ...]:
        """Every file whose contents change a blame."""
        mailmaps = (self._path(v) for v in self.mailmap_files if v)
        return (self.root / ".mailmap", *self.ignore_files(), *mailmaps)

    def stamps(self) -> tuple[FileStamp, ...]:
        """What ``lstat`` says of the watched files: while it holds, so do the settings."""
        return tuple(stamp(str(path)) for path in self.watched())

    def settings(self) -> BlameSettings:
        """The flags to blame with and the fingerprint of all that, read from disk now."""
        contents = {path: read_regular_file(self.root, path) for path in self.watched()}
        usable = [path for path in self.ignore_files() if contents[path] is not None]
        args = (
            *_BLAME_FLAGS,
            *(_MOVE_FLAGS if self.detect_moves else ()),
            "--no-ignore-revs-file",
            *(f"--ignore-revs-file={path}" for path in usable),
        )
        digest = hashlib.sha256(" ".join(args).encode("utf-8", "surrogateescape"))
        for part in (*self.mailmap_files, "\x00", *self.mailmap_blobs):
            digest.update(part.encode("utf-8", "surrogateescape") + b"\x00")
        for data in contents.values():
            digest.update(b"-\x00" if data is None else b"%d\x00%s" % (len(data), data))
        return BlameSettings(args, digest.hexdigest()[:32])
