"""Files a repository names or holds, read as untrusted input: regular files only, reached
through no link inside the work tree, never opened in a way that waits (a FIFO), and size-capped
(``/dev/zero``, a sparse file of a terabyte)."""

from __future__ import annotations

import os
import stat as stat_mode
from pathlib import Path

__all__ = ["MAX_SETTINGS_FILE", "bounded_regular_file", "read_regular_file"]

MAX_SETTINGS_FILE = 4 << 20  # a larger ignore-revs list, mailmap or configuration is not read
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def bounded_regular_file(path: str, cap: int = MAX_SETTINGS_FILE) -> bool:
    """Whether ``path`` is, once links are followed, a regular file of at most ``cap`` bytes
    (for files git itself would open: the user's own configuration may well be a link)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return False
    return stat_mode.S_ISREG(info.st_mode) and info.st_size <= cap


def read_regular_file(root: Path, path: Path, cap: int = MAX_SETTINGS_FILE) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``cap`` bytes, reached through
    no link below the work tree ``root``; None otherwise (missing, a link, a FIFO, too big)."""
    full = os.path.normpath(path)
    if full.startswith(os.path.join(root, "")) and os.path.realpath(full) != full:
        return None
    try:
        fd = os.open(full, _OPEN_FLAGS)
    except (OSError, ValueError):
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
