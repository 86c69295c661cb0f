"""Settings every surface shares, resolved once: command-line flags, then ``POIMEN_*``
environment variables, then the TOML config file, then defaults (pydantic-settings).

Each value remembers where it came from, so messages can say "(from POIMEN_DSN)"; a bad value
is a ConfigError naming that place and the key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import platformdirs
import psycopg
from psycopg import conninfo
from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from poimen_memory.domain import ContentError, ProjectId
from poimen_memory.errors import ConfigError

__all__ = ["APP", "CONFIG_KEYS", "Settings", "load_settings", "read_config"]

APP = "poimen-memory"
CONFIG_KEYS = ("dsn", "project")  # what the config file may set
_FLAGS = {"dsn": "--dsn", "project": "--project", "http_token": "--token"}


def _default_config() -> Path:
    return platformdirs.user_config_path(APP) / "config.toml"


def read_config(path: Path) -> dict[str, Any]:
    """The config file's table, or ``{}`` when there is none; invalid TOML names the file."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot be read: {exc.strerror}") from None


class _Labelled(PydanticBaseSettingsSource):
    """A source (a mapping, or another source) that notes which keys it set, and where."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        values: Mapping[str, Any] | PydanticBaseSettingsSource,
        label: Callable[[str], str],
        origins: dict[str, str],
    ) -> None:
        super().__init__(settings_cls)
        self._values = values
        self._label = label
        self._origins = origins

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ answers for every field at once

    def __call__(self) -> dict[str, Any]:
        source = self._values
        values = source() if isinstance(source, PydanticBaseSettingsSource) else dict(source)
        values = {k: v for k, v in values.items() if v is not None}
        for key in values:
            self._origins.setdefault(key, self._label(key))  # sources run highest first
        return values


class Settings(BaseSettings):
    """The shared settings. ``origins`` says where each value that is set came from."""

    model_config = SettingsConfigDict(
        env_prefix="POIMEN_", env_ignore_empty=True, extra="ignore", frozen=True
    )

    dsn: str | None = None
    project: str | None = None
    http_token: str | None = None
    config: Path = Field(default_factory=_default_config)
    data_dir: Path = Field(default_factory=lambda: platformdirs.user_data_path(APP))
    cache_dir: Path = Field(default_factory=lambda: platformdirs.user_cache_path(APP))
    origins: dict[str, str] = Field(default_factory=dict, exclude=True)

    @field_validator("dsn", mode="before")
    @classmethod
    def _a_connection_string(cls, dsn: object) -> str | None:
        if dsn is None:
            return None
        if not isinstance(dsn, str) or not dsn.strip():
            raise ValueError(f"dsn must be a non-empty string, got {dsn!r}")
        try:
            conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            detail = " ".join(str(exc).split())
            raise ValueError(f"dsn {dsn!r} is not a valid connection string: {detail}") from None
        return dsn

    @field_validator("project", mode="before")
    @classmethod
    def _a_project(cls, project: object) -> str | None:
        if project is None:
            return None
        try:
            return ProjectId(project).value  # type: ignore[arg-type]  # checked by ProjectId
        except ContentError as exc:
            raise ValueError(str(exc)) from None

    def origin(self, key: str) -> str | None:
        """Where ``key`` was set (``--dsn``, ``POIMEN_DSN``, ``config file PATH``), or None."""
        return self.origins.get(key)


def load_settings(flags: Mapping[str, Any] | None = None) -> Settings:
    """Resolve the settings: ``flags`` (command-line values, None for unset), then the
    ``POIMEN_*`` environment, then the config file (``POIMEN_CONFIG`` or the default path),
    then defaults. A bad value is a ConfigError naming where it was set."""
    origins: dict[str, str] = {}

    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            from_env = env_settings()
            path = Path(from_env.get("config") or _default_config())
            table = read_config(path)
            in_file = {k: v for k, v in table.items() if k in CONFIG_KEYS}
            return (
                _Labelled(settings_cls, flags or {}, lambda k: _FLAGS.get(k, k), origins),
                _Labelled(settings_cls, from_env, lambda k: f"POIMEN_{k.upper()}", origins),
                _Labelled(settings_cls, in_file, lambda _: f"config file {path}", origins),
            )

    try:
        loaded = _Loaded()
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = str(error["loc"][0]) if error["loc"] else "settings"
        cause = (error.get("ctx") or {}).get("error")
        message = str(cause) if isinstance(cause, ValueError) else f"{key} {error['msg'].lower()}"
        raise ConfigError(f"{origins.get(key, key)}: {message}") from None
    return Settings.model_construct(**{**dict(loaded), "origins": origins})
