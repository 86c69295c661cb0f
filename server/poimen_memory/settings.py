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
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args
from urllib.parse import unquote

import platformdirs
import psycopg
from psycopg import conninfo
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
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
    "LOG_LEVELS",
    "MARKUP",
    "BlameSection",
    "CodeLensSection",
    "HoverSection",
    "Settings",
    "invalid_dsn",
    "is_loopback",
    "load_settings",
    "read_config",
    "redact_dsn",
]

APP = "poimen-memory"
# What the config file may set (groups as tables: ``[blame] shared_cache = false``).
CONFIG_KEYS = (
    "dsn",
    "project",
    "repo",
    "pending_days",
    "hover",
    "code_lens",
    "blame",
    "log_level",
)
_GROUPS = frozenset({"hover", "code_lens", "blame"})
# The sources ``load_settings`` reads, while it runs (the model alone reads none).
_Sources = Callable[
    [type[BaseSettings], PydanticBaseSettingsSource], tuple[PydanticBaseSettingsSource, ...]
]
_LOADING: ContextVar[_Sources | None] = ContextVar("_LOADING", default=None)
# Keys of earlier versions, and what they are now.
_RENAMED = {"shared_blame_cache": "[blame] shared_cache"}
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
        for key in _dotted(values):
            self._origins.setdefault(key, self._label(key))  # sources run highest first
        return values


def _dotted(values: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """The keys of ``values``, a group's keys as ``group.key``."""
    for key, value in values.items():
        if isinstance(value, Mapping) and key in _GROUPS and not prefix:
            yield from _dotted(value, f"{key}.")
        else:
            yield f"{prefix}{key}"


def _env_name(key: str) -> str:
    return "POIMEN_" + key.upper().replace(".", "__")


LogLevel = Literal["error", "warning", "info", "debug"]
Markup = Literal["auto", "markdown", "plaintext"]
LOG_LEVELS: Final = get_args(LogLevel)
MARKUP: Final = get_args(Markup)


class _Section(BaseModel):
    """A group of settings (``hover``, ``code_lens``, ``blame``): a table in the config file,
    ``POIMEN_<GROUP>__<KEY>`` in the environment, ``poimenMemory.<group>.<key>`` in editors."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class HoverSection(_Section):
    """How hovers look."""

    enabled: bool = Field(default=True, description="Show memories on hover.")
    excerpt_length: int = Field(
        default=400, ge=40, le=20_000, description="Characters of each memory's text a hover shows."
    )
    markup: Markup = Field(
        default="auto",
        description="Hover markup: `markdown`, `plaintext`, or `auto` (what the client takes).",
    )
    history: int = Field(
        default=0,
        ge=0,
        le=10,
        description="Also show memories of this many earlier versions of the line (0: off).",
    )


class CodeLensSection(_Section):
    """What code lenses show."""

    enabled: bool = Field(
        default=True, description="Show a lens above each block of lines with memories."
    )
    file_summary: bool = Field(default=True, description="Show the file's total at its top.")


class BlameSection(_Section):
    """What is blamed, and how blames are shared."""

    max_file_bytes: int = Field(
        default=2_000_000, ge=1, le=1_000_000_000, description="Largest file (bytes) hovers blame."
    )
    max_file_lines: int = Field(
        default=100_000, ge=1, le=100_000_000, description="Largest file (lines) hovers blame."
    )
    detect_moves: bool = Field(
        default=False, description="Follow lines moved or copied between files (`git blame -M -C`)."
    )
    shared_cache: bool = Field(
        default=True,
        description="Share whole-file blames through the store, so a teammate's fresh clone "
        "answers its first hover from them.",
    )


class Settings(BaseSettings):
    """The one settings model of every surface. ``origins`` says where each value that is set
    came from (dotted keys for groups: ``blame.shared_cache``)."""

    model_config = SettingsConfigDict(
        env_prefix="POIMEN_",
        env_nested_delimiter="__",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
    )

    dsn: str | None = Field(
        default=None,
        description="Postgres connection string of the memory store; unset: the embedded store "
        "under `data_dir`.",
    )
    project: str | None = Field(
        default=None,
        description="The project memories are stored in and looked up from; unset: derived from "
        "the repository's identity (`github.com/org/app` -> `app`).",
    )
    repo: str | None = Field(
        default=None,
        description="Repository identity to record and look up instead of the one derived from "
        "the `origin` remote.",
    )
    pending_days: float = Field(
        default=14.0,
        gt=0,
        le=3650,
        description="Days lines not committed yet (remembered, or written in an agent's "
        "session) wait for their commit.",
    )
    hover: HoverSection = Field(default_factory=HoverSection, description=HoverSection.__doc__)
    code_lens: CodeLensSection = Field(
        default_factory=CodeLensSection, description=CodeLensSection.__doc__
    )
    blame: BlameSection = Field(default_factory=BlameSection, description=BlameSection.__doc__)
    log_level: LogLevel = Field(default="warning", description="The language server's log level.")
    http_token: str | None = Field(
        default=None,
        description="Bearer token `mem http` and `mem mcp --http` require on every request "
        "(environment or flag only: never in the config file).",
    )
    http_token_projects: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Projects the HTTP token may ask about (comma-separated; default: any).",
    )
    http_allow_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), description="Web page origins let in to the HTTP API (CORS; comma-separated)."
    )
    http_header_timeout: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Seconds `mem http` and `mem mcp --http` give a request's line and headers "
        "to arrive whole, from the connection's first byte (or its first after the previous "
        "answer); a client slower than that is disconnected.",
    )
    http_max_connections: int = Field(
        default=256,
        ge=1,
        le=100_000,
        description="Connections `mem http` and `mem mcp --http` keep open at most (fewer if the "
        "limit on open files needs it); one more closes the one that has waited longest for "
        "its headers, or is answered 503 when every one is in the middle of a request.",
    )
    mcp_max_sessions: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="MCP sessions `mem mcp --http` keeps open at most; an `initialize` beyond "
        "that is answered 503 until one ends or is closed for being idle.",
    )
    mcp_session_idle_timeout: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="Seconds an MCP session of `mem mcp --http` may go without a request before "
        "it is closed (its client starts a new one).",
    )
    config: Path = Field(
        default_factory=_default_config,
        description="The TOML config file (environment only).",
    )
    data_dir: Path = Field(
        default_factory=lambda: platformdirs.user_data_path(APP),
        description="Where the embedded store and the demo live.",
    )
    embedded_root_dir: Path = Field(
        default=Path("/var/lib/poimen-memory"),
        description="Run as root only: where the embedded store keeps its data when the "
        "`pgserver` user Postgres runs as cannot reach `data_dir` (and a copy of Postgres's "
        "programs when it cannot reach the installed ones). Created here, open to others; "
        "the mode of a directory not created here is never changed.",
    )
    cache_dir: Path = Field(
        default_factory=lambda: platformdirs.user_cache_path(APP),
        description="Where the local blame cache and hook logs live.",
    )
    origins: dict[str, str] = Field(default_factory=dict, exclude=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """``Settings(...)`` and ``model_validate`` take only what they are given (defaults
        for the rest): ``load_settings`` is the one place that reads the environment and the
        config file (it names the sources while it runs)."""
        loading = _LOADING.get()
        return (init_settings,) if loading is None else loading(settings_cls, env_settings)

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

    @property
    def blame_cache_path(self) -> Path:
        """The local blame cache's file, in ``cache_dir``."""
        return self.cache_dir / "blame.sqlite3"

    def origin(self, key: str) -> str | None:
        """Where ``key`` was set (``--dsn``, ``POIMEN_DSN``, ``config file PATH``), or None."""
        return self.origins.get(key)


def _check_keys(table: Mapping[str, Any], path: Path) -> None:
    """Every key of the config file is one it may set; ConfigError names the first that is
    not (and what a renamed key is called now)."""
    for key, value in table.items():
        if key in _RENAMED:
            raise ConfigError(f"config file {path}: {key} is now {_RENAMED[key]}")
        if key not in CONFIG_KEYS:
            known = ", ".join(CONFIG_KEYS)
            raise ConfigError(f"config file {path}: unknown key {key!r} (known: {known})")
        if key in _GROUPS and not isinstance(value, Mapping):
            raise ConfigError(f"config file {path}: {key} must be a table ([{key}])")


def load_settings(flags: Mapping[str, Any] | None = None) -> Settings:
    """Resolve the settings: ``flags`` (command-line values, None for unset), then the
    ``POIMEN_*`` environment, then the config file (``POIMEN_CONFIG`` or the default path),
    then defaults. A bad value is a ConfigError naming where it was set."""
    origins: dict[str, str] = {}

    def sources(
        settings_cls: type[BaseSettings], env_settings: PydanticBaseSettingsSource
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        from_env = env_settings()
        path = Path(from_env.get("config") or _default_config())
        table = read_config(path)
        _check_keys(table, path)
        in_file = {k: v for k, v in table.items() if k in CONFIG_KEYS}
        return (
            _Labelled(settings_cls, flags or {}, lambda k: _FLAGS.get(k, k), origins),
            _Labelled(settings_cls, from_env, _env_name, origins),
            _Labelled(settings_cls, in_file, lambda _: f"config file {path}", origins),
        )

    loading = _LOADING.set(sources)
    try:
        loaded = Settings()
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = [str(p) for p in error["loc"]]
        key = ".".join(loc[:2] if loc and loc[0] in _GROUPS else loc[:1]) or "settings"
        cause = (error.get("ctx") or {}).get("error")
        message = str(cause) if isinstance(cause, ValueError) else f"{key} {error['msg'].lower()}"
        raise ConfigError(f"{origins.get(key, key)}: {message}") from None
    finally:
        _LOADING.reset(loading)
    return Settings.model_construct(**{**dict(loaded), "origins": origins})
