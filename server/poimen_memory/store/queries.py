"""Named SQL queries, loaded from ``sql/queries.sql`` (``-- name: x`` headers)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import LiteralString

__all__ = ["evidence_query", "load_queries", "query"]

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split a file of ``-- name: x`` sections into ``{name: sql}``; duplicate names refused."""
    out: dict[str, str] = {}
    matches = list(_HEADER.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip()
        name = match.group(1)
        if name in out:
            raise ValueError(f"queries.sql: query {name!r} defined twice")
        if not body:
            raise ValueError(f"queries.sql: query {name!r} is empty")
        out[name] = body
    return out


@cache
def load_queries() -> dict[str, str]:
    """All named queries shipped with the package."""
    text = resources.files("poimen_memory.store").joinpath("sql/queries.sql").read_text("utf-8")
    return parse_queries(text)


def query(name: str) -> LiteralString:
    """The SQL of a named query; a file shipped in the package, so literal for psycopg's typing."""
    try:
        return load_queries()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in queries.sql") from None


@cache
def evidence_query(selector: str) -> LiteralString:
    """The ``evidence`` query with the named ``anchors_*`` query as its selector (in place of
    its ``-- CHOSEN`` line): one statement from the anchors to their nodes."""
    template = query("evidence")
    if "-- CHOSEN" not in template:
        raise ValueError("queries.sql: the evidence query lacks its -- CHOSEN line")
    chosen = query(selector).rstrip().removesuffix(";")
    return template.replace("-- CHOSEN", chosen)
