"""What a lookup can fail with: bad input (naming the field) or no answer to be had."""

from __future__ import annotations

from poimen_memory.domain import ContentError

__all__ = ["LookupFailed", "LookupInputError", "NotInRepository"]


class LookupInputError(ContentError):
    """A request field with a bad value; the message names the field and the value."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


class LookupFailed(RuntimeError):
    """The lookup could not be answered (no checkout of the repository, git failed)."""


class NotInRepository(LookupFailed, LookupInputError):
    """A path given by the user that is no file or directory of a git work tree: bad input
    (exit 2, HTTP 422), and still a LookupFailed where a hover simply finds nothing."""

    def __init__(self, field_name: str, message: str) -> None:
        LookupInputError.__init__(self, field_name, message)
