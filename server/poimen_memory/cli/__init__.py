"""The ``mem`` command. A thin adapter: parse arguments, build a request, call one service,
print the result.

Exit status: 0 success, 1 the store or repository is unavailable, 2 bad input.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import psycopg

from poimen_memory.cli.commands import version
from poimen_memory.cli.errors import UsageError
from poimen_memory.cli.parser import build_parser
from poimen_memory.domain import ContentError
from poimen_memory.errors import ConfigError, StoreUnavailable
from poimen_memory.ingest import IngestError
from poimen_memory.lookup import LookupFailed, LookupInputError
from poimen_memory.store import MigrationError

__all__ = ["EXIT_BAD_INPUT", "EXIT_UNAVAILABLE", "build_parser", "main"]

EXIT_UNAVAILABLE = 1
EXIT_BAD_INPUT = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mem``; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.version:
            return version(args)
        func: Callable[..., int] | None = getattr(args, "func", None)
        if func is None:
            sub = {"db": "db "}.get(getattr(args, "command", "") or "", "")
            raise UsageError(f"missing command; see `mem {sub}--help`")
        return func(args)
    except (UsageError, LookupInputError, ContentError, ConfigError, IngestError) as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except psycopg.errors.InsufficientPrivilege as exc:
        return _fail(" ".join(str(exc).split()), EXIT_UNAVAILABLE)
    except psycopg.errors.UndefinedObject as exc:
        return _fail(" ".join(str(exc).split()), EXIT_BAD_INPUT)
    except (StoreUnavailable, MigrationError, LookupFailed) as exc:
        return _fail(str(exc), EXIT_UNAVAILABLE)
    except KeyboardInterrupt:
        return 130


def _fail(message: str, status: int) -> int:
    print(f"mem: error: {message}", file=sys.stderr)
    return status
