"""Numbered migrations: applied once, recorded, idempotent, guarded against edits."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from poimen_memory.store import migrations as migrate_module
from poimen_memory.store.migrations import Migration, MigrationError, available, migrate

from .conftest import create_database, drop_database


@pytest.fixture
def fresh_dsn() -> Iterator[str]:
    name, dsn = create_database("migrations")
    try:
        yield dsn
    finally:
        drop_database(name)


def schema_snapshot(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Tables, columns, constraints, indexes and recorded versions of the public schema."""
    with psycopg.connect(dsn) as conn:
        return {
            "columns": conn.execute(
                """SELECT table_name, column_name, data_type, is_nullable, column_default,
                          is_generated, generation_expression
                   FROM information_schema.columns WHERE table_schema = 'public'
                   ORDER BY table_name, ordinal_position"""
            ).fetchall(),
            "constraints": conn.execute(
                """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
                   FROM pg_constraint WHERE connamespace = 'public'::regnamespace
                   ORDER BY 1, 2"""
            ).fetchall(),
            "indexes": conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
            ).fetchall(),
            "versions": conn.execute(
                "SELECT version, name, checksum, applied_at FROM poimen_schema_version ORDER BY 1"
            ).fetchall(),
        }


def test_migrate_twice_leaves_identical_schema(fresh_dsn: str) -> None:
    with psycopg.connect(fresh_dsn) as conn:
        applied = migrate(conn)
    assert [m.version for m in applied] == [m.version for m in available()]
    first = schema_snapshot(fresh_dsn)
    assert {c[0] for c in first["columns"]} >= {"memory_node", "memory_edge", "git_anchor"}
    with psycopg.connect(fresh_dsn) as conn:
        assert migrate(conn) == []
    assert schema_snapshot(fresh_dsn) == first


def test_concurrent_migrations_apply_once(fresh_dsn: str) -> None:
    results: list[list[Migration]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with psycopg.connect(fresh_dsn) as conn:
                results.append(migrate(conn))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(len(r) for r in results) == [0, 0, len(available())]


def test_edited_migration_is_refused(fresh_dsn: str) -> None:
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        migrate(conn)
        conn.execute("UPDATE poimen_schema_version SET checksum = 'edited' WHERE version = 1")
        with pytest.raises(MigrationError, match="0001_initial was changed after it was applied"):
            migrate(conn)


def test_newer_database_is_refused(fresh_dsn: str) -> None:
    with psycopg.connect(fresh_dsn, autocommit=True) as conn:
        migrate(conn)
        conn.execute("INSERT INTO poimen_schema_version VALUES (999, 'future', 'x')")
        with pytest.raises(MigrationError, match="schema version 999, newer than"):
            migrate(conn)


def test_failed_migration_leaves_nothing(fresh_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = Migration(2, "broken", "CREATE TABLE half_done (x int); SELECT 1 / 0;")
    monkeypatch.setattr(migrate_module, "available", lambda: [*available()[:1], broken])
    with psycopg.connect(fresh_dsn) as conn, pytest.raises(psycopg.errors.DivisionByZero):
        migrate(conn)
    with psycopg.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT to_regclass('half_done')").fetchone() == (None,)
        versions = conn.execute("SELECT version FROM poimen_schema_version").fetchall()
    assert versions == [(1,)]


def test_shipped_migrations_are_numbered_without_gaps() -> None:
    versions = [m.version for m in available()]
    assert versions == list(range(1, len(versions) + 1))
    assert all(m.sql.strip() for m in available())
