"""The ``mem`` command. A thin adapter: parse arguments, build a request, call one service,
print the result.

Exit status: 0 success, 1 the store or repository is unavailable, 2 bad input; 128 + the
signal's number when stopped by SIGINT, SIGTERM or SIGHUP (each a clean shutdown, so the
embedded Postgres is released), 141 when the reader of its output went away.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Final

from poimen_memory.cli.commands import version
from poimen_memory.cli.errors import Terminated, UsageError
from poimen_memory.cli.parser import build_parser
from poimen_memory.errors import ErrorKind
from poimen_memory.operations import classify
from poimen_memory.wiring import release_embedded, stop_git

__all__ = ["EXIT_BAD_INPUT", "EXIT_STATUS", "EXIT_UNAVAILABLE", "build_parser", "main"]

EXIT_UNAVAILABLE = 1
EXIT_BAD_INPUT = 2
# The exit status of each kind of failure.
EXIT_STATUS: Final[Mapping[ErrorKind, int]] = {
    ErrorKind.INPUT: EXIT_BAD_INPUT,
    ErrorKind.NOT_FOUND: EXIT_UNAVAILABLE,
    ErrorKind.UNAVAILABLE: EXIT_UNAVAILABLE,
    ErrorKind.REFUSED: EXIT_UNAVAILABLE,
    ErrorKind.INTERNAL: EXIT_UNAVAILABLE,
}
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
# After SIGTERM or SIGHUP, a shutdown that has not finished by then (a language server whose
# client keeps its stdin open, a request that hangs) is cut short, the embedded Postgres
# released first.
GRACE_S = 5.0
# How long leaving on a signal waits for the embedded Postgres to be released.
RELEASE_S = 20.0
# Commands that leave at once: the language server has nothing to finish (each lookup or
# remembered line is one transaction, which Postgres rolls back when cut), and the thread
# reading its stdin cannot be interrupted, so a shutdown would wait for its client.
_AT_ONCE = frozenset({"lsp"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mem``; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        with _terminated_like_interrupted(at_once=getattr(args, "command", None) in _AT_ONCE):
            if args.version:
                return _flushed(version(args))
            func: Callable[..., int] | None = getattr(args, "func", None)
            if func is None:
                sub = {"db": "db "}.get(getattr(args, "command", "") or "", "")
                raise UsageError(f"missing command; see `mem {sub}--help`")
            return _flushed(func(args))
    except BrokenPipeError:
        # The reader left (`mem query ... | head -1`): nothing more can be said to it, and
        # the interpreter's last flush must not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Terminated as exc:
        return 128 + exc.signum
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except Exception as exc:
        failure = classify(exc, logger=None)
        internal = failure.kind is ErrorKind.INTERNAL
        return _fail(failure.public if internal else failure.message, EXIT_STATUS[failure.kind])


def _flushed(status: int) -> int:
    """``status``, once what was printed has left (a reader gone is seen here, not at exit).
    A command that closed stdout itself (the language server, on ``exit``) has nothing left."""
    if not sys.stdout.closed:
        sys.stdout.flush()
    return status


@contextmanager
def _terminated_like_interrupted(*, at_once: bool) -> Iterator[None]:
    """SIGTERM and SIGHUP raise Terminated (a KeyboardInterrupt) while the block runs; the
    first also arms a deadline for the shutdown it starts, a second one ends it at once.
    ``at_once``: the first one ends it at once."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are for the main thread (``main`` called from a test's worker)
        return
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if at_once or len(received) > 1:
            _leave_now(signum)
        threading.Thread(target=_leave_later, args=(signum,), daemon=True).start()
        raise Terminated(signum)

    caught = (signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, handler) for signum in caught}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _leave_later(signum: int) -> None:
    threading.Event().wait(GRACE_S)
    _leave_now(signum)


def _leave_now(signum: int) -> None:
    """Release the embedded Postgres (for at most RELEASE_S: a server still starting may not
    stop at once), then exit without waiting for anything else."""
    releasing = threading.Thread(target=release_embedded, daemon=True)
    releasing.start()
    releasing.join(RELEASE_S)
    stop_git()  # a background blame's git is not left computing for nobody
    os._exit(128 + signum)


def _fail(message: str, status: int) -> int:
    print(f"mem: error: {message}", file=sys.stderr)
    return status
