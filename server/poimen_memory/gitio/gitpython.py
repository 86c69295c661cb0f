"""GitPython bound to a GitRunner: the same git, the same fixed environment, every process
counted. Imported on first use: GitPython takes ~50 ms to import and runs ``git version``.

Its configuration reader is hardened too: a repository's configuration may include any file
(``[include] path = /dev/zero``, a FIFO, another user's secret), so only regular files of
bounded size are read, and a file that does not parse is named, never quoted.
"""

from __future__ import annotations

import configparser
import logging
import os
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from io import BufferedReader
from pathlib import Path
from typing import IO, Any, cast

from cachetools import LRUCache

from poimen_memory.gitio.errors import GitFailed, NotARepository
from poimen_memory.gitio.files import MAX_SETTINGS_FILE, bounded_regular_file
from poimen_memory.gitio.gitfiles import check_repository_files
from poimen_memory.gitio.refs import Stamps, stamps_of
from poimen_memory.gitio.runner import (
    GitRunner,
    bound_memory,
    bound_process,
    pinned_environment,
)

log = logging.getLogger(__name__)

# A section git reads as a conditional include: ``includeIf`` and whitespace (a tab too).
_INCLUDE_IF = re.compile(r"includeif\s")


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# Without git on PATH GitPython's import raises ImportError (we say GitNotFound on use); the
# ``git version`` it runs on import gets the environment every git of ours gets.
with _environment({"GIT_PYTHON_REFRESH": "quiet", **pinned_environment(os.environ)}):
    import git
    from git.refs.symbolic import SymbolicReference
    from git.types import Lit_config_levels, PathLike

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
        # Under the memory bound of every git of ours: set from outside for the persistent
        # cat-file processes (started often, by a process that may be large), in the child
        # for the rest (GitPython waits for them before it returns).
        persistent = bool(kwargs.get("as_process"))
        if not persistent:
            kwargs["preexec_fn"] = bound_memory
        else:
            # A reader that lives for seconds keeps the allocator's defaults (the user's
            # tunables alone): the heap settings for blames would let it hold 32 MiB freed.
            kwargs["env"]["GLIBC_TUNABLES"] = os.environ.get("GLIBC_TUNABLES", "")
        try:
            done = super().execute(argv, *args, **kwargs)
        except git.exc.GitCommandNotFound:
            raise self.runner.not_found() from None
        if persistent and isinstance(getattr(done, "proc", None), subprocess.Popen):
            bound_process(done.proc)
        return done


def _readable(path: str) -> bool:
    """Whether the configuration file ``path`` is there to be read. One that is there but is
    not a regular file of bounded size is an error: git would wait on it (a FIFO) or choke
    on it (``/dev/zero``), so no git may run on this configuration."""
    if not os.path.exists(path):
        return False  # a missing file (or a dangling link) is skipped, as git does
    if bounded_regular_file(path):
        return True
    raise GitFailed(
        f"git configuration: {path} is not a regular file of {MAX_SETTINGS_FILE} bytes at most",
        "unreadable git configuration",
    )


class _ConfigReader(git.GitConfigParser):
    """GitPython's configuration reader, reading regular files of bounded size only."""

    _reading = ""
    includes = False  # whether a file read includes another (then it is not shared)

    def read(self) -> None:  # type: ignore[override]
        """Read the configuration files; GitFailed naming the file if one does not parse."""
        try:
            super().read()
        except (configparser.Error, UnicodeDecodeError) as exc:
            log.debug("git configuration: %s", exc)  # the parser's words quote the line
            source = getattr(exc, "source", None) or self._reading
            raise GitFailed(
                f"unreadable git configuration in {source}", "unreadable git configuration"
            ) from None

    def _read(self, fp: BufferedReader | IO[bytes], fpname: str) -> None:
        self._reading = str(fpname)
        super()._read(fp, fpname)

    def _included_paths(self) -> list[tuple[str, str]]:
        # Made absolute as GitPython would (from the file being read), to be checked first.
        # Every include is checked, whatever its condition: GitPython's matching is not
        # git's (``onbranch:feature/`` matches ``feature/x`` in git only), and a file that
        # would make git wait or choke refuses the configuration whether or not it applies.
        base = os.path.dirname(self._reading)

        def absolute(value: str) -> str:
            return os.path.normpath(os.path.join(base, os.path.expanduser(value)))

        for section in self.sections():
            name = section.strip().lower()
            if name == "include" or _INCLUDE_IF.match(name):
                self.includes = True
                for key, values in self._sections[section].items_all():
                    for value in values if key.lower() == "path" else ():
                        if isinstance(value, str) and value:
                            _readable(absolute(value))
        return [(key, absolute(value)) for key, value in super()._included_paths()]


class _Repo(git.Repo):
    GitCommandWrapperType = BoundGit

    def _config_reader(
        self, config_level: Lit_config_levels | None = None, git_dir: PathLike | None = None
    ) -> git.GitConfigParser:
        levels = self.config_level if config_level is None else (config_level,)
        files = [self._get_config_path(level, git_dir) for level in levels if level]
        if "repository" in levels:
            # git reads it too when extensions.worktreeConfig is set, includes and all.
            files.append(os.path.join(git_dir or self.git_dir, "config.worktree"))
        readable = tuple(p for p in files if _readable(p))
        key = (readable, tuple(stamps_of(p) for p in readable))
        with _READERS_LOCK:
            known = _READERS.get(key)
        if known is not None:
            return known
        reader = _ConfigReader(list(readable), read_only=True, repo=self)
        reader.read()
        if not reader.includes:
            # (A reader keeps its repository for conditional includes only: one shared,
            # without any, keeps no repository open.)
            reader._repo = None
            with _READERS_LOCK:
                _READERS[key] = reader
        return reader


_READERS: LRUCache[tuple[tuple[str, ...], tuple[Stamps, ...]], _ConfigReader] = LRUCache(16)
"""Configuration readers already read, by their files and what lstat and stat say of each (a
link and the file it leads to): GitPython
asks for one several times per repository it opens (a hook's worker opened them about six
times a session), and a read-only reader of the same unchanged files reads the same. One
whose files include others (whose values may depend on the repository's branch) is read
anew each time."""
_READERS_LOCK = threading.Lock()


def open_repository(start: Path, runner: GitRunner) -> git.Repo:
    """The non-bare repository whose work tree holds the directory ``start``."""
    check_repository_files(start)  # before GitPython opens any of them
    try:
        # No $VAR expansion: a directory name is data, not a template.
        repo = _Repo(start, search_parent_directories=True, expand_vars=False)
    except (git.exc.InvalidGitRepositoryError, git.exc.NoSuchPathError, OSError):
        raise NotARepository(f"{start} is not inside a git work tree") from None
    if repo.working_tree_dir is None:
        raise NotARepository(f"{start} is not inside a git work tree (bare repository?)")
    cast(BoundGit, repo.git).runner = runner
    # Every file the configuration includes, checked now (the reader refuses a bad one),
    # before any git reads them: an include of a FIFO would make every git wait.
    repo.config_reader().read()
    return repo
