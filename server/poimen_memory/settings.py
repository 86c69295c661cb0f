"""Settings every surface shares, resolved once: command-line flags, then ``POIMEN_*``
environment variables, then the TOML config file, then defaults (pydantic-settings).

Each value remembers where it came from, so messages can say "(from POIMEN_DSN)"; a bad value
is a ConfigError naming that place and the key. A DSN's secrets (password, ``passfile``,
``sslpassword``) never reach a message: ``redact_dsn`` is the one place that hides them.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote

import platformdirs
import psycopg
from psycopg import conninfo
from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from poimen_memory.domain import ContentError, ProjectId
from poimen_memory.errors import ConfigError

__all__ = [
    "APP",
    "CONFIG_KEYS",
    "Settings",
    "invalid_dsn",
    "is_loopback",
    "load_settings",
    "read_config",
    "redact_dsn",
]

APP = "poimen-memory"
CONFIG_KEYS = (
    "dsn",
    "project",
    "shared_blame_cache",
    "pending_days",
)  # what the config file may set
_FLAGS = {
    "dsn": "--dsn",
    "project": "--project",
    "http_token": "--token",
    "http_token_projects": "--token-project",
    "http_allow_origins": "--allow-origin",
}

_HIDDEN = "***"
# The connection options whose values are secrets (libpq's names).
_CONFIDENTIAL = ("sslpassword", "password", "passfile")
_OPTIONS = "|".join(_CONFIDENTIAL)
# scheme://user:PASSWORD@host: up to the last "@", as a password may hold "@" or "/" unescaped.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:@/\s]*:)(\S*)(?=@)")
# ?password=...&: a secret in a URL's query string ends at the next parameter.
_QUERY_SECRET = re.compile(rf"(?i)([?&](?:{_OPTIONS})=)([^&#\s]*)")
# password=... in key/value form: a quoted value (escapes, maybe unterminated) or a word.
_KEYWORD_SECRET = re.compile(
    rf"(?i)(?<![\w?&])((?:{_OPTIONS})\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|\S)*)"
)
# A token goes in an HTTP header: visible ASCII, no spaces.
_TOKEN = re.compile(r"[\x21-\x7e]+")
# An origin as browsers send it: scheme://host[:port], or "null" (sandboxed pages, files).
_ORIGIN = re.compile(r"(?i)[a-z][a-z0-9+.-]*://[^/?#@\s]+|null")


def _secrets_of(dsn: str) -> set[str]:
    """The secret values a DSN holds, found by parsing it and, as it may not parse, by pattern
    (raw, percent-decoded and unquoted forms: an error message may quote any of them)."""
    found: set[str] = set()
    try:
        params = conninfo.conninfo_to_dict(dsn)
        found.update(str(v) for k, v in params.items() if k in _CONFIDENTIAL and v)
    except psycopg.ProgrammingError:
        pass
    for match in (*_URL_PASSWORD.finditer(dsn), *_QUERY_SECRET.finditer(dsn)):
        found.update((match[2], unquote(match[2])))
    for match in _KEYWORD_SECRET.finditer(dsn):
        value = match[2]
        found.add(value)
        if value.startswith("'"):
            value = value[1:-1] if len(value) > 1 and value.endswith("'") else value[1:]
        found.add(re.sub(r"\\(.)", r"\1", value))
    return {secret for secret in found if secret}


def redact_dsn(text: str, dsn: str | None = None) -> str:
    """``text`` (a DSN, or a message that may quote one) with every password, ``passfile`` and
    ``sslpassword`` hidden: by pattern wherever a DSN appears, and, given the ``dsn`` the message
    is about, wherever one of its secrets appears on its own (libpq quotes bad tokens)."""
    text = _URL_PASSWORD.sub(rf"\1{_HIDDEN}", text)
    text = _QUERY_SECRET.sub(rf"\1{_HIDDEN}", text)
    text = _KEYWORD_SECRET.sub(rf"\1{_HIDDEN}", text)
    for secret in sorted(_secrets_of(dsn) if dsn else (), key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, _HIDDEN)
        else:  # a short one only where quoted, so "ab" does not eat every "ab" of the text
            for quote in "\"'":
                text = text.replace(f"{quote}{secret}{quote}", f"{quote}{_HIDDEN}{quote}")
    return text


def invalid_dsn(dsn: str, exc: Exception) -> str:
    """The message for a DSN libpq cannot parse, its secrets hidden."""
    detail = redact_dsn(" ".join(str(exc).split()), dsn)
    return f"dsn {redact_dsn(dsn, dsn)!r} is not a valid connection string: {detail}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _items(value: object) -> list[str]:
    """A list setting from a flag given several times, or a comma-separated variable."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"expected a list of strings, got {value!r}")
    return [item.strip() for item in items if item.strip()]


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
    http_token_projects: Annotated[tuple[str, ...], NoDecode] = ()
    http_allow_origins: Annotated[tuple[str, ...], NoDecode] = ()
    config: Path = Field(default_factory=_default_config)
    data_dir: Path = Field(default_factory=lambda: platformdirs.user_data_path(APP))
    cache_dir: Path = Field(default_factory=lambda: platformdirs.user_cache_path(APP))
    shared_blame_cache: bool = True
    # How long lines an agent remembered before committing them may wait for the commit.
    pending_days: float = Field(default=14.0, gt=0, le=3650)
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
            raise ValueError(invalid_dsn(dsn, exc)) from None
        return dsn

    @field_validator("http_token", mode="before")
    @classmethod
    def _a_token(cls, token: object) -> str | None:
        if token is None:
            return None
        if not isinstance(token, str) or not token.strip():
            raise ValueError("must not be blank")
        if _TOKEN.fullmatch(token) is None:  # the value is a secret: never echoed
            raise ValueError("must be printable ASCII without spaces (value not shown)")
        return token

    @field_validator("http_token_projects", mode="before")
    @classmethod
    def _projects(cls, projects: object) -> tuple[str, ...]:
        try:
            return tuple(ProjectId(p).value for p in _items(projects))
        except ContentError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("http_allow_origins", mode="before")
    @classmethod
    def _origins(cls, origins: object) -> tuple[str, ...]:
        items = _items(origins)
        for origin in items:
            if _ORIGIN.fullmatch(origin.rstrip("/")) is None:
                raise ValueError(
                    f"expected an origin such as http://localhost:3000, got {origin!r}"
                )
        return tuple(origin.rstrip("/").lower() for origin in items)

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
