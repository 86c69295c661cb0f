"""Errors every layer and surface may name: a bad setting, a store that does not answer."""

from __future__ import annotations

__all__ = ["ConfigError", "StoreUnavailable"]


class ConfigError(ValueError):
    """The configuration file or a setting is invalid; the message names it."""


class StoreUnavailable(RuntimeError):
    """The configured Postgres does not answer; the message says where and what to check."""
