"""The CLI's own error: bad usage, printed as one line with exit status 2."""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""
