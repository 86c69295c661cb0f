"""Errors every layer and surface may name: a bad setting, a store that does not answer, a
refused request; and the kinds every error is reported as."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum

__all__ = [
    "ConfigError",
    "ErrorKind",
    "Refused",
    "SchemaMissing",
    "StoreUnavailable",
    "WouldWait",
    "may_wait",
    "nonblocking",
]


class ConfigError(ValueError):
    """The configuration file or a setting is invalid; the message names it."""


class StoreUnavailable(RuntimeError):
    """The configured Postgres does not answer; the message says where and what to check."""


class SchemaMissing(StoreUnavailable):
    """The store answers, but without the schema this poimen-memory uses: none, an older one
    (run ``mem db migrate``) or a newer one (upgrade poimen-memory). ``detail`` is the message
    without the store's address, for answers to clients that need not learn it."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"the memory store at {where} {detail}")
        self.detail = detail


class ErrorKind(StrEnum):
    """What kind of failure an error is, whichever surface reports it: each surface maps a
    kind to its own status (exit code, HTTP status, MCP tool error, LSP error code) through
    one small table."""

    INPUT = "input"  # the caller gave a bad value (the error names the field)
    NOT_FOUND = "not_found"  # what was asked for is not here (a repository, a checkout)
    UNAVAILABLE = "unavailable"  # the store (or git) does not answer now; try again later
    REFUSED = "refused"  # the caller may not ask this (a token, a role)
    INTERNAL = "internal"  # a bug: logged with its stack, answered without it


class Refused(Exception):
    """A request the caller may not make (a token limited to other projects, a role without
    a privilege); ``field`` names what decided it."""

    kind = ErrorKind.REFUSED

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class WouldWait(BaseException):
    """Raised, in work run under ``nonblocking()``, where it would wait: for git, the store,
    another thread, or an answer not yet computed and remembered. The caller runs the work
    again where waiting is fine (a worker thread). A BaseException, so that no handler of a
    real failure (``except Exception``, ``except GitError``) takes it for one and answers
    differently."""


_NONBLOCKING: ContextVar[bool] = ContextVar("poimen_nonblocking", default=False)


@contextmanager
def nonblocking() -> Iterator[None]:
    """Within the block, ``may_wait()`` raises WouldWait: the work answers from what is in
    memory or not at all (a language server's event loop answers a warm hover this way,
    with no hand-off to a worker thread)."""
    token = _NONBLOCKING.set(True)
    try:
        yield
    finally:
        _NONBLOCKING.reset(token)


def may_wait() -> None:
    """Called before anything that may wait (a git process, a store connection, a disk
    cache, another thread, a computation to remember): WouldWait under ``nonblocking()``.
    Nothing is changed before it is called, so the work can run again from the start."""
    if _NONBLOCKING.get():
        raise WouldWait
