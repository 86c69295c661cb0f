"""workspace/executeCommand: the lookups, one table of command -> request model -> service
method, and the two housekeeping commands.

A command's argument is validated by its request model's ``parse``, so a bad one gets the
same words as on HTTP and the CLI: ``InvalidParams`` whose message is ``field: what is
wrong`` and whose data names the field. Answers are the response model's JSON.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams

from poimen_memory import __version__
from poimen_memory.domain import ContentError, ProjectId
from poimen_memory.errors import StoreUnavailable
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupFailed,
    LookupInputError,
    LookupRequest,
    LookupResult,
    LookupService,
    QueryRequest,
    RememberRequest,
    RememberResponse,
    project_for,
)
from poimen_memory.lsp import UNREACHABLE, commands
from poimen_memory.lsp.documents import locate
from poimen_memory.render import render_hover
from poimen_memory.wiring import scratch_dir

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = ["COMMANDS", "LOOKUPS", "Command", "Lookup"]

log = logging.getLogger("poimen_memory.lsp")
R = TypeVar("R", bound=LookupRequest)
A = TypeVar("A")
Command = Callable[["PoimenServer", tuple[Any, ...]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Lookup(Generic[R]):
    """A lookup command: the request model of its argument and the service method that
    answers it. ``uri``: whether the argument may (or must) name its file by a document URI
    of the workspace; ``show``: the answer is also shown to the user."""

    request: type[R]
    answer: Callable[[LookupService, R], LookupResult]
    uri: Literal["optional", "required"] | None = None
    show: bool = False


LOOKUPS: Final[Mapping[str, Lookup[Any]]] = {
    commands.BY_GIT: Lookup(ByGitRequest, LookupService.by_git, uri="optional"),
    commands.BY_COMMIT: Lookup(ByCommitRequest, LookupService.by_commit),
    commands.BY_AUTHOR: Lookup(ByAuthorRequest, LookupService.by_author),
    commands.QUERY: Lookup(QueryRequest, LookupService.query),
    # The lens's command: byGit on the document's lines, shown.
    commands.SHOW_MEMORIES: Lookup(ByGitRequest, LookupService.by_git, uri="required", show=True),
}


def _default_project(ls: PoimenServer) -> ProjectId | None:
    """The configured project, else that of the workspace's only repository."""
    configured = ls.project()
    if configured is not None:
        return configured
    ids = ls.service.checkouts.identities() if ls.state.service else []
    return project_for(ids[0]) if len(ids) == 1 else None


def _look_up(ls: PoimenServer, lookup: Lookup[Any], args: tuple[Any, ...]) -> LookupResult:
    """Validate the command's one argument and answer it (in a worker thread)."""
    body = args[0] if len(args) == 1 else list(args)
    if lookup.uri is not None and isinstance(body, Mapping):
        body = locate(ls, body, required=lookup.uri == "required")
    return lookup.answer(ls.service, lookup.request.parse(body, _default_project(ls)))


def _invalid(exc: ContentError) -> JsonRpcInvalidParams:
    field = getattr(exc, "field", None) or str(exc).split(":", 1)[0]
    return JsonRpcInvalidParams(message=str(exc), data={"field": field})


async def _answer(ls: PoimenServer, run: Callable[[], A]) -> A:
    """Run a lookup in a worker; its failures as JSON-RPC errors (never a traceback)."""
    try:
        result = await ls.run_blocking(run)
    except (LookupInputError, ContentError) as exc:
        raise _invalid(exc) from None
    except StoreUnavailable as exc:
        ls.store_failed(exc)
        raise JsonRpcInternalError(message=f"{UNREACHABLE}: {exc}") from None
    except LookupFailed as exc:
        raise JsonRpcInvalidParams(message=str(exc), data={"field": "repo"}) from None
    except Exception as exc:
        # A bug, not the caller's fault: logged with its stack, answered without it.
        log.exception("command failed")
        raise JsonRpcInternalError(message=f"internal error: {type(exc).__name__}") from None
    ls.store_ok()
    return result


async def _present(ls: PoimenServer, result: LookupResult, where: object) -> None:
    """Show a result: as a Markdown document where the client can open one, else as a
    message (both VS Code and Neovim render these)."""
    whole = sys.maxsize  # the whole text of each memory, not a hover's excerpt
    if get_capability(ls.client_capabilities, "window.show_document.support", False):
        digest = hashlib.sha256(
            json.dumps(where, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        target = scratch_dir() / f"memories-{digest}.md"
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


def _lookup_command(lookup: Lookup[Any]) -> Command:
    """The handler of one lookup command."""

    async def run(ls: PoimenServer, args: tuple[Any, ...]) -> dict[str, Any]:
        result = await _answer(ls, lambda: _look_up(ls, lookup, args))
        if lookup.show:
            await _present(ls, result, args[0])
        return result.to_json()

    return run


async def remember(ls: PoimenServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """mem.remember: record a memory on lines of a file (``uri`` or ``file``), as the saved
    file has them; committed lines are anchored now, the others once committed."""
    body = args[0] if len(args) == 1 else list(args)

    def run() -> RememberResponse:
        located = locate(ls, body, required=False) if isinstance(body, Mapping) else body
        recorder = ls.state.recorder
        if recorder is None:
            raise LookupFailed("the server is not initialized yet")
        return recorder.remember(RememberRequest.parse(located, _default_project(ls)))

    out = await _answer(ls, run)
    ls.refresh_lenses()
    return out.model_dump(mode="json")


async def refresh(ls: PoimenServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """mem.refresh: drop every cached answer and blame, and refresh the lenses."""
    dropped = ls.state.service.invalidate() if ls.state.service else 0
    if ls.state.checkouts is not None:
        for identity in ls.state.checkouts.identities():
            ls.state.checkouts.blamer(identity)[1].forget()
    ls.refresh_lenses()
    return {"invalidated": dropped}


async def ping(ls: PoimenServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """mem.ping: the server's version, at once (liveness)."""
    return {"version": __version__}


COMMANDS: Final[Mapping[str, Command]] = {
    **{command: _lookup_command(lookup) for command, lookup in LOOKUPS.items()},
    commands.REFRESH: refresh,
    commands.PING: ping,
    commands.REMEMBER: remember,
}
"""Every command the server runs, by id (all of ``commands.ALL``); each takes the server
and the command's arguments."""
