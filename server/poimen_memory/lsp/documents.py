"""Documents: which files of the workspace a request is about, their buffer text, and the
``uri`` a command argument may name its file by."""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from poimen_memory.lookup import DocumentRequest, LookupFailed, LookupInputError
from poimen_memory.lsp import buffers
from poimen_memory.lsp.buffers import Buffer

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = [
    "Document",
    "PendingRoots",
    "did_open",
    "give_back_memory",
    "locate",
    "open_document",
    "workspace_path",
    "workspace_roots",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Document:
    """A file of the workspace as a request sees it: its path, and the buffer and its version
    when the client has it open (None: the file on disk)."""

    uri: str
    path: Path
    buffer: TextDocument | None
    version: int | None

    @property
    def text(self) -> str | None:
        """The buffer's text, None when it is not open. Queued edits are applied here, so
        read it in a worker thread, never on the event loop."""
        return None if self.buffer is None else self.buffer.source

    def over_lines(self, max_lines: int) -> bool:
        """Whether the open buffer has more than ``max_lines`` lines (known without building
        its text)."""
        return isinstance(self.buffer, Buffer) and self.buffer.line_breaks > max_lines


class PendingRoots:
    """Workspace folders whose repository is still being found (in a thread of its own: a
    file in ``.git`` that never ends, such as a FIFO, must block nothing else). Their files
    are treated as outside the workspace until it is found, so no request waits on them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # held for a set operation only, never across a read
        self._roots: frozenset[Path] = frozenset()

    def begin(self, root: Path) -> bool:
        """Mark ``root`` pending; False when it already is (a search is still under way)."""
        with self._lock:
            if root in self._roots:
                return False
            self._roots = self._roots | {root}
            return True

    def end(self, root: Path) -> None:
        """``root``'s search has finished, found or not."""
        with self._lock:
            self._roots = self._roots - {root}

    def __contains__(self, root: object) -> bool:
        return root in self._roots

    def covers(self, path: Path) -> bool:
        """Whether ``path`` is in a pending folder."""
        return any(path.is_relative_to(root) for root in self._roots)


def workspace_roots(params: types.InitializeParams) -> list[Path]:
    """The workspace folders, else the root URI, else the root path (older clients); none
    when the client names none, and then no file is in the workspace."""
    folders = [_local_path(folder.uri) for folder in params.workspace_folders or []]
    roots = [r for p in folders if p is not None and (r := _resolved(p)) is not None]
    if not roots and params.root_uri and (path := _local_path(params.root_uri)) is not None:
        roots = [r] if (r := _resolved(path)) is not None else []
    if not roots and params.root_path and os.path.isabs(params.root_path):
        roots = [r] if (r := _resolved(Path(params.root_path))) is not None else []
    return roots


def _local_path(uri: str) -> Path | None:
    """The local path a ``file:`` URI names; None for any other URI and for one that does
    not decode to an absolute local path (another host, a NUL byte, a relative path)."""
    if not uri.startswith("file:"):
        return None
    try:
        raw = to_fs_path(uri)
    except ValueError:
        return None
    if not raw or "\x00" in raw or raw.startswith("//") or not os.path.isabs(raw):
        return None
    return Path(raw)


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, ValueError):  # a loop of links, a name the file system cannot encode
        return None


def workspace_path(ls: PoimenServer, uri: str) -> Path | None:
    """The file system path of a ``file:`` URI inside a workspace folder, else None (with
    no workspace folder, no file is inside one)."""
    path = _local_path(uri)
    if path is None:
        return None
    resolved = _resolved(path)
    if resolved is None or not any(resolved.is_relative_to(root) for root in ls.state.roots):
        return None
    if ls.state.pending_roots.covers(resolved):
        return None
    return path


def open_document(ls: PoimenServer, uri: str) -> Document | None:
    """The document at ``uri`` if it is a file of the workspace, with the open buffer."""
    path = workspace_path(ls, uri)
    if path is None:
        return None
    # pygls keys its documents by the unquoted URI.
    doc = ls.workspace.text_documents.get(unquote(uri))
    return Document(uri, path, doc, None if doc is None else doc.version)


def did_open(ls: PoimenServer, params: types.DidOpenTextDocumentParams) -> None:
    """The document is the client's now (``buffers.did_open``); its first hover or code lens
    is readied in a worker meanwhile (``LookupService.prepare``: no blame)."""
    buffers.did_open(ls, params)
    config = ls.state.config
    if ls.state.services is None or not (config.hover.enabled or config.code_lens.enabled):
        return
    if ls.ready_slots.acquire(blocking=False):
        ls.readying.submit(_prepare, ls, params.text_document.uri)


def _prepare(ls: PoimenServer, uri: str) -> None:
    try:
        doc = open_document(ls, uri)
        if doc is None or doc.over_lines(ls.state.config.blame.max_file_lines):
            return
        ls.service.prepare(DocumentRequest(file=str(doc.path), text=doc.text))
    except Exception as exc:  # only a head start: the lookup meets and reports it again
        log.debug("%s not readied: %s: %s", uri, type(exc).__name__, exc)
    finally:
        ls.ready_slots.release()


def locate(ls: PoimenServer, body: Mapping[str, Any], required: bool) -> Mapping[str, Any]:
    """A command argument with its ``uri`` turned into the ``file`` and ``repo`` of the
    workspace checkout (``uri: required`` when the command needs one and it is missing)."""
    uri = body.get("uri")
    if uri is None:
        if required:
            raise LookupInputError("uri", "required")
        return body
    if not isinstance(uri, str):
        raise LookupInputError("uri", f"expected a file URI, got {uri!r}")
    path = workspace_path(ls, uri)
    if path is None:
        raise LookupInputError("uri", f"{uri!r} is not a file in this workspace")
    try:
        identity, _, rel = ls.service.checkouts.locate(path)
    except LookupFailed as exc:
        raise LookupInputError("uri", str(exc)) from None
    located = {k: v for k, v in body.items() if k != "uri"}
    located.update({"file": rel, "repo": identity.value})
    return located


def _load_libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


_LIBC = _load_libc()


def give_back_memory() -> None:
    """Return freed heap to the system. A whole-file blame allocates and frees a lot at once
    and glibc keeps the freed pages, so without this the server's resident memory (the
    benchmark's figure h, 50 files with lenses) grows with every large document."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
