"""HEAD's commit, read through GitPython's refs and remembered until the files behind it change.

A warm hover resolves HEAD on every request: a few ``stat`` calls (HEAD, the branch it names,
packed-refs) stand in for reading and parsing them. git replaces these files by renaming a new
one over them, so a commit, a checkout or ``pack-refs`` always changes what ``stat`` says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from poimen_memory.domain import CommitSha, ContentError
from poimen_memory.errors import may_wait
from poimen_memory.gitio.gitfiles import check_ref_files

if TYPE_CHECKING:
    import git

__all__ = ["FileStamp", "HeadReader", "Stamps", "stamp", "stamps_of"]

FileStamp = tuple[int, int, int, int] | None


def stamp(path: str, *, follow: bool = False) -> FileStamp:
    """What ``lstat`` says of ``path`` (inode, size, modification and change times), or None;
    ``follow``: what ``stat`` says (of the file a link leads to)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


Stamps = tuple[FileStamp, FileStamp]


def stamps_of(path: str) -> Stamps:
    """What ``lstat`` and ``stat`` say of ``path``: the file, and the one a link leads to
    (an edit of a linked file changes nothing ``lstat`` sees)."""
    return stamp(path), stamp(path, follow=True)


@dataclass(frozen=True, slots=True)
class _Memo:
    ref: str | None
    stamps: tuple[FileStamp, ...]
    sha: CommitSha


class HeadReader:
    """Resolves HEAD of one repository, in process."""

    def __init__(self, repo: git.Repo, git_dir: Path, common_dir: Path) -> None:
        self._repo = repo
        self._git_dir = str(git_dir)
        self._common_dir = str(common_dir)
        self._memo: _Memo | None = None

    def commit(self) -> CommitSha | None:
        """The commit HEAD points at; None when GitPython cannot tell (an unborn branch,
        reftable, a broken ref): the caller asks git."""
        memo = self._memo
        if memo is not None and self._stamps(memo.ref) == memo.stamps:
            return memo.sha
        may_wait()  # the ref files are read again (packed-refs may be large)
        from poimen_memory.gitio.gitpython import SymbolicReference

        head_path = os.path.join(self._git_dir, "HEAD")
        head_before = stamp(head_path)
        root = Path(self._repo.working_tree_dir or self._git_dir)
        check_ref_files(root, head_path)  # a few stat calls, when the files changed only
        try:
            head = self._repo.head
            ref = None if head.is_detached else str(head.reference.path)
            if ref is not None:
                check_ref_files(root, *self._files(ref))
            # A branch that is itself symbolic would need its target watched too: not memoized.
            direct = ref is None or head.reference.is_detached
            before = self._stamps(ref)
            sha = CommitSha(SymbolicReference.dereference_recursive(self._repo, "HEAD"))
        except (ValueError, TypeError, OSError, ContentError):
            return None
        after = self._stamps(ref)
        if direct and before == after and before[0] == head_before:
            self._memo = _Memo(ref, after, sha)
        return sha

    def forget(self) -> None:
        """Read HEAD from disk on the next call."""
        self._memo = None

    def _files(self, ref: str) -> tuple[str, ...]:
        """The files GitPython reads to resolve the branch ``ref``."""
        return (
            os.path.join(self._git_dir, ref),
            os.path.join(self._common_dir, ref),
            os.path.join(self._common_dir, "packed-refs"),
        )

    def _stamps(self, ref: str | None) -> tuple[FileStamp, ...]:
        head = stamp(os.path.join(self._git_dir, "HEAD"))
        if ref is None:
            return (head,)
        shared = self._common_dir != self._git_dir  # a linked work tree
        return (
            head,
            stamp(os.path.join(self._git_dir, ref)),
            stamp(os.path.join(self._common_dir, ref)) if shared else None,
            stamp(os.path.join(self._common_dir, "packed-refs")),
        )
