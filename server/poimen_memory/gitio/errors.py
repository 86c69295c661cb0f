"""The defined outcomes of git operations that are not a result. Nothing else leaves gitio."""

from __future__ import annotations

__all__ = [
    "BinaryFile",
    "EmptyRepository",
    "GitError",
    "GitFailed",
    "GitNotFound",
    "NotARepository",
    "OutsideRepository",
    "UnknownCommit",
    "UnsafeArgument",
    "Untracked",
]


class GitError(Exception):
    """Base of every error gitio raises; the message is fit to show a user."""


class GitNotFound(GitError):
    """The git executable is not on PATH."""


class NotARepository(GitError):
    """The path is not inside a git work tree."""


class OutsideRepository(GitError):
    """The path lies outside the repository's work tree (or escapes it through a link)."""


class EmptyRepository(GitError):
    """The repository has no commits yet: nothing to blame."""


class Untracked(GitError):
    """The file is not in the revision asked about (untracked, new or deleted)."""


class BinaryFile(GitError):
    """The file is binary: lines mean nothing there."""


class UnknownCommit(GitError):
    """A commit id that the repository does not have (or an ambiguous prefix)."""


class UnsafeArgument(GitError, ValueError):
    """A value that git could read as an option, or that is not what it claims to be."""


class GitFailed(GitError):
    """git ran and failed for another reason. The message says so in our words, never in
    git's (its stderr may quote a file it read); ``cause`` is what we recognised, if anything
    (``"no such path"``, ``"bad revision"``, ...)."""

    def __init__(self, message: str, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause
