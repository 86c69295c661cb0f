"""The language server: its state, what every request shares, and the one place where each
LSP method and command is registered.

The handlers live in feature modules: ``lifecycle`` (initialize, settings, shutdown),
``buffers`` (open documents, edits queued at O(change)), ``hover``, ``lenses`` (code lens
and resolve) and ``lookups`` (workspace/executeCommand); ``protocol`` refuses requests before
initialize and sets the exit status.
They are thin: find the document and position, call one service function in a worker thread,
convert the result to an lsprotocol type (a warm hover is answered on the event loop instead,
when it needs nothing it would wait for: ``PoimenServer.at_once``). Degradation is the rule:
a file outside a repository, untracked, binary or too large gets nothing; an unreachable
store is reported once and requests keep answering quickly; nothing a request does can stop
the server.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final, TypeVar

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async
from pygls.lsp.server import LanguageServer

from poimen_memory import __version__
from poimen_memory.domain import ContentError
from poimen_memory.errors import StoreUnavailable, WouldWait, nonblocking
from poimen_memory.lookup import LookupFailed, LookupService
from poimen_memory.lsp import UNREACHABLE, WAITS, Waits
from poimen_memory.lsp.buffers import did_change, did_close
from poimen_memory.lsp.documents import PendingRoots, did_open
from poimen_memory.lsp.hover import HoverTexts, hover
from poimen_memory.lsp.lenses import DocLenses, code_lens, resolve_code_lens
from poimen_memory.lsp.lifecycle import (
    did_change_configuration,
    initialize,
    initialized,
    shutdown,
)
from poimen_memory.lsp.lookups import COMMANDS, Command
from poimen_memory.lsp.protocol import PoimenProtocol
from poimen_memory.lsp.stdio import PipeReader, is_pipe
from poimen_memory.operations import Services
from poimen_memory.settings import Settings
from poimen_memory.wiring import IngestListener

__all__ = ["FEATURES", "PoimenServer", "ServerState", "create_server"]

log = logging.getLogger("poimen_memory.lsp")
T = TypeVar("T")
U = TypeVar("U")
READY_BACKLOG = 8  # files just opened waiting to be readied, at most


@dataclass
class ServerState:
    """What the server holds between requests."""

    config: Settings = field(default_factory=Settings)
    config_problems: frozenset[str] = frozenset()  # as last reported, not shown again
    services: Services | None = None
    roots: list[Path] = field(default_factory=list)
    pending_roots: PendingRoots = field(default_factory=PendingRoots)
    roots_reported: set[Path] = field(default_factory=set)  # as not answering, said once
    lenses: dict[str, DocLenses] = field(default_factory=dict)
    hover_texts: HoverTexts = field(default_factory=HoverTexts)
    unreachable_reported: bool = False
    listener: IngestListener | None = None


class PoimenServer(LanguageServer):
    """The poimen-memory language server."""

    protocol: PoimenProtocol

    def __init__(self) -> None:
        super().__init__(
            "poimen-memory",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=PoimenProtocol,
        )
        self.state = ServerState()
        # Not pygls's thread_pool: pygls reads stdin through that pool, so lookups queued
        # behind a slow store there would hold up every message after them.
        self.workers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="poimen")
        # Files just opened are readied on a thread of their own (``documents.did_open``):
        # a burst of them never queues ahead of a lookup; past READY_BACKLOG, one is left
        # for its first lookup to do.
        self.readying = ThreadPoolExecutor(max_workers=1, thread_name_prefix="poimen-ready")
        self.ready_slots = threading.BoundedSemaphore(READY_BACKLOG)
        self.loop: asyncio.AbstractEventLoop | None = None

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve on stdio until ``exit``; exit without ``shutdown`` first ends with status 1.
        (pygls computes that status but its loop swallows the SystemExit carrying it.) A pipe
        on stdin is read on the event loop (``lsp.stdio``), anything else as pygls reads it
        (a thread per read)."""
        stdin = stdin or sys.stdin.buffer
        reader = PipeReader(stdin) if is_pipe(stdin) else StdinAsyncReader(stdin, self.thread_pool)
        self._serve(reader, stdout or sys.stdout.buffer)
        if self.protocol.exit_status:
            raise SystemExit(self.protocol.exit_status)

    def _serve(self, reader: PipeReader | StdinAsyncReader, stdout: BinaryIO) -> None:
        """pygls's stdio server (``start_io``), with its messages read by ``reader`` and its
        log lines (a message it could not read) sent to the client, as the server's are."""
        self._stop_event = stop = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout))

        async def serve() -> None:
            self.loop = asyncio.get_running_loop()  # log lines reach the client from the start
            await run_async(
                stop_event=stop,
                reader=reader,
                protocol=self.protocol,
                logger=log,
                error_handler=self.report_server_error,
            )

        try:
            asyncio.run(serve())
        except BrokenPipeError:
            log.error("the client closed the connection; shutting down")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]

    async def run_blocking(self, fn: Callable[[], T]) -> T:
        """Run a blocking call in a worker thread (the event loop keeps serving)."""
        self.loop = asyncio.get_running_loop()
        return await self.loop.run_in_executor(self.workers, fn)

    def at_once(self, work: Callable[[], T]) -> T | Waits:
        """``work``'s answer, computed here on the event loop, when it needs nothing it
        would wait for (``errors.nonblocking``: git, the store, a disk cache, an answer not
        yet remembered); WAITS when it would wait or fails, and the caller runs it in a
        worker (which reports any failure as it always does). A warm hover is answered so:
        what it costs is the lookup in memory, without two thread hand-offs."""
        try:
            with nonblocking():
                return work()
        except WouldWait:
            return WAITS
        except Exception as exc:  # run again in a worker, where it is reported
            log.debug("answered in a worker instead: %s: %s", type(exc).__name__, exc)
            return WAITS

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the server's event loop, from any thread."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn)

    @property
    def services(self) -> Services:
        """What answers operations (built at initialize, again when settings change)."""
        if self.state.services is None:
            raise StoreUnavailable("the server is not initialized")
        return self.state.services

    @property
    def service(self) -> LookupService:
        """The lookup service."""
        return self.services.service

    async def settle(
        self,
        what: str,
        work: Callable[[], T],
        unreachable: U,
        progress: str | None = None,
    ) -> T | U | None:
        """The answer of an editor lookup run in a worker, or None when it finds nothing
        (logged); ``unreachable`` when the store does not answer (said once to the user)."""
        try:
            found = await self.with_progress(progress, self.run_blocking(work))
        except StoreUnavailable as exc:
            self.store_failed(exc)
            return unreachable
        except (LookupFailed, ContentError) as exc:
            log.info("%s: %s", what, exc)
            return None
        self.store_ok()
        return found

    def takes_progress(self) -> bool:
        """Whether the client takes server-initiated progress reports."""
        return bool(get_capability(self.client_capabilities, "window.work_done_progress", False))

    async def with_progress(self, title: str | None, work: Awaitable[T]) -> T:
        """Await ``work`` under a progress report titled ``title`` (None: no report), where
        the client takes server-initiated progress."""
        if title is None or not self.takes_progress():
            return await work
        token = str(uuid.uuid4())
        try:
            await self.work_done_progress.create_async(token)
            self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title))
        except Exception as exc:  # no progress is better than no answer
            log.debug("progress not available: %s", exc)
            return await work
        try:
            return await work
        finally:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd())

    def store_failed(self, exc: StoreUnavailable) -> None:
        """Tell the user once that the store is unreachable; later failures only log."""
        log.warning("%s", exc)
        if not self.state.unreachable_reported:
            self.state.unreachable_reported = True
            self.window_show_message(
                types.ShowMessageParams(
                    types.MessageType.Warning,
                    f"{UNREACHABLE}: {str(exc).rstrip('.')}. "
                    "Hover and lenses come back by themselves when it answers.",
                )
            )

    def store_ok(self) -> None:
        """After a failure: say the store is back and refresh the lenses."""
        if self.state.unreachable_reported:
            self.state.unreachable_reported = False
            log.warning("memory store reachable again")
            self.refresh_lenses()

    def refresh_lenses(self) -> None:
        """Drop the lenses kept and ask the client to re-request them, where it can."""
        self.state.lenses.clear()
        if get_capability(self.client_capabilities, "workspace.code_lens.refresh_support", False):
            self.workspace_code_lens_refresh(None)


_MESSAGE_TYPES: Final = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


class _Untraced(logging.Formatter):
    """A log line with its exception's type and message, never a traceback (what a user
    reads in the editor's output; the cause is in the message)."""

    def formatException(self, ei: Any) -> str:
        return f"{ei[0].__name__}: {ei[1]}" if ei and ei[0] is not None else ""

    def formatStack(self, stack_info: str) -> str:
        return ""


class _LogToClient(logging.Handler):
    """Forwards log records to window/logMessage."""

    def __init__(self, server: PoimenServer) -> None:
        super().__init__()
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        try:
            params = types.LogMessageParams(
                _MESSAGE_TYPES.get(record.levelno, types.MessageType.Log), self.format(record)
            )
            self.server.call_soon(lambda: self.server.window_log_message(params))
        except Exception:  # a log line must never take the server down
            return


# Every LSP method the server answers, with its options: the one place they are registered.
FEATURES: Final[tuple[tuple[str, Callable[..., Any], Any], ...]] = (
    (types.INITIALIZE, initialize, None),
    (types.INITIALIZED, initialized, None),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, did_change_configuration, None),
    (types.SHUTDOWN, shutdown, None),
    (types.TEXT_DOCUMENT_DID_OPEN, did_open, None),
    (types.TEXT_DOCUMENT_DID_CHANGE, did_change, None),
    (types.TEXT_DOCUMENT_DID_CLOSE, did_close, None),
    (types.TEXT_DOCUMENT_HOVER, hover, None),
    (types.TEXT_DOCUMENT_CODE_LENS, code_lens, types.CodeLensOptions(resolve_provider=True)),
    (types.CODE_LENS_RESOLVE, resolve_code_lens, None),
)


def _command(run: Command) -> Callable[..., Awaitable[dict[str, Any]]]:
    """``run`` as pygls calls a command: the server, then each argument on its own. (Made
    here: pygls reads a command's annotations when it runs, and they name PoimenServer.)"""

    async def command(ls: PoimenServer, *args: Any) -> dict[str, Any]:
        return await run(ls, args)

    return command


def create_server() -> PoimenServer:
    """A server with every feature and command registered."""
    server = PoimenServer()
    forward = _LogToClient(server)
    forward.setFormatter(_Untraced("%(name)s: %(message)s"))
    logging.getLogger("poimen_memory").addHandler(forward)
    logging.getLogger("poimen_memory").setLevel(logging.WARNING)
    for method, handler, options in FEATURES:
        server.feature(method, options)(handler)
    for command, run in COMMANDS.items():
        server.command(command)(_command(run))
    served = [method for method, _, _ in FEATURES]
    server.protocol.prepare(
        [*served, types.EXIT, types.WORKSPACE_EXECUTE_COMMAND],
        results=[list[types.CodeLens], types.Hover],
    )
    return server
