"""The ``mem`` command. A thin adapter: parse arguments, call one service, print the result.

Exit status: 0 success, 1 the store or repository is unavailable, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from poimen_memory import __version__
from poimen_memory.domain import ContentError
from poimen_memory.store import (
    ConfigError,
    DsnSource,
    ResolvedDsn,
    Store,
    StoreUnavailable,
    connect,
    embedded_dsn,
    migrate,
    resolve_dsn,
)
from poimen_memory.store.connection import describe_target
from poimen_memory.store.migrations import MigrationError

__all__ = ["main"]

EXIT_UNAVAILABLE = 1
EXIT_BAD_INPUT = 2


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


def _store_dsn(args: argparse.Namespace) -> ResolvedDsn:
    resolved = resolve_dsn(args.dsn)
    if resolved is None:
        return ResolvedDsn(embedded_dsn(), DsnSource.EMBEDDED)
    return resolved


def cmd_db_migrate(args: argparse.Namespace) -> int:
    """Apply pending schema migrations."""
    target = _store_dsn(args)
    with connect(target.dsn) as conn:
        applied = migrate(conn)
    if args.json:
        print(json.dumps({"applied": [f"{m.version:04d}_{m.name}" for m in applied]}))
    elif applied:
        for m in applied:
            print(f"applied {m.version:04d}_{m.name}")
    else:
        print("schema is up to date")
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    """Schema version and row counts."""
    target = _store_dsn(args)
    with Store(target.dsn, max_size=1) as store:
        status = store.status()
    store_desc = f"{describe_target(target.dsn)} (from {target.source.value})"
    if args.json:
        print(
            json.dumps(
                {
                    "store": store_desc,
                    "schema_version": status.schema_version,
                    "latest_version": status.latest_version,
                    "nodes": status.nodes_by_level,
                    "edges": status.edges,
                    "anchors": status.anchors,
                    "commits": status.commits,
                    "projects": status.projects,
                },
                indent=2,
            )
        )
        return 0
    print(f"store           {store_desc}")
    if status.schema_version == 0:
        print("schema version  none: run `mem db migrate`")
        return 0
    behind = "" if status.schema_version == status.latest_version else "  (run `mem db migrate`)"
    print(f"schema version  {status.schema_version} of {status.latest_version}{behind}")
    levels = " · ".join(f"{lvl} {n}" for lvl, n in status.nodes_by_level.items())
    print(f"nodes           {levels}")
    print(f"edges           {status.edges}")
    print(f"anchors         {status.anchors}")
    print(f"commits         {status.commits}")
    print(f"projects        {status.projects}")
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mem``."""
    parser = _Parser(
        prog="mem",
        description="poimen-memory: memories from coding-agent sessions, anchored to code.",
    )
    parser.add_argument("--version", action="version", version=f"mem {__version__}")
    parser.add_argument(
        "--dsn",
        help="Postgres connection string (default: $POIMEN_DSN, the config file, else embedded)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    db = commands.add_parser("db", help="manage the store's schema")
    db_commands = db.add_subparsers(dest="db_command", metavar="DB_COMMAND", parser_class=_Parser)
    p = db_commands.add_parser("migrate", help="apply pending schema migrations (idempotent)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_db_migrate)
    p = db_commands.add_parser("status", help="schema version and row counts")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_db_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mem``; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
        if func is None:
            sub = {"db": "db "}.get(getattr(args, "command", "") or "", "")
            raise UsageError(f"missing command; see `mem {sub}--help`")
        return func(args)
    except UsageError as exc:
        print(f"mem: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ContentError, ConfigError) as exc:
        print(f"mem: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (StoreUnavailable, MigrationError) as exc:
        print(f"mem: error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
