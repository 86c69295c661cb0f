"""Every lookup filters on ``project`` first: the schema can be distributed by project.

Each named query of ``queries.sql`` (the ``evidence`` query once per ``anchors_*`` selector)
is planned with ``EXPLAIN (FORMAT JSON)`` on a freshly migrated, empty database, with dummy
values for its parameters. Every scan of a table keyed by project (its primary key starts
with ``project``) must have an equality on ``project`` among the top-level conditions of its
Index Cond, Recheck Cond or Filter: to a value (``project = 'p'``) or to another table's
project (a join on project). A Seq Scan with such a Filter passes: it still filters on
project. On Citus this is what keeps a query on one shard; here, on plain Postgres, it is
checked on the plans (docs/scaling.md).

A parameter a query tests for NULL (``%(x)s::text IS NULL OR ...``) is planned both given and
NULL, so "one project, or all when NULL" is seen as all. Queries over every project are in
``ALL_PROJECTS``, each with its reason, and that list must be exactly the queries found: a new
query without a project filter fails here until it is listed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from poimen_memory.store.queries import evidence_query, load_queries

from .schema import PROJECT_KEYED_TABLES

# Queries that scan project-keyed tables without a filter on project, on purpose.
ALL_PROJECTS: dict[str, str] = {
    "status_levels": "`mem db status`: node counts by level over every project",
    "status_counts": "`mem db status`: edge, anchor, commit and project counts over all",
    "blame_evict": "the shared blame cache's bound is global: least recently used files of all",
    "blame_status": "`mem db status`: the blame cache's size over every project",
    "pending_count": "`mem db status`: pending anchors of every project",
    "pending_repos": "with a NULL project, every (project, repo) with something pending",
    "expire_pending": "with a NULL project, the expired pending anchors of every project",
}

# Queries not planned here, by name.
NOT_EXPLAINED: dict[str, str] = {
    "insert_rows": "a template: {table}, {columns}, {values} are composed in store/writes.py",
    "create_stage": "CREATE TEMP TABLE ... AS: a template, and EXPLAIN does not take CREATE",
    "copy_stage": "COPY: EXPLAIN does not take it (and a template)",
    "copy_table": "COPY: EXPLAIN does not take it (and a template)",
    "merge_stage": "a template ({table}, {stage}); it reads the temporary stage table",
    "allow_slow_statements": "SET LOCAL: EXPLAIN does not take it",
    "analyze_anchors": "ANALYZE: EXPLAIN does not take it",
    "evidence": "the template of the evidence_* queries, planned once per anchors_* selector",
}

# Values of parameters used without a cast, by name.
UNCAST: dict[str, Any] = {
    "project": "proj-a",
    "repo": "github.com/acme/widgets",
    "file": "src/w.py",
    "path": "src/w.py",
    "commit": "a" * 40,
    "commit_sha": "a" * 40,
    "fingerprint": "f" * 32,
    "blob_id": "b" * 40,
    "query": "discount cap",
    "prefix": "abc",
    "channel": "poimen_memory",
    "payload": "{}",
    "commits": "[]",  # blame_put_file's jsonb; elsewhere cast to text[]
    "line": 4,
    "page": 50,
    "limit": 20,
    "max_anchors": 200,
    "max_files": 1000,
    "max_runs": 100000,
    "line_count": 10,
    "run_count": 2,
    "est_bytes": 1000,
    "file_id": 1,
    "key": 42,
    "newest": True,  # anchors_line: the hover's read (its node join too)
}
CAST: dict[str, Any] = {
    "text": "x",
    "text[]": ["x"],
    "int": 1,
    "int[]": [1],
    "bigint[]": [1],
    "timestamptz": datetime(2024, 1, 1, tzinfo=UTC),
    "float8": 1.0,
}

_PLACEHOLDER = re.compile(r"%\((\w+)\)s(?:::(\w+(?:\[\])?))?")
_NULLABLE = re.compile(r"%\((\w+)\)s::\w+ IS NULL")
_EQUALS_PROJECT = re.compile(r"^(?:\w+\.)?project = (?!ANY\b)|= (?:\w+\.)?project$")


def params_of(sql: str) -> dict[str, Any]:
    """A dummy value for each ``%(name)s``: by its cast when it has one, else by its name."""
    out: dict[str, Any] = {}
    for name, cast in _PLACEHOLDER.findall(sql):
        if cast:
            if cast not in CAST:
                raise AssertionError(f"no dummy value for a parameter cast to {cast}")
            out.setdefault(name, CAST[cast])
        elif name not in out:
            if name not in UNCAST:
                raise AssertionError(f"no dummy value for the parameter {name!r}")
            out[name] = UNCAST[name]
    if "project" in out:
        out["project"] = UNCAST["project"]
    return out


def variants(sql: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """All parameters given, then each parameter the query tests for NULL set to NULL."""
    given = params_of(sql)
    yield "given", given
    for name in sorted(set(_NULLABLE.findall(sql))):
        yield f"{name} NULL", {**given, name: None}


def statements() -> dict[str, str]:
    """The statements planned: every named query but the NOT_EXPLAINED, and the evidence
    query once per anchors_* selector (as ``evidence:anchors_x``)."""
    queries = load_queries()
    out = {name: sql for name, sql in queries.items() if name not in NOT_EXPLAINED}
    for name in queries:
        if name.startswith("anchors_"):
            out[f"evidence:{name}"] = evidence_query(name)
    return out


def _conjuncts(cond: str) -> list[str]:
    """The top-level AND terms of a condition as EXPLAIN prints it, outer parentheses off."""
    cond = _unwrap(cond)
    terms, depth, start, i = [], 0, 0, 0
    while i < len(cond):
        ch = cond[i]
        if ch == "'":  # a literal: skip to its end ('' is a quote inside it)
            i = cond.index("'", i + 1)
            while cond.startswith("''", i):
                i = cond.index("'", i + 2)
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and cond.startswith(" AND ", i):
            terms.append(_unwrap(cond[start:i]))
            start = i + len(" AND ")
        i += 1
    terms.append(_unwrap(cond[start:]))
    return terms


def _unwrap(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _closes_at_end(text):
        text = text[1:-1].strip()
    return text


def _closes_at_end(text: str) -> bool:
    depth, in_literal = 0, False
    for i, ch in enumerate(text):
        if ch == "'":
            in_literal = not in_literal
        elif not in_literal and ch == "(":
            depth += 1
        elif not in_literal and ch == ")":
            depth -= 1
            if depth == 0 and i < len(text) - 1:
                return False
    return True


def filters_on_project(cond: str) -> bool:
    """Whether a condition has ``project = <value or another table's project>`` as one of its
    top-level AND terms (not inside an OR, not ``= ANY``)."""
    return any(_EQUALS_PROJECT.search(term) for term in _conjuncts(cond))


def unfiltered_scans(
    plan: dict[str, Any], keyed: set[str], index_table: dict[str, str]
) -> list[str]:
    """The scans of project-keyed tables in a plan tree with no equality on project. A Bitmap
    Heap Scan is judged with the Index Conds of the bitmap index scans under it."""
    found: list[str] = []

    def conds(node: dict[str, Any]) -> list[str]:
        own = [node[k] for k in ("Index Cond", "Recheck Cond", "Filter") if k in node]
        if node["Node Type"] == "Bitmap Heap Scan":
            for child in node.get("Plans", []):
                own += conds(child)
        return own

    def walk(node: dict[str, Any], under_heap_scan: bool) -> None:
        kind = node["Node Type"]
        table = node.get("Relation Name") or index_table.get(node.get("Index Name", ""))
        judged = kind != "ModifyTable" and not (kind.startswith("Bitmap") and under_heap_scan)
        if judged and table in keyed and not any(filters_on_project(c) for c in conds(node)):
            found.append(f"{kind} on {table} ({'; '.join(conds(node)) or 'no condition'})")
        for child in node.get("Plans", []):
            walk(child, under_heap_scan or kind == "Bitmap Heap Scan")

    walk(plan, False)
    return found


def explain(conn: psycopg.Connection, sql: str, params: dict[str, Any] | None = None) -> dict:
    """The plan of a statement, its parameters bound in the text (so the plan is a custom
    one: a parameter tested for NULL folds away as a constant)."""
    with psycopg.ClientCursor(conn) as cur:
        cur.execute("EXPLAIN (FORMAT JSON) " + sql.rstrip().removesuffix(";"), params)
        row = cur.fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return doc[0]["Plan"]


# -- the database ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def conn(store_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(store_dsn, autocommit=True) as c:
        c.execute("SET plan_cache_mode = force_custom_plan")
        yield c


@pytest.fixture(scope="module")
def keyed(conn: psycopg.Connection) -> set[str]:
    """The tables whose primary key starts with ``project``."""
    rows = conn.execute(
        """
        SELECT c.relname
        FROM pg_constraint k
        JOIN pg_class c ON c.oid = k.conrelid
        JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
        WHERE k.contype = 'p' AND c.relnamespace = 'public'::regnamespace
          AND a.attname = 'project'
        """
    ).fetchall()
    return {r[0] for r in rows}


@pytest.fixture(scope="module")
def index_table(conn: psycopg.Connection) -> dict[str, str]:
    rows = conn.execute(
        "SELECT indexname, tablename FROM pg_indexes WHERE schemaname = 'public'"
    ).fetchall()
    return dict(rows)


@pytest.fixture(scope="module")
def findings(
    conn: psycopg.Connection, keyed: set[str], index_table: dict[str, str]
) -> dict[str, list[str]]:
    """Per statement planned, its unfiltered scans (``variant: scan``); empty when none."""
    out: dict[str, list[str]] = {}
    for name, sql in statements().items():
        out[name] = [
            f"{variant}: {scan}"
            for variant, params in variants(sql)
            for scan in unfiltered_scans(explain(conn, sql, params), keyed, index_table)
        ]
    return out


# -- the promises ---------------------------------------------------------------------------------


def test_every_table_with_a_project_leads_its_primary_key_with_it(
    conn: psycopg.Connection, keyed: set[str]
) -> None:
    with_project = {
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND column_name = 'project'"
        ).fetchall()
    }
    assert keyed == PROJECT_KEYED_TABLES
    # role_project (role, project): which projects a role sees, a reference table.
    assert with_project - keyed == {"role_project"}


def test_every_lookup_filters_on_project_first(findings: dict[str, list[str]]) -> None:
    takes_project = {
        name for name, sql in statements().items() if "%(project)s" in sql
    } - ALL_PROJECTS.keys()
    assert len(takes_project) >= 30
    broken = {name: findings[name] for name in sorted(takes_project) if findings[name]}
    assert broken == {}


def test_the_queries_over_all_projects_are_exactly_the_listed_ones(
    findings: dict[str, list[str]],
) -> None:
    unfiltered = {name for name, scans in findings.items() if scans}
    assert unfiltered == set(ALL_PROJECTS)


def test_the_queries_not_planned_are_named_and_cannot_be(conn: psycopg.Connection) -> None:
    queries = load_queries()
    assert set(NOT_EXPLAINED) <= set(queries)
    for name in NOT_EXPLAINED:
        sql = queries[name]
        body = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
        verb = body.split(None, 1)[0].upper()
        assert "{" in body or verb in {"SET", "COPY", "CREATE", "ANALYZE"} or "-- CHOSEN" in sql


def test_the_checker_flags_a_scan_without_a_project_filter(
    conn: psycopg.Connection, keyed: set[str], index_table: dict[str, str]
) -> None:
    def scans(sql: str) -> list[str]:
        return unfiltered_scans(explain(conn, sql), keyed, index_table)

    assert scans("SELECT * FROM git_anchor WHERE file = 'x'") != []
    assert scans("SELECT * FROM git_anchor WHERE project = 'p' OR file = 'x'") != []
    assert scans("SELECT * FROM git_anchor WHERE project = ANY('{p,q}') AND file = 'x'") != []
    assert (
        scans(
            "SELECT * FROM git_anchor a JOIN memory_node n ON n.sha256 = a.node_sha256"
            " WHERE a.project = 'p'"
        )
        != []
    )
    assert scans("SELECT * FROM git_anchor WHERE project = 'p' AND file = 'x'") == []
    assert (
        scans(
            "SELECT * FROM git_anchor a JOIN memory_node n"
            " ON n.project = a.project AND n.sha256 = a.node_sha256 WHERE a.project = 'p'"
        )
        == []
    )
    assert scans("SELECT * FROM role_project") == []  # not keyed by project


def test_a_shipped_lookup_without_its_project_filter_is_flagged(
    conn: psycopg.Connection, keyed: set[str], index_table: dict[str, str]
) -> None:
    # The break, in memory only: anchors_nodes with its filter on project dropped.
    sql = load_queries()["anchors_nodes"]
    broken = sql.replace("a.project = %(project)s AND ", "")
    assert broken != sql
    assert unfiltered_scans(explain(conn, sql, params_of(sql)), keyed, index_table) == []
    found = unfiltered_scans(explain(conn, broken, params_of(broken)), keyed, index_table)
    assert len(found) == 1
    assert "git_anchor" in found[0]
