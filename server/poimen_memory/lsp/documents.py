"""Documents: which files of the workspace a request is about, their buffer text, and the
``uri`` a command argument may name its file by."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from poimen_memory.lookup import LookupFailed, LookupInputError

if TYPE_CHECKING:
    from poimen_memory.lsp.server import PoimenServer

__all__ = [
    "Document",
    "give_back_memory",
    "locate",
    "open_document",
    "workspace_path",
    "workspace_roots",
]


@dataclass(frozen=True, slots=True)
class Document:
    """A file of the workspace as a request sees it: its path, and the buffer's text and
    version when the client has it open (None: read it from disk)."""

    uri: str
    path: Path
    text: str | None
    version: int | None


def workspace_roots(params: types.InitializeParams) -> list[Path]:
    """The workspace folders, else the root URI, else the root path (older clients)."""
    folders = [to_fs_path(folder.uri) for folder in params.workspace_folders or []]
    roots = [Path(p).resolve() for p in folders if p]
    if not roots and params.root_uri and (path := to_fs_path(params.root_uri)):
        roots = [Path(path).resolve()]
    if not roots and params.root_path:
        roots = [Path(params.root_path).resolve()]
    return roots


def workspace_path(ls: PoimenServer, uri: str) -> Path | None:
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
    roots = ls.state.roots
    if roots and not any(resolved.is_relative_to(root) for root in roots):
        return None
    return path


def open_document(ls: PoimenServer, uri: str) -> Document | None:
    """The document at ``uri`` if it is a file of the workspace, with the buffer's text."""
    path = workspace_path(ls, uri)
    if path is None:
        return None
    doc = ls.workspace.text_documents.get(uri)
    if doc is None:
        return Document(uri, path, None, None)
    return Document(uri, path, doc.source, doc.version)


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
