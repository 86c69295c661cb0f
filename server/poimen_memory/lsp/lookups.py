"""workspace/executeCommand: a command for every operation of the table
(``poimen_memory.operations``: ``mem.byGit``, ``mem.why``, ...), plus the language server's
own: ``mem.showMemories`` (the lens's command), ``mem.refresh`` and ``mem.ping``.

A command's argument is validated by its operation's request model, so a bad one gets the
same words as on HTTP, MCP and the CLI; a ``uri`` of the workspace may stand for ``file``
and ``repo``. Answers are the response model's JSON; failures are JSON-RPC errors by kind
(``ERROR_CODES``), never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from lsprotocol import types
from pydantic import BaseModel
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams

from poimen_memory import __version__
from poimen_memory.errors import ErrorKind, StoreUnavailable
from poimen_memory.lookup import ByGitRequest, LookupResult
from poimen_memory.lsp import UNREACHABLE, commands
from poimen_memory.lsp.documents import locate
from poimen_memory.operations import OPERATIONS, Operation, classify
from poimen_memory.operations.models import PingResponse, RefreshResponse
from poimen_memory.render import render_hover
from poimen_memory.wiring import scratch_dir

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = ["COMMANDS", "ERROR_CODES", "Command"]

log = logging.getLogger("poimen_memory.lsp")
A = TypeVar("A")
Command = Callable[["PoimenServer", tuple[Any, ...]], Awaitable[dict[str, Any]]]

# The JSON-RPC error code of each kind of failure.
ERROR_CODES: Final[Mapping[ErrorKind, int]] = {
    ErrorKind.INPUT: JsonRpcInvalidParams.CODE,
    ErrorKind.NOT_FOUND: JsonRpcInvalidParams.CODE,  # the argument names what is not here
    ErrorKind.UNAVAILABLE: JsonRpcInternalError.CODE,
    ErrorKind.REFUSED: types.LSPErrorCodes.RequestFailed.value,
    ErrorKind.INTERNAL: JsonRpcInternalError.CODE,
}


def _argument(args: tuple[Any, ...]) -> Any:
    return args[0] if len(args) == 1 else list(args)


async def _answer(ls: PoimenServer, run: Callable[[], A]) -> A:
    """Run ``run`` in a worker; its failures as JSON-RPC errors by kind."""
    try:
        result = await ls.run_blocking(run)
    except Exception as exc:
        failure = classify(exc, logger=log)
        if isinstance(exc, StoreUnavailable):
            ls.store_failed(exc)
        message = failure.message
        if failure.kind is ErrorKind.UNAVAILABLE:
            message = f"{UNREACHABLE}: {failure.message}"
        elif failure.kind is ErrorKind.INTERNAL:
            message = failure.public
        data = None if failure.field is None else {"field": failure.field}
        raise JsonRpcException(code=ERROR_CODES[failure.kind], message=message, data=data) from None
    ls.store_ok()
    return result


def _located(ls: PoimenServer, op: Operation[Any, Any, Any], body: object) -> object:
    """The argument with a workspace ``uri`` as its ``file`` and ``repo``."""
    if "file" in op.request.model_fields and isinstance(body, Mapping):
        return locate(ls, body, required=False)
    return body


def _operation_command(op: Operation[Any, Any, Any]) -> Command:
    """The handler of one operation's command."""

    async def run(ls: PoimenServer, args: tuple[Any, ...]) -> dict[str, Any]:
        body = _argument(args)
        services = ls.services

        def answer() -> dict[str, Any]:
            response: BaseModel = op.execute(services, _located(ls, op, body))
            return response.model_dump(mode="json")

        out = await _answer(ls, answer)
        if op.writes:
            ls.refresh_lenses()
        return out

    return run


async def _present(ls: PoimenServer, result: LookupResult, where: object) -> None:
    """Show a result: as a Markdown document where the client can open one, else as a
    message (both VS Code and Neovim render these)."""
    whole = sys.maxsize  # the whole text of each memory, not a hover's excerpt
    if get_capability(ls.client_capabilities, "window.show_document.support", False):
        digest = hashlib.sha256(
            json.dumps(where, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        target = scratch_dir(ls.state.config) / f"memories-{digest}.md"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(render_hover(result, whole, markdown=True), "utf-8")
            await ls.window_show_document_async(
                types.ShowDocumentParams(uri=target.as_uri(), take_focus=True)
            )
            return
        except Exception as exc:  # fall back to a message
            log.info("showDocument failed: %s", exc)
    text = render_hover(result, whole, markdown=False)
    ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, text))


async def show_memories(ls: PoimenServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """mem.showMemories (the lens's command): by-git on a document's lines (``uri``
    required), shown to the user; answers the lookup's JSON."""
    body = _argument(args)

    def run() -> LookupResult:
        located = locate(ls, body, required=True) if isinstance(body, Mapping) else body
        return ls.service.by_git(ByGitRequest.parse(located))

    result = await _answer(ls, run)
    await _present(ls, result, args[0] if args else None)
    return result.to_json()


async def refresh(ls: PoimenServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """mem.refresh: drop every cached answer and blame, and refresh the lenses."""
    dropped = ls.state.services.service.invalidate() if ls.state.services else 0
    if ls.state.services is not None:
        checkouts = ls.state.services.service.checkouts
        for identity in checkouts.identities():
            checkouts.blamer(identity)[1].forget()
    ls.refresh_lenses()
    return RefreshResponse(invalidated=dropped).model_dump(mode="json")


async def ping(ls: PoimenServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """mem.ping: the server's version, at once (liveness)."""
    return PingResponse(version=__version__).model_dump(mode="json")


COMMANDS: Final[Mapping[str, Command]] = {
    **{op.lsp_command: _operation_command(op) for op in OPERATIONS},
    commands.SHOW_MEMORIES: show_memories,
    commands.REFRESH: refresh,
    commands.PING: ping,
}
"""Every command the server runs, by id (all of ``commands.ALL``); each takes the server
and the command's arguments."""
