"""The CLI's own errors: bad usage, printed as one line with exit status 2; and a request to
stop (SIGTERM, SIGHUP), raised the way SIGINT raises KeyboardInterrupt."""

from __future__ import annotations

import signal

from poimen_memory.errors import ErrorKind

__all__ = ["Terminated", "UsageError"]


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""

    kind = ErrorKind.INPUT


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where SIGINT raises KeyboardInterrupt, so every command
    shuts down the way it does on Ctrl-C (exit status 128 + the signal's number)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
