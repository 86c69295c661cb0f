"""Numbered schema migrations: ``sql/migrations/NNNN_name.sql``, applied in order, once.

Applied versions are recorded with a checksum in ``poimen_schema_version``; a migration file
edited after it was applied is refused rather than silently skipped. Each migration runs in
its own transaction, under an advisory lock held for the whole run, so concurrent
``mem db migrate`` runs are safe and a failed migration leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, LiteralString

import psycopg
from psycopg.rows import tuple_row

__all__ = [
    "Migration",
    "MigrationError",
    "applied_versions",
    "available",
    "migrate",
    "schema_problem",
]

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# Any constant works; it only has to be the same for every migrating process.
_LOCK_KEY = 0x706F696D656E  # "poimen"

_VERSION_TABLE: LiteralString = """
CREATE TABLE IF NOT EXISTS poimen_schema_version (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(RuntimeError):
    """The database's recorded migrations disagree with the shipped ones."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered migration file."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """sha256 of the file's text: an applied migration must never change."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def available() -> list[Migration]:
    """The migrations shipped with the package, in version order."""
    folder = resources.files("poimen_memory.store").joinpath("sql/migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(f"migration versions must be 1..n without gaps, found {versions}")
    return found


def applied_versions(conn: psycopg.Connection[Any]) -> dict[int, str]:
    """``{version: checksum}`` of the migrations this database has applied (empty if none)."""
    read = "SELECT version, checksum FROM poimen_schema_version"
    with conn.cursor(row_factory=tuple_row) as cur:
        if conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            # No transaction (a pool's connection, each time a process opens one): one round
            # trip, a missing table said by its error, which aborts nothing.
            try:
                rows = cur.execute(read).fetchall()
            except psycopg.errors.UndefinedTable:
                return {}
        else:
            exists = cur.execute(
                "SELECT to_regclass('poimen_schema_version') IS NOT NULL"
            ).fetchone()
            if not exists or not exists[0]:
                return {}
            rows = cur.execute(read).fetchall()
    return {int(v): str(c) for v, c in rows}


def _check_recorded(recorded: dict[int, str], shipped: list[Migration]) -> None:
    by_version = {m.version: m for m in shipped}
    for version, checksum in sorted(recorded.items()):
        migration = by_version.get(version)
        if migration is None:
            raise MigrationError(
                f"the database is at schema version {max(recorded)}, newer than this "
                f"poimen-memory ({len(shipped)}); upgrade poimen-memory"
            )
        if migration.checksum != checksum:
            raise MigrationError(
                f"migration {version:04d}_{migration.name} was changed after it was applied "
                "to this database; restore the original file"
            )


def schema_problem(conn: psycopg.Connection[Any]) -> str | None:
    """None when the database has exactly the shipped migrations applied; else what is wrong
    and what to do, to follow "the memory store at ...": a missing or older schema asks for
    ``mem db migrate``, a newer one for an upgrade."""
    shipped = available()
    recorded = applied_versions(conn)
    if not recorded:
        return "has no poimen-memory schema; run `mem db migrate`"
    try:
        _check_recorded(recorded, shipped)
    except MigrationError as exc:
        return f"cannot be used: {exc}"
    if len(recorded) < len(shipped):
        return (
            f"has schema version {max(recorded)}, older than this poimen-memory's "
            f"{len(shipped)}; run `mem db migrate`"
        )
    return None


def migrate(conn: psycopg.Connection[Any]) -> list[Migration]:
    """Apply every pending migration; returns the ones applied (none on a second run)."""
    shipped = available()
    applied: list[Migration] = []
    conn.autocommit = True
    # Held for the whole run, so one process applies every pending migration and the others
    # find them applied (each migration still commits on its own).
    conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
    try:
        for migration in shipped:
            with conn.transaction():
                conn.execute(_VERSION_TABLE)
                recorded = applied_versions(conn)
                _check_recorded(recorded, shipped)
                if migration.version in recorded:
                    continue
                conn.execute(migration.sql)  # text of a file shipped in the package
                conn.execute(
                    "INSERT INTO poimen_schema_version (version, name, checksum)"
                    " VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
                applied.append(migration)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied
