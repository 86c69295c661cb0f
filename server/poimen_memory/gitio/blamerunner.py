"""The blames of one repository: its blame settings, and ``git blame`` run with them.

The blame configuration is read once (until forget()); the settings it gives are remembered
while the files it names (.mailmap, ignore-revs files) are unchanged, watched with lstat, so
an edited .mailmap counts from the next blame on. GitRepo holds one BlameRunner and answers
every blame question through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from poimen_memory.domain import CommitSha
from poimen_memory.errors import may_wait
from poimen_memory.gitio.blame import Blame, BlameEntry
from poimen_memory.gitio.blameconfig import BlameConfig, BlameSettings
from poimen_memory.gitio.blamerun import LineRanges, blame_args, mark_shallow, run_blame
from poimen_memory.gitio.errors import BinaryFile, GitError
from poimen_memory.gitio.files import read_regular_file
from poimen_memory.gitio.objects import ObjectReader
from poimen_memory.gitio.refs import FileStamp
from poimen_memory.gitio.runner import check_not_option

if TYPE_CHECKING:
    import git

    from poimen_memory.gitio.repo import GitRepo

__all__ = ["BlameRunner", "looks_binary"]

_NUL_PROBE = 8000  # git's own heuristic: a NUL in the first 8000 bytes means binary


def looks_binary(data: bytes) -> bool:
    """git's heuristic: a NUL byte near the start."""
    return b"\x00" in data[:_NUL_PROBE]


class BlameRunner:
    """Blames files of ``repo`` with the settings its configuration gives.

    ``repo`` is read on every use (its runner may be replaced); ``gp`` is its GitPython
    repository, whose configuration is read, and ``objects`` sizes the blobs it names.
    """

    def __init__(self, repo: GitRepo, gp: git.Repo, objects: ObjectReader) -> None:
        self._repo = repo
        self._gp = gp
        self._objects = objects
        self._config: BlameConfig | None = None
        self._settings: tuple[tuple[FileStamp, ...], BlameSettings] | None = None

    def forget(self) -> None:
        """Read the blame configuration and the files it names from disk again."""
        self._config = None
        self._settings = None

    def settings(self) -> BlameSettings:
        """The settings every blame runs with: flags, the pinned mailmap, ignored revisions
        and the fingerprints of all three (recomputed when a file they name changes)."""
        config, memo = self._config, self._settings
        if config is not None and memo is not None and memo[0] == config.stamps():
            return memo[1]
        may_wait()  # the configuration, or the files it names, are read
        if config is None:
            repo = self._repo
            config = BlameConfig.read(repo.root, self._gp.config_reader(), repo.detect_moves)
            self._config = config
        stamps = config.stamps()
        settings = config.settings(self._blob_size)
        self._settings = (stamps, settings)
        return settings

    def _blob_size(self, name: str) -> tuple[str, str, int] | None:
        try:
            return self._objects.sized_header(name)
        except GitError:
            return None

    def args(
        self,
        rev: CommitSha,
        path: str,
        lines: LineRanges | None,
        *,
        incremental: bool = False,
        since: CommitSha | None = None,
    ) -> list[str]:
        """The argument list of a blame of ``path`` at ``rev``: of the whole file, one range
        or several (``incremental``: entries as git finds them; ``since``: no further back
        than that commit)."""
        check_not_option("file", path)
        return blame_args(
            self.settings().args, rev, path, lines, incremental=incremental, since=since
        )

    def by_diff(self) -> bool:
        """Whether blame attributes every line a (non-merge) commit added to that commit: no
        ignore-revs in force and no move detection."""
        return not self._repo.detect_moves and not any(
            a.startswith("--ignore-revs-file=") for a in self.settings().args
        )

    def blame(
        self,
        path: str,
        rev: CommitSha,
        lines: LineRanges | None,
        on_entry: Callable[[BlameEntry], None] | None = None,
        since: CommitSha | None = None,
    ) -> Blame:
        """Blame ``path`` as of ``rev`` (whole file, or only ``lines``), parsed as it streams;
        BinaryFile for a whole file that is binary. A whole file is blamed incrementally:
        git reports lines as it finds them (each entry passed to ``on_entry``, if given),
        so they are parsed while git works rather than all after it, and the file is then
        looked at for binary content (the lines' text is not read). ``since``: git walks no
        further back than that commit (its lines boundary)."""
        repo = self._repo
        incremental = lines is None
        args = self.args(rev, path, lines, incremental=incremental, since=since)
        config = self.settings().config
        result = run_blame(
            repo.runner, repo.root, args, config, path, rev,
            complete=lines is None, on_entry=on_entry if incremental else None,
        )  # fmt: skip
        if lines is None and (incremental or not result.lines) and self._looks_binary(rev, path):
            raise BinaryFile(f"{path} is a binary file")
        shallow = read_regular_file(repo.root, (repo.common_dir or repo.root / ".git") / "shallow")
        return mark_shallow(result, shallow)

    def _looks_binary(self, rev: CommitSha, path: str) -> bool:
        try:
            return looks_binary(self._repo.blob(rev, path))
        except GitError:
            return False
