"""Floors of figures f and g: what the database alone needs for the same answer.

Figure f: for each lookup, one prepared statement (``prepare=True``, one round trip on an
autocommit connection) returning the rows the service's answer is made of: the anchors it
chooses, each with its commit and its L0 node, and every node above those nodes with its
depth. Each is written as the database would best answer it; the service's own queries
(``store/sql/queries.sql``: an ``anchors_*`` query, then ``evidence``) choose the same anchors
with the same limits and order, so :func:`floor_answer` and :func:`service_answer` must agree.
The floor's connection runs without JIT: the walk up is estimated at a cost past
``jit_above_cost``, and compiling it (some 50 ms) is not work these rows need.

Figure g: the rows an ingest wrote, copied with COPY into a fresh database migrated with the
project's migrations (every index, constraint and foreign key present).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import sql

# The anchors (`hit`, with their commit's columns) become rows with their L0 node; the nodes
# above each L0 node (walking edges up as the service does, by index, once per node rather
# than once per anchor) become rows of their own.
_ANSWER = """
)
SELECT h.node_sha256 AS origin, 0 AS depth, h.repo, h.commit_sha, h.file, h.line_start,
       h.line_end, h.message, h.author_name, h.author_email, h.author_date,
       n.sha256, n.level, n.query_id, n.run_id, n.t, n.text, n.created_at
FROM hit h
JOIN memory_node n ON n.project = %(project)s AND n.sha256 = h.node_sha256
UNION ALL
SELECT l.sha256, w.depth, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       w.sha256, w.level, w.query_id, w.run_id, w.t, w.text, w.created_at
FROM (SELECT DISTINCT node_sha256 AS sha256 FROM hit) AS l
CROSS JOIN LATERAL (
    WITH RECURSIVE walk (sha256, depth) AS (
        SELECT e.parent_sha256, 1
        FROM memory_edge e
        WHERE e.project = %(project)s AND e.child_sha256 = l.sha256
      UNION
        SELECT e.parent_sha256, w.depth + 1
        FROM walk w
        JOIN memory_edge e ON e.project = %(project)s AND e.child_sha256 = w.sha256
        WHERE w.depth < 8
    )
    SELECT p.sha256, p.level, p.query_id, p.run_id, p.t, p.text, p.created_at, d.depth
    FROM (SELECT sha256, min(depth) AS depth FROM walk GROUP BY sha256) AS d
    JOIN memory_node p ON p.project = %(project)s AND p.sha256 = d.sha256
) AS w
"""

# by_git for one line: the anchors at the line's origin (commit, file, line) covering it,
# and the whole-file anchors there; one range of git_anchor's primary key.
BY_LINE = (
    """
WITH hit AS (
    SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end,
           c.message, c.author_name, c.author_email, c.author_date
    FROM git_anchor a
    JOIN git_commit c
      ON c.project = a.project AND c.repo = a.repo AND c.commit_sha = a.commit_sha
    WHERE a.project = %(project)s AND a.repo = %(repo)s AND a.commit_sha = %(commit)s
      AND a.file = %(file)s AND a.line_start <= %(line)s
      AND (a.line_end >= %(line)s OR a.line_start = 0)
"""
    + _ANSWER
)

# by_commit from a prefix (no repository): the commits with that prefix, then the first
# `limit` of their anchors in key order, as the service pages them.
BY_COMMIT = (
    """
WITH hit AS (
    SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end,
           g.message, g.author_name, g.author_email, g.author_date
    FROM git_commit g
    JOIN git_anchor a
      ON a.project = g.project AND a.repo = g.repo AND a.commit_sha = g.commit_sha
    WHERE g.project = %(project)s AND g.commit_sha LIKE %(prefix)s || '%%'
    ORDER BY a.repo, a.commit_sha, a.file, a.line_start, a.line_end, a.node_sha256
    LIMIT %(limit)s
"""
    + _ANSWER
)

# by_author in one repository: the author's commits newest first, each one's anchors in key
# order, until `limit` anchors.
BY_AUTHOR = (
    """
WITH hit AS (
    SELECT a.node_sha256, g.repo, g.commit_sha, a.file, a.line_start, a.line_end,
           g.message, g.author_name, g.author_email, g.author_date
    FROM (
        SELECT g.repo, g.commit_sha, g.message, g.author_name, g.author_email, g.author_date
        FROM git_commit g
        WHERE g.project = %(project)s AND g.repo = %(repo)s
          AND (lower(g.author_email) = ANY(%(authors)s::text[])
               OR lower(g.author_name) = ANY(%(authors)s::text[]))
        ORDER BY g.author_date DESC, g.commit_sha
    ) AS g
    CROSS JOIN LATERAL (
        SELECT x.node_sha256, x.file, x.line_start, x.line_end
        FROM git_anchor x
        WHERE x.project = %(project)s AND x.repo = g.repo AND x.commit_sha = g.commit_sha
        ORDER BY x.file, x.line_start, x.line_end, x.node_sha256
        LIMIT %(limit)s
    ) AS a
    ORDER BY g.author_date DESC, g.commit_sha, a.file, a.line_start, a.line_end, a.node_sha256
    LIMIT %(limit)s
"""
    + _ANSWER
)

# One row by primary key: the floor figure f used before (kept as an info row).
PK_NODE = "SELECT * FROM memory_node WHERE project = %(project)s AND sha256 = %(sha)s"

Answer = tuple[frozenset[tuple[str, str, str, int, int]], frozenset[str]]
"""(anchors as (node, commit, file, line_start, line_end), every node's sha)."""


def floor_answer(rows: Iterable[tuple[Any, ...]]) -> Answer:
    """What a floor statement's rows say: its anchors and its nodes."""
    anchors, nodes = set(), set()
    for row in rows:
        origin, depth, _, commit, file, start, end = row[:7]
        if depth == 0:
            anchors.add((origin, commit, file, start, end))
        nodes.add(row[11])
    return frozenset(anchors), frozenset(nodes)


def service_answer(result: Any) -> Answer:
    """The same of a LookupResult: its L0 memories' citations and every memory's node."""
    anchors = {
        (m.node.sha256.value, c.commit.sha.value, c.file, c.line_start, c.line_end)
        for m in result.evidence
        for c in m.citations
    }
    return frozenset(anchors), frozenset(m.node.sha256.value for m in result.memories)


# -- figure g -----------------------------------------------------------------------------

# What an ingest writes, in an order the foreign keys accept.
INGEST_TABLES = ("memory_node", "git_commit", "memory_edge", "git_anchor", "commit_alias")


def stored_columns(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """The columns a COPY fills (generated ones, such as the text-search vector, left out)."""
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
        " AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (table,),
    ).fetchall()
    return [r[0] for r in rows]


def dump_tables(dsn: str) -> dict[str, tuple[list[str], bytes, int]]:
    """Every row of the ingest tables as binary COPY data: ``{table: (columns, data, rows)}``."""
    out: dict[str, tuple[list[str], bytes, int]] = {}
    with psycopg.connect(dsn) as conn:
        for table in INGEST_TABLES:
            columns = stored_columns(conn, table)
            cols = sql.SQL(", ").join(map(sql.Identifier, columns))
            statement = sql.SQL("COPY {} ({}) TO STDOUT (FORMAT binary)").format(
                sql.Identifier(table), cols
            )
            with conn.cursor() as cur, cur.copy(statement) as copy:
                data = b"".join(bytes(chunk) for chunk in copy)
            count = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
            ).fetchone()
            assert count is not None
            out[table] = (columns, data, int(count[0]))
    return out


def copy_tables(dsn: str, dump: dict[str, tuple[list[str], bytes, int]]) -> None:
    """Load ``dump`` with one COPY per table, in one transaction."""
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        for table, (columns, data, rows) in dump.items():
            if not rows:
                continue
            cols = sql.SQL(", ").join(map(sql.Identifier, columns))
            statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(
                sql.Identifier(table), cols
            )
            with cur.copy(statement) as copy:
                copy.write(data)
        conn.commit()


def empty_tables(dsn: str) -> None:
    """Empty the ingest tables (and whatever refers to them) for another load."""
    with psycopg.connect(dsn) as conn:
        tables = sql.SQL(", ").join(map(sql.Identifier, INGEST_TABLES))
        conn.execute(sql.SQL("TRUNCATE {} CASCADE").format(tables))
