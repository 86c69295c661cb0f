"""Claude Code's JSON settings files: read (a file that is no JSON object is refused, naming
it), changed as a ``Change`` that can show itself as a diff, and written atomically, keeping
the file's indentation, its final newline, its permissions and where a symlink points.

A work tree's own file (``.claude/settings.json``, ``.mcp.json``, ``.codex/hooks.json``) is
read and written without following links: a repository may commit it, or its directory, as a
link to a file outside the work tree, and such a file is refused, naming it."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import secrets
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poimen_memory.errors import ConfigError

__all__ = [
    "Change",
    "JsonFile",
    "container",
    "drop",
    "json_type",
    "read_json",
    "render",
    "unchanged",
]


@dataclass(frozen=True, slots=True)
class JsonFile:
    """A settings file as read: its text, its data and the indentation it is written with."""

    path: Path
    text: str | None  # None: the file does not exist
    data: dict[str, Any]
    indent: int | str | None
    follow_links: bool = True  # False: a work tree's file, never read or written through a link


def _indent_of(text: str) -> int | str | None:
    """The indentation a JSON file is written with (2 spaces for a new or one-line file)."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2 if not text.strip() or "\n" in text.strip() else None


_MAX_BYTES = 16 * 1024 * 1024  # a settings file larger than this is no settings file


def _refuse_link(path: Path, what: Path) -> ConfigError:
    return ConfigError(
        f"{what}: is a symbolic link (a repository may commit one pointing outside its work "
        f"tree); {path} is not read or written through it: replace the link with a plain "
        "file or directory; not changed"
    )


def _open_parent(path: Path, create: bool) -> int | None:
    """A descriptor of ``path``'s directory, opened without following a link there (a link is
    refused); None when it does not exist and ``create`` is false. The directory above it is
    the work tree's root, which may be reached through links."""
    parent = path.parent
    above = os.open(parent.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(parent.name, 0o777, dir_fd=above)
        try:
            return os.open(parent.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=above)
        except FileNotFoundError:
            return None
        except OSError:
            if stat.S_ISLNK(os.stat(parent.name, dir_fd=above, follow_symlinks=False).st_mode):
                raise _refuse_link(path, parent) from None
            raise
    finally:
        os.close(above)


def _read_here(path: Path) -> str | None:
    """The text of a work tree's file, read without following a link at it or its directory
    (refused, naming it), and only when it is a regular file; None when there is none."""
    folder = _open_parent(path, create=False)
    if folder is None:
        return None
    try:
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError:
            if stat.S_ISLNK(os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode):
                raise _refuse_link(path, path) from None
            raise
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ConfigError(f"{path}: not a regular file; not changed")
        data = handle.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise ConfigError(f"{path}: larger than {_MAX_BYTES // (1024 * 1024)} MiB; not changed")
    return data.decode("utf-8")


def read_json(path: Path, follow_links: bool = True) -> JsonFile:
    """A JSON settings file; ConfigError naming it when it is no JSON object. Not
    ``follow_links``: a link at the file or its directory is refused (a work tree's file)."""
    try:
        text = path.read_text(encoding="utf-8") if follow_links else _read_here(path)
        if text is None:
            return JsonFile(path, None, {}, 2, follow_links)
    except FileNotFoundError:
        return JsonFile(path, None, {}, 2, follow_links)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8; not changed") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from None
    if not text.strip():
        return JsonFile(path, text, {}, 2, follow_links)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); not changed"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, found {json_type(data)}; not changed")
    return JsonFile(path, text, data, _indent_of(text), follow_links)


def render(data: Mapping[str, Any], indent: int | str | None, like: str | None) -> str:
    """``data`` as JSON with ``indent``, ending in a newline when ``like`` (the file's text
    before) does, or when there was no file."""
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + "\n" if like is None or like.endswith("\n") else text


def _write_here(path: Path, text: str) -> None:
    """Write a work tree's file atomically without following a link at it or its directory
    (each refused, naming it): a temporary file made there, then renamed over it."""
    folder = _open_parent(path, create=True)
    assert folder is not None
    try:
        try:
            now = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        else:
            if stat.S_ISLNK(now.st_mode):
                raise _refuse_link(path, path)
            if not stat.S_ISREG(now.st_mode):
                raise ConfigError(f"{path}: not a regular file; not changed")
            mode = now.st_mode & 0o7777
        temp = f".{path.name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(temp, flags, 0o600, dir_fd=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                os.fsync(handle.fileno())
            os.replace(temp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def _write_atomically(path: Path, text: str, follow_links: bool = True) -> None:
    """Write through a temporary file in the same directory and a rename; a symlinked file is
    written where it points, and keeps its permissions. Not ``follow_links``: a link at the
    file or its directory is refused instead."""
    if not follow_links:
        _write_here(path, text)
        return
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


@dataclass(frozen=True, slots=True)
class Change:
    """What an install or uninstall does to one file: its text before and after (None: no
    file), and a sentence saying what that is."""

    path: Path
    before: str | None
    after: str | None
    message: str
    follow_links: bool = True  # False: a work tree's file, never written through a link

    @property
    def changed(self) -> bool:
        """Whether the file would be written."""
        return self.after is not None and self.before != self.after

    def diff(self) -> str:
        """The change as a unified diff of the JSON, pretty-printed whatever the file's layout
        (a one-line file would be one changed line); empty when nothing changes."""
        if not self.changed:
            return ""

        def lines(text: str | None) -> list[str]:
            if text is None or not text.strip():
                return []
            return (json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n").splitlines(
                keepends=True
            )

        diff = difflib.unified_diff(
            lines(self.before), lines(self.after), f"{self.path} (now)", f"{self.path} (after)"
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in diff)

    def apply(self) -> None:
        """Write the file (atomically); nothing when nothing changes."""
        if not self.changed or self.after is None:
            return
        try:
            _write_atomically(self.path, self.after, self.follow_links)
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot be written: {exc.strerror or exc}") from None


def unchanged(file: JsonFile, message: str) -> Change:
    """The change that leaves ``file`` as it is."""
    return Change(file.path, file.text, file.text, message, file.follow_links)


def drop(items: list[Any], item: object) -> None:
    """Remove ``item`` itself from ``items`` (not an equal one that comes first)."""
    del items[next(i for i, x in enumerate(items) if x is item)]


def json_type(value: object) -> str:
    """What a JSON value is, for a message ("an object", "a number", ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "null")


def container(file: JsonFile, parent: dict[str, Any], key: str, kind: type, where: str) -> Any:
    """``parent[key]`` when it is absent or of ``kind``; else ConfigError naming ``where``."""
    value = parent.get(key)
    if value is not None and not isinstance(value, kind):
        raise ConfigError(
            f"{file.path}: {where} is {json_type(value)}, expected "
            f"{'an object' if kind is dict else 'an array'}; not changed"
        )
    return value
