"""Errors every layer and surface may name: a bad setting, a store that does not answer."""

from __future__ import annotations

__all__ = ["ConfigError", "SchemaMissing", "StoreUnavailable"]


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
