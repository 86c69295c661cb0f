"""Read-only access: the GRANTs that let a role run every lookup and nothing else, and the
projects it may see (row-level security, migration 7: a role listed in ``role_project`` sees
and writes only the rows of its projects; a role not listed sees every project)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from poimen_memory.domain import ContentError, ProjectId
from poimen_memory.errors import Refused, SchemaMissing
from poimen_memory.store.migrations import schema_problem
from poimen_memory.store.queries import query

__all__ = ["grant_readonly", "readonly_grants"]

_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$-]{0,62}")


def readonly_grants(
    conn: psycopg.Connection[Any], role: str, projects: Sequence[str] = ()
) -> list[str]:
    """The statements granting ``role`` read access to this database's memory tables, and
    setting the projects it may see to exactly ``projects`` (none: every project)."""
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
        *project_statements(role, projects),
    ]
    return [s.as_string(conn) for s in statements]


def project_statements(role: str, projects: Sequence[str]) -> list[sql.Composed]:
    """Replace ``role``'s rows of ``role_project`` by ``projects`` (none: unrestricted)."""
    checked = sorted({ProjectId(p).value for p in projects})  # ContentError names the field
    statements = [
        sql.SQL("DELETE FROM role_project WHERE role = {}").format(sql.Literal(role)),
    ]
    statements += [
        sql.SQL("INSERT INTO role_project (role, project) VALUES ({}, {})").format(
            sql.Literal(role), sql.Literal(project)
        )
        for project in checked
    ]
    return statements


def grant_readonly(
    conn: psycopg.Connection[Any], role: str, projects: Sequence[str] = ()
) -> list[str]:
    """Apply readonly_grants in one transaction; returns what was run. The schema must be
    the shipped one (``role_project`` comes with migration 7)."""
    statements = readonly_grants(conn, role, projects)
    problem = schema_problem(conn)
    if problem is not None:
        raise SchemaMissing(f"database {conn.info.dbname}", problem)
    row = conn.execute(query("may_set_role_projects")).fetchone()
    if not row or not row[0]:
        raise Refused(
            "--apply",
            f"{conn.info.user} cannot set which projects a role sees: connect as the owner "
            "of the memory tables (the role that ran `mem db migrate`)",
        )
    with conn.transaction():
        for statement in statements:
            conn.execute(statement.encode())
    return statements
