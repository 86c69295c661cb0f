"""Shared fixtures: a fresh database per test module on the machine's Postgres.

The admin connection comes from ``POIMEN_TEST_ADMIN_DSN`` (default: the local server as
``postgres`` over TCP). Each module gets its own database, dropped when the module ends.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import conninfo, sql

from poimen_memory.domain import ProjectId
from poimen_memory.store import Store, migrate

ADMIN_DSN = os.environ.get("POIMEN_TEST_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def _dsn_for(dbname: str) -> str:
    params = conninfo.conninfo_to_dict(ADMIN_DSN)
    params["dbname"] = dbname
    return conninfo.make_conninfo(**params)


def create_database(label: str) -> tuple[str, str]:
    """Create an empty database; returns (name, dsn)."""
    safe = re.sub(r"[^a-z0-9]+", "_", label.lower())[-30:].strip("_")
    name = f"poimen_t_{safe}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, _dsn_for(name)


def drop_database(name: str) -> None:
    """Drop a test database, disconnecting whoever is still on it."""
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
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
