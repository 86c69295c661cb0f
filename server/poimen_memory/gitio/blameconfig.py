"""What changes a blame besides history: its flags, the ignore-revs files and the mailmap.

git is told exactly which ignore-revs files to read (``--no-ignore-revs-file`` drops those the
configuration names, which git would otherwise open itself, links and FIFOs included), and
only regular files reached through no link, holding nothing but commit ids, are among them:
git quotes a line it cannot read as an id, and the line may be a secret. The mailmap files and
blob the configuration names are pinned for git the same way (``mailmap.file=`` when the file
is not usable, ``mailmap.blob=<id>`` of a blob of bounded size). The same files, and .mailmap,
are read here the same way and size-capped, to fingerprint the settings for the blame cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poimen_memory.gitio.files import MAX_SETTINGS_FILE, read_regular_file
from poimen_memory.gitio.refs import FileStamp, stamp

__all__ = ["BlameConfig", "BlameSettings", "BlobSizer", "config_values"]

log = logging.getLogger(__name__)

CONVENTIONAL_IGNORE_REVS = ".git-blame-ignore-revs"
_BLAME_FLAGS = ("--root", "--no-textconv")
# Moved and copied lines: more history kept for reorganized code, at about twice the cost.
_MOVE_FLAGS = ("-M", "-C")
# A line of an ignore-revs file as git reads it: a full commit id, a comment, or nothing.
_REVS_LINE = re.compile(rb"\s*(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})?\s*(?:#.*)?")

# (object id, type, size) of what a revision expression names, or None.
BlobSizer = Callable[[str], tuple[str, str, int] | None]


def _is_revs_list(data: bytes) -> bool:
    return all(_REVS_LINE.fullmatch(line) for line in data.splitlines())


def config_values(reader: Any, section: str, option: str) -> tuple[str, ...]:
    """Every value of ``section.option`` a GitPython configuration reader holds, in order."""
    if not reader.has_option(section, option):
        return ()
    return tuple(str(v) for v in reader.get_values(section, option))


@dataclass(frozen=True, slots=True)
class BlameSettings:
    """A blame's flags, the configuration git is given for this repository (``key=value``),
    and a fingerprint of everything besides history that a blame depends on."""

    args: tuple[str, ...]
    config: tuple[str, ...]
    fingerprint: str
    shared_fingerprint: str = ""
    ignored: frozenset[str] = frozenset()
    maps_authors: bool = True  # whether git has a mailmap to read (else it maps no one)


@dataclass(frozen=True, slots=True)
class BlameConfig:
    """The configuration values of one repository that change a blame."""

    root: Path
    ignore_revs: tuple[str, ...] = ()  # blame.ignoreRevsFile, in order ("" empties the list)
    mailmap_files: tuple[str, ...] = ()  # mailmap.file
    mailmap_blobs: tuple[str, ...] = ()  # mailmap.blob
    detect_moves: bool = False

    @classmethod
    def read(cls, root: Path, reader: Any, detect_moves: bool) -> BlameConfig:
        """The values a GitPython configuration reader of the repository at ``root`` holds."""
        return cls(
            root,
            config_values(reader, "blame", "ignoreRevsFile"),
            config_values(reader, "mailmap", "file"),
            config_values(reader, "mailmap", "blob"),
            detect_moves,
        )

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

    def settings(self, blob_size: BlobSizer) -> BlameSettings:
        """The flags to blame with and the fingerprint of all that, read from disk now;
        ``blob_size`` tells what a ``mailmap.blob`` names."""
        contents = {path: read_regular_file(self.root, path) for path in self.watched()}
        usable = []
        for path in self.ignore_files():
            data = contents[path]
            if data is not None and _is_revs_list(data):
                usable.append(path)
            elif data is not None:
                log.info("blame: %s is not a list of commit ids; not used", path)
        args = (
            *_BLAME_FLAGS,
            *(_MOVE_FLAGS if self.detect_moves else ()),
            "--no-ignore-revs-file",
            *(f"--ignore-revs-file={path}" for path in usable),
        )
        config = (*self._mailmap_file(contents), *self._mailmap_blob(blob_size))
        digest = hashlib.sha256(" ".join(args).encode("utf-8", "surrogateescape"))
        for part in (*self.mailmap_files, "\x00", *self.mailmap_blobs, *config):
            digest.update(part.encode("utf-8", "surrogateescape") + b"\x00")
        for data in contents.values():
            digest.update(b"-\x00" if data is None else b"%d\x00%s" % (len(data), data))
        ignored = frozenset(
            found.lower()
            for path in usable
            for found in re.findall(rb"^\s*([0-9a-fA-F]{40,64})", contents[path] or b"", re.M)
            for found in [found.decode("ascii")]
        )
        # git reads a work tree's .mailmap (whatever it is: told apart by git, not here), the
        # last mailmap.file and mailmap.blob; with none of them it maps no one.
        named_file = bool(self.mailmap_files and self.mailmap_files[-1])
        maps_authors = (
            os.path.lexists(self.root / ".mailmap")
            or (named_file and "mailmap.file=" not in config)
            or any(c.startswith("mailmap.blob=") and c != "mailmap.blob=" for c in config)
        )
        return BlameSettings(
            args, config, digest.hexdigest()[:32], self._shared(usable, contents, config), ignored,
            maps_authors,
        )  # fmt: skip

    def _shared(
        self, usable: list[Path], contents: dict[Path, bytes | None], config: tuple[str, ...]
    ) -> str:
        # What a blame depends on besides history, with no path of this machine in it: the
        # flags, the ignore-revs lists in force, the mailmap files and blob as git reads them.
        # Equal in two clones with the same settings, so their blames can be shared.
        flags = list(_BLAME_FLAGS)
        if self.detect_moves:
            flags.extend(_MOVE_FLAGS)
        digest = hashlib.sha256(("shared-1 " + " ".join(flags)).encode("ascii"))
        for path in usable:
            listed = contents[path] or b""
            digest.update(b"ignore-revs %d\x00%s" % (len(listed), listed))
        mailmaps = [self.root / ".mailmap"]
        if "mailmap.file=" not in config and self.mailmap_files and self.mailmap_files[-1]:
            mailmaps.append(self._path(self.mailmap_files[-1]))
        for path in mailmaps:
            mailmap = contents.get(path)
            digest.update(
                b"mailmap -\x00"
                if mailmap is None
                else b"mailmap %d\x00%s" % (len(mailmap), mailmap)
            )
        for part in config:
            digest.update(part.encode("utf-8", "surrogateescape") + b"\x00")
        return digest.hexdigest()[:32]

    def _mailmap_file(self, contents: dict[Path, bytes | None]) -> tuple[str, ...]:
        # git reads the last mailmap.file, through links and whatever its size: unless it is
        # a file we would read ourselves, git is told there is none.
        value = self.mailmap_files[-1] if self.mailmap_files else ""
        if not value or contents[self._path(value)] is not None:
            return ()
        log.info(
            "mailmap: %s is not a regular file of %d bytes at most; not used",
            value,
            MAX_SETTINGS_FILE,
        )
        return ("mailmap.file=",)

    def _mailmap_blob(self, blob_size: BlobSizer) -> tuple[str, ...]:
        # The blob is named by its id, so git reads the very object whose size was checked.
        value = self.mailmap_blobs[-1] if self.mailmap_blobs else ""
        if not value:
            return ()
        found = blob_size(value) if "\n" not in value and "\x00" not in value else None
        if found is not None and found[1] == "blob" and found[2] <= MAX_SETTINGS_FILE:
            return (f"mailmap.blob={found[0]}",)
        return ("mailmap.blob=",)
