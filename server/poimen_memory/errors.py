"""Errors every layer and surface may name: a bad setting, a store that does not answer, a
refused request; and the kinds every error is reported as."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ConfigError", "ErrorKind", "Refused", "SchemaMissing", "StoreUnavailable"]


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
