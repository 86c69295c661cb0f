"""The language server: hover, code lens and commands over the lookup service (pygls).

Handlers are thin: find the document and position, call one service function in a worker
thread, convert the result to an lsprotocol type. Degradation is the rule: a file outside a
repository, untracked, binary or too large gets nothing; an unreachable store is reported
once and requests keep answering quickly; nothing a request does can stop the server.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import logging
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from poimen_memory import __version__
from poimen_memory.domain import ContentError, ProjectId, Sha256Hash
from poimen_memory.lookup import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    Checkouts,
    ConfigError,
    DocumentMemories,
    IngestListener,
    LineMemory,
    LookupFailed,
    LookupInputError,
    LookupResult,
    LookupService,
    QueryRequest,
    StoreUnavailable,
    new_checkouts,
    open_store,
    project_for,
    scratch_dir,
)
from poimen_memory.lsp import commands
from poimen_memory.lsp.config import SECTION, Config, parse_config
from poimen_memory.render import render_hover

__all__ = ["PoimenServer", "create_server"]

log = logging.getLogger("poimen_memory.lsp")
T = TypeVar("T")

UNREACHABLE = "poimen-memory: memory store unreachable"
_LEVELS = {
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}
_MESSAGE_TYPES = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


@dataclass
class _DocLenses:
    """The lenses of one document version (only the lenses: memories are not kept)."""

    version: int | None
    lenses: list[types.CodeLens] | None


@dataclass
class ServerState:
    """What the server holds between requests."""

    config: Config = field(default_factory=Config)
    service: LookupService | None = None
    checkouts: Checkouts | None = None
    roots: list[Path] = field(default_factory=list)
    lenses: dict[str, _DocLenses] = field(default_factory=dict)
    unreachable_reported: bool = False
    listener: IngestListener | None = None


class PoimenServer(LanguageServer):
    """The poimen-memory language server."""

    def __init__(self) -> None:
        super().__init__(
            "poimen-memory",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.state = ServerState()
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="poimen")
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._rendered: dict[tuple[int, int, bool], tuple[LookupResult, str]] = {}

    # -- plumbing ---------------------------------------------------------------------------

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking service call in a worker thread (the event loop keeps serving)."""
        loop = asyncio.get_running_loop()
        self.loop = loop
        return await loop.run_in_executor(self.executor, fn, *args)

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the server's event loop, from any thread."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn)

    def capability(self, *path: str) -> Any:
        """A client capability by attribute path, or None where the client leaves it out."""
        node: Any = self.client_capabilities
        for name in path:
            node = getattr(node, name, None)
            if node is None:
                return None
        return node

    @property
    def service(self) -> LookupService:
        """The lookup service (built at initialize)."""
        if self.state.service is None:
            raise StoreUnavailable("the server is not initialized")
        return self.state.service

    def project(self) -> ProjectId | None:
        """The configured project, else None (the service derives it from the repository)."""
        value = self.state.config.project
        return ProjectId(value) if value else None

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
        """Ask the client to re-request code lenses, where it supports that."""
        self.state.lenses.clear()
        if self.capability("workspace", "code_lens", "refresh_support"):
            self.workspace_code_lens_refresh(None)

    def apply_config(self, raw: object, *, base: Config | None = None) -> None:
        """Take new settings; report invalid ones (name and value) and use their defaults."""
        old = self.state.config
        config, problems = parse_config(raw, base or old)
        self.state.config = config
        logging.getLogger("poimen_memory").setLevel(_LEVELS[config.log_level])
        for problem in problems:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Warning, problem))
        if self.state.checkouts is not None and (
            config.dsn != old.dsn
            or config.repo != old.repo
            or config.detect_moves != old.detect_moves
        ):
            self.rebuild_service()
        elif self.state.service is not None and config.project != old.project:
            self.state.service.default_project = self.project()
        self.state.lenses.clear()

    def rebuild_service(self) -> None:
        """(Re)create the store and the service from the current settings."""
        config = self.state.config
        old = self.state.service
        checkouts = new_checkouts(config.repo, config.detect_moves)
        for root in self.state.roots:
            try:
                checkouts.add(root)
            except LookupFailed as exc:
                log.info("workspace folder %s: %s", root, exc)
        self.state.checkouts = checkouts
        try:
            store = open_store(config.dsn, timeout=1.5, statement_timeout_ms=1500, lazy=True)
        except (ConfigError, ContentError, StoreUnavailable) as exc:
            self.window_show_message(
                types.ShowMessageParams(types.MessageType.Error, f"poimenMemory.dsn: {exc}")
            )
            store = open_store(None, timeout=1.5, statement_timeout_ms=1500, lazy=True)
        self.state.service = LookupService(store, checkouts, self.project())
        # Connect now, in the background, so the first hover does not pay for it.
        threading.Thread(target=store.warm_up, name="poimen-connect", daemon=True).start()
        if old is not None:
            threading.Thread(target=old.store.close, daemon=True).start()
        self.start_listener()

    def start_listener(self) -> None:
        """LISTEN for ingests; drop what is cached for the repository and refresh lenses."""
        if self.state.listener is not None:
            self.state.listener.stop()
        service = self.state.service
        if service is None:
            return

        def on_ingest(project: str, repo: str) -> None:
            def apply() -> None:
                known = {r.value for r in service.checkouts.identities()}
                if repo not in known:
                    return
                dropped = service.invalidate()
                log.info("ingest into %s (%s): dropped %d cached documents", project, repo, dropped)
                self.refresh_lenses()

            self.call_soon(apply)

        self.state.listener = IngestListener(service.store.dsn, on_ingest)
        self.state.listener.start()

    def workspace_path(self, uri: str) -> Path | None:
        """The file system path of a ``file:`` URI inside a workspace folder, else None."""
        if not uri.startswith("file:"):
            return None
        raw = to_fs_path(uri)
        if raw is None:
            return None
        path = Path(raw)
        try:
            resolved = path.resolve()
        except OSError:
            return None
        if self.state.roots and not any(resolved.is_relative_to(r) for r in self.state.roots):
            return None
        return path

    def document_text(self, uri: str) -> tuple[str | None, int | None]:
        """The buffer's text and version, if the client opened it."""
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return None, None
        return doc.source, doc.version

    def rendered(self, result: LookupResult, excerpt: int, markdown: bool) -> str:
        """The hover text of a result, remembered while the service keeps that result."""
        key = (id(result), excerpt, markdown)
        hit = self._rendered.get(key)
        if hit is not None and hit[0] is result:
            return hit[1]
        text = render_hover(result, excerpt, markdown)
        self._rendered[key] = (result, text)
        while len(self._rendered) > 256:
            self._rendered.pop(next(iter(self._rendered)))
        return text

    def markdown(self) -> bool:
        """Whether hovers are Markdown for this client (setting, else its capabilities)."""
        choice = self.state.config.hover_markup
        if choice != "auto":
            return choice == "markdown"
        formats = self.capability("text_document", "hover", "content_format")
        return not formats or types.MarkupKind.Markdown in formats


class _LogToClient(logging.Handler):
    """Forwards log records to window/logMessage."""

    def __init__(self, server: PoimenServer) -> None:
        super().__init__()
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            kind = _MESSAGE_TYPES.get(record.levelno, types.MessageType.Log)
            self.server.call_soon(
                lambda: self.server.window_log_message(types.LogMessageParams(kind, message))
            )
        except Exception:  # a log line must never take the server down
            return


def _give_back_memory() -> None:
    """Return freed heap to the system after a large document (glibc keeps it otherwise)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _load_libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


_LIBC = _load_libc()


# -- lenses --------------------------------------------------------------------------------------


_BLOCK_LINES = 20  # a lens at least every 20 lines of a long run of remembered lines


def _blocks(doc: DocumentMemories) -> list[tuple[int, int, tuple[LineMemory, ...]]]:
    """Runs of consecutive lines with memories, at most _BLOCK_LINES long:
    (first, last, the memories of those lines, each once)."""
    out: list[tuple[int, int, tuple[LineMemory, ...]]] = []
    current: dict[Sha256Hash, LineMemory] = {}
    first = last = 0
    for line in sorted(doc.by_line):
        if current and (line != last + 1 or line - first >= _BLOCK_LINES):
            out.append((first, last, tuple(current.values())))
            current = {}
        if not current:
            first = line
        last = line
        for m in doc.by_line[line]:
            current.setdefault(m.sha, m)
    if current:
        out.append((first, last, tuple(current.values())))
    return out


def _lens_title(memories: Iterable[LineMemory]) -> str:
    newest_first = sorted(memories, key=lambda m: m.citation.commit.author_date, reverse=True)
    distinct = list(dict.fromkeys(m.sha for m in newest_first))
    count = f"{len(distinct)} memor{'y' if len(distinct) == 1 else 'ies'}"
    authors: list[str] = []
    for m in newest_first:
        commit = m.citation.commit
        name = commit.author_name.split(" ")[0] or commit.author_email
        if name not in authors:
            authors.append(name)
    parts = [count]
    if authors:
        parts.append(", ".join(authors[:2]) + (f" +{len(authors) - 2}" if len(authors) > 2 else ""))
    if newest_first:
        summary = newest_first[0].citation.commit.summary
        parts.append(summary if len(summary) <= 48 else summary[:47] + "…")
    return " · ".join(parts)


def build_lenses(uri: str, doc: DocumentMemories, file_summary: bool) -> list[types.CodeLens]:
    """One lens above each block of lines with memories, and one at the top with the total."""
    lenses = []
    if file_summary and doc.by_line:
        total = doc.total
        lenses.append(
            types.CodeLens(
                range=types.Range(types.Position(0, 0), types.Position(0, 0)),
                command=types.Command(
                    title=f"{total} memor{'y' if total == 1 else 'ies'} in this file",
                    command=commands.SHOW_MEMORIES,
                    arguments=[{"uri": uri}],
                ),
            )
        )
    for first, last, memories in _blocks(doc):
        lenses.append(
            types.CodeLens(
                range=types.Range(types.Position(first - 1, 0), types.Position(first - 1, 0)),
                command=types.Command(
                    title=_lens_title(memories),
                    command=commands.SHOW_MEMORIES,
                    arguments=[{"uri": uri, "lines": [first, last]}],
                ),
            )
        )
    return lenses


# -- the server ----------------------------------------------------------------------------------


def _invalid(exc: Exception) -> JsonRpcInvalidParams:
    field_name = getattr(exc, "field", None) or str(exc).split(":", 1)[0]
    return JsonRpcInvalidParams(message=str(exc), data={"field": field_name})


def create_server() -> PoimenServer:
    """A server with every feature and command registered."""
    server = PoimenServer()
    handler = _LogToClient(server)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logging.getLogger("poimen_memory").addHandler(handler)
    logging.getLogger("poimen_memory").setLevel(logging.WARNING)

    @server.feature(types.INITIALIZE)
    def initialize(ls: PoimenServer, params: types.InitializeParams) -> None:
        try:
            ls.loop = asyncio.get_running_loop()
        except RuntimeError:
            ls.loop = None
        roots: list[Path] = []
        for folder in params.workspace_folders or []:
            path = to_fs_path(folder.uri)
            if path:
                roots.append(Path(path).resolve())
        if not roots and params.root_uri:
            path = to_fs_path(params.root_uri)
            if path:
                roots.append(Path(path).resolve())
        if not roots and params.root_path:
            roots.append(Path(params.root_path).resolve())
        ls.state.roots = roots
        ls.apply_config(params.initialization_options, base=Config())
        ls.rebuild_service()

    @server.feature(types.INITIALIZED)
    async def initialized(ls: PoimenServer, params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        await pull_configuration(ls)

    async def pull_configuration(ls: PoimenServer) -> None:
        if not ls.capability("workspace", "configuration"):
            return
        try:
            values = await ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
        except Exception as exc:  # a client that cannot answer keeps its settings
            log.info("workspace/configuration failed: %s", exc)
            return
        if values and values[0] is not None:
            ls.apply_config(values[0])

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: PoimenServer, params: types.DidChangeConfigurationParams
    ) -> None:
        settings = params.settings
        if isinstance(settings, dict) and SECTION in settings:
            ls.apply_config(settings[SECTION])
        else:
            await pull_configuration(ls)
        ls.refresh_lenses()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: PoimenServer, params: None) -> None:
        if ls.state.listener is not None:
            ls.state.listener.stop()

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: PoimenServer, params: types.HoverParams) -> types.Hover | None:
        config = ls.state.config
        if not config.hover_enabled:
            return None
        path = ls.workspace_path(params.text_document.uri)
        if path is None:
            return None
        text, _ = ls.document_text(params.text_document.uri)
        line = params.position.line + 1
        try:
            result = await ls.run_blocking(
                ls.service.hover, path, line, text, ls.project(), config.max_file_bytes
            )
        except StoreUnavailable as exc:
            ls.store_failed(exc)
            return types.Hover(
                contents=types.MarkupContent(types.MarkupKind.PlainText, UNREACHABLE)
            )
        except (LookupFailed, ContentError) as exc:
            log.info("hover %s:%d: %s", path, line, exc)
            return None
        ls.store_ok()
        if result is None:
            return None
        markdown = ls.markdown()
        return types.Hover(
            contents=types.MarkupContent(
                types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText,
                ls.rendered(result, config.hover_excerpt_length, markdown),
            ),
            range=types.Range(
                types.Position(params.position.line, 0), types.Position(params.position.line + 1, 0)
            ),
        )

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=True))
    async def code_lens(
        ls: PoimenServer, params: types.CodeLensParams
    ) -> list[types.CodeLens] | None:
        config = ls.state.config
        if not config.code_lens_enabled:
            return None
        uri = params.text_document.uri
        path = ls.workspace_path(uri)
        if path is None:
            return None
        text, version = ls.document_text(uri)
        cached = ls.state.lenses.get(uri)
        if cached is not None and cached.version == version and version is not None:
            return cached.lenses
        try:
            doc = await with_progress(
                ls,
                "poimen-memory: blaming " + path.name,
                ls.service.needs_blame(path),
                ls.run_blocking(
                    ls.service.document, path, text, ls.project(), config.max_file_bytes
                ),
            )
        except StoreUnavailable as exc:
            ls.store_failed(exc)
            return None
        except (LookupFailed, ContentError) as exc:
            log.info("code lens %s: %s", path, exc)
            return None
        ls.store_ok()
        lenses = None if doc is None else build_lenses(uri, doc, config.code_lens_file_summary)
        ls.state.lenses[uri] = _DocLenses(version, lenses)
        del doc
        _give_back_memory()
        return lenses

    @server.feature(types.CODE_LENS_RESOLVE)
    def code_lens_resolve(ls: PoimenServer, lens: types.CodeLens) -> types.CodeLens:
        # Lenses are sent resolved; a client that drops the command and asks again gets it
        # back from the lens's data (the same arguments the command carried).
        if lens.command is None and isinstance(lens.data, dict):
            title = "memories"
            cached = ls.state.lenses.get(str(lens.data.get("uri")))
            for known in (cached.lenses or []) if cached is not None else []:
                if known.command is not None and known.command.arguments == [lens.data]:
                    title = known.command.title
            lens.command = types.Command(
                title=title, command=commands.SHOW_MEMORIES, arguments=[lens.data]
            )
        return lens

    async def with_progress(ls: PoimenServer, title: str, long: bool, work: Awaitable[T]) -> T:
        if not long or not ls.capability("window", "work_done_progress"):
            return await work
        token = str(uuid.uuid4())
        try:
            await ls.work_done_progress.create_async(token)
            ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title))
        except Exception as exc:  # no progress is better than no lenses
            log.debug("progress not available: %s", exc)
            return await work
        try:
            return await work
        finally:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd())

    # -- commands ------------------------------------------------------------------------

    def one_object(args: tuple[Any, ...]) -> dict[str, Any]:
        if len(args) != 1 or not isinstance(args[0], dict):
            got = json.dumps(list(args), default=str)[:120]
            raise JsonRpcInvalidParams(
                message=f"arguments: expected one JSON object, got {got}",
                data={"field": "arguments"},
            )
        return args[0]

    def with_location(ls: PoimenServer, body: dict[str, Any]) -> dict[str, Any]:
        """Turn a ``uri`` argument into ``file`` + ``repo`` of the workspace checkout."""
        uri = body.get("uri")
        if uri is None:
            return body
        if not isinstance(uri, str):
            raise LookupInputError("uri", f"expected a file URI, got {uri!r}")
        path = ls.workspace_path(uri)
        if path is None:
            raise LookupInputError("uri", f"{uri!r} is not a file in this workspace")
        try:
            identity, _, rel = ls.service.checkouts.locate(path)
        except LookupFailed as exc:
            raise LookupInputError("uri", str(exc)) from None
        out = {k: v for k, v in body.items() if k != "uri"}
        out.update({"file": rel, "repo": identity.value})
        return out

    async def answer(ls: PoimenServer, run: Callable[[], LookupResult]) -> dict[str, Any]:
        try:
            result = await ls.run_blocking(run)
        except (LookupInputError, ContentError) as exc:
            raise _invalid(exc) from None
        except StoreUnavailable as exc:
            ls.store_failed(exc)
            raise JsonRpcInternalError(message=f"{UNREACHABLE}: {exc}") from None
        except LookupFailed as exc:
            raise JsonRpcInvalidParams(message=str(exc), data={"field": "repo"}) from None
        except JsonRpcException:
            raise
        except Exception as exc:
            # A bug, not the caller's fault: logged with its stack, answered without it.
            log.exception("command failed")
            raise JsonRpcInternalError(message=f"internal error: {type(exc).__name__}") from None
        ls.store_ok()
        return result.to_json()

    def default_project(ls: PoimenServer) -> ProjectId | None:
        configured = ls.project()
        if configured is not None:
            return configured
        ids = ls.service.checkouts.identities() if ls.state.service else []
        return project_for(ids[0]) if len(ids) == 1 else None

    @server.command(commands.BY_GIT)
    async def by_git(ls: PoimenServer, *args: Any) -> dict[str, Any]:
        def run() -> LookupResult:
            body = with_location(ls, one_object(args))
            return ls.service.by_git(ByGitRequest.from_json(body, default_project(ls)))

        return await answer(ls, run)

    @server.command(commands.BY_COMMIT)
    async def by_commit(ls: PoimenServer, *args: Any) -> dict[str, Any]:
        body = one_object(args)
        return await answer(
            ls, lambda: ls.service.by_commit(ByCommitRequest.from_json(body, default_project(ls)))
        )

    @server.command(commands.BY_AUTHOR)
    async def by_author(ls: PoimenServer, *args: Any) -> dict[str, Any]:
        body = one_object(args)
        return await answer(
            ls, lambda: ls.service.by_author(ByAuthorRequest.from_json(body, default_project(ls)))
        )

    @server.command(commands.QUERY)
    async def query(ls: PoimenServer, *args: Any) -> dict[str, Any]:
        body = one_object(args)
        return await answer(
            ls, lambda: ls.service.query(QueryRequest.from_json(body, default_project(ls)))
        )

    @server.command(commands.SHOW_MEMORIES)
    async def show_memories(ls: PoimenServer, *args: Any) -> dict[str, Any]:
        body = one_object(args)
        lines = body.get("lines")
        if lines is not None and not (
            isinstance(lines, list)
            and len(lines) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in lines)
        ):
            raise _invalid(LookupInputError("lines", f"expected [start, end] >= 1, got {lines!r}"))

        if "uri" not in body:
            raise _invalid(LookupInputError("uri", "required: the document to show memories of"))

        def run() -> LookupResult:
            located = with_location(ls, body)
            request = {"file": located["file"], "repo": located["repo"], "line": 0}
            if lines is not None:
                request = {"file": located["file"], "repo": located["repo"], "lines": lines}
            return ls.service.by_git(ByGitRequest.from_json(request, default_project(ls)))

        result = await answer(ls, run)
        await present(ls, result, body)
        return result

    async def present(ls: PoimenServer, result: dict[str, Any], where: dict[str, Any]) -> None:
        """Show a result: as a Markdown document where the client can open one, else as a
        message (both VS Code and Neovim render these)."""
        text = _result_text(result)
        if ls.capability("window", "show_document", "support"):
            folder = scratch_dir()
            digest = hashlib.sha256(json.dumps(where, sort_keys=True).encode()).hexdigest()[:16]
            target = folder / f"memories-{digest}.md"
            try:
                folder.mkdir(parents=True, exist_ok=True)
                target.write_text(text, "utf-8")
                await ls.window_show_document_async(
                    types.ShowDocumentParams(uri=target.as_uri(), take_focus=True)
                )
                return
            except Exception as exc:  # fall back to a message
                log.info("showDocument failed: %s", exc)
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Info, text))

    @server.command(commands.PING)
    def ping(ls: PoimenServer, *args: Any) -> dict[str, Any]:
        return {"version": __version__}

    @server.command(commands.REFRESH)
    async def refresh(ls: PoimenServer, *args: Any) -> dict[str, Any]:
        dropped = ls.state.service.invalidate() if ls.state.service else 0
        if ls.state.checkouts is not None:
            for identity in ls.state.checkouts.identities():
                ls.state.checkouts.blamer(identity)[1].forget()
        ls.refresh_lenses()
        return {"invalidated": dropped}

    return server


def _result_text(result: dict[str, Any]) -> str:
    """Markdown of a result's JSON (the command's answer, rendered for people)."""
    lines = ["# poimen-memory", ""]
    if not result["nodes"]:
        lines.append("No memories here.")
    for node in result["nodes"]:
        lines.append(f"## {node['level']} · {node['brief']}")
        lines.append("")
        lines.append(node["text"])
        if node.get("git_ref"):
            commit = node["git_commit"]
            lines.append("")
            summary = commit["message"].split("\n", 1)[0]
            lines.append(
                f"`{node['git_ref']}` (commit `{commit['sha'][:7]}`) {summary} — "
                f"{commit['author_name']} <{commit['author']}>, {commit['date'][:10]}"
            )
        lines.append("")
    return "\n".join(lines)
