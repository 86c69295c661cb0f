"""Read-only access: the GRANTs that let a role run every lookup and nothing else."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from poimen_memory.domain import ContentError

__all__ = ["grant_readonly", "readonly_grants"]

_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$-]{0,62}")


def readonly_grants(conn: psycopg.Connection[Any], role: str) -> list[str]:
    """The statements granting ``role`` read access to this database's memory tables."""
    if not isinstance(role, str) or not _ROLE.fullmatch(role):
        raise ContentError(f"ROLE: {role!r} is not a role name ([A-Za-z_][A-Za-z0-9_$-]*)")
    dbname = conn.info.dbname
    ident = sql.Identifier(role)
    statements = [
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(dbname), ident),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident),
        sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(ident),
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}").format(
            ident
        ),
    ]
    return [s.as_string(conn) for s in statements]


def grant_readonly(conn: psycopg.Connection[Any], role: str) -> list[str]:
    """Apply readonly_grants in one transaction; returns what was run."""
    statements = readonly_grants(conn, role)
    with conn.transaction():
        for statement in statements:
            conn.execute(statement.encode())
    return statements
